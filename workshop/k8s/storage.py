"""Where a TrainJob's checkpoints and final model are kept: FSx for Lustre through a PVC, or S3.

The original workshop pointed `output_dir` at an FSx for Lustre mount so every node wrote to one shared
filesystem and a lost pod lost nothing. Here that is a typed StorageClass (the FSx CSI driver provisions the
file system on first use) and a ReadWriteMany PersistentVolumeClaim that every node pod mounts; the job writes
to `<mount>/<job name>` and resumes from the newest checkpoint there when it is restarted. The alternative is
S3: the pods write locally and `--sync-to` uploads each checkpoint and the final model, with credentials from
IRSA (a service account bound to an IAM role), never from the manifest.

FSx for Lustre needs TCP 988 and 1018-1023 between the file system and the nodes: putting it in the nodes'
security group whose self-referencing all-traffic rule EFA needs anyway (`workshop.k8s.efa`) covers both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workshop.errors import WorkshopError, check_choice
from workshop.k8s.base import check_dns_label
from workshop.lang import _
from workshop.train.outputs import parse_s3_uri

FSX_PROVISIONER = "fsx.csi.aws.com"
DEPLOYMENT_TYPES = ("SCRATCH_2", "PERSISTENT_2", "PERSISTENT_1")
PERSISTENT_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
STORAGE_KINDS = ("fsx", "s3")
DEFAULT_MOUNT = "/fsx"
_SUBNET = re.compile(r"^subnet-[0-9a-f]{8,17}$")
_SG = re.compile(r"^sg-[0-9a-f]{8,17}$")
_GI = re.compile(r"^(\d+)Gi$")
# On a claim: `models.workshop.example.com/<job>: /fsx/<job>/final` says TrainJob <job> ended Complete with
# --save-model and its trained model is on this claim. `jobs.run_on_cluster` sets it before it deletes the
# finished job; `workshop cluster teardown` keeps such a claim unless told --keep-model or --delete-model. For
# a job run another way: kubectl annotate pvc <claim> -n <ns>
# models.workshop.example.com/<job>=/fsx/<job>/final
MODEL_ANNOTATION = "models.workshop.example.com/"


def _labels() -> dict:
    return {"app.kubernetes.io/part-of": "workshop"}


@dataclass
class FsxStorageClass:
    """Dynamic FSx for Lustre provisioning (aws-fsx-csi-driver). SCRATCH_2: cheapest, no replication (fine for
    a workshop's checkpoints); PERSISTENT_2: replicated, needs a per-TiB throughput."""

    subnet_id: str
    security_group_ids: list[str]
    name: str = "fsx-lustre"
    deployment_type: str = "SCRATCH_2"
    per_unit_storage_throughput: int | None = None
    reclaim_policy: str = "Retain"  # deleting the PVC must not delete the trained model

    def __post_init__(self) -> None:

        check_dns_label("StorageClass name", self.name)
        if not _SUBNET.match(str(self.subnet_id)):
            raise WorkshopError(
                _(
                    "subnet_id '{value}' is not a subnet id such as subnet-0abc12345def67890 (one of the "
                    "cluster's private subnets, in the nodes' zone)"
                ).format(value=self.subnet_id)
            )
        if not self.security_group_ids or not all(_SG.match(str(s)) for s in self.security_group_ids):
            raise WorkshopError(
                _("security_group_ids {value} must be ids such as sg-0abc12345def67890").format(
                    value=repr(self.security_group_ids)
                )
            )
        check_choice("FSx deployment type", self.deployment_type, DEPLOYMENT_TYPES)
        check_choice("reclaim policy", self.reclaim_policy, ("Retain", "Delete"))
        allowed = PERSISTENT_THROUGHPUT.get(self.deployment_type)
        if allowed:
            check_choice(
                f"per_unit_storage_throughput (MB/s/TiB) for {self.deployment_type}",
                self.per_unit_storage_throughput,
                allowed,
            )
        elif self.per_unit_storage_throughput is not None:
            raise WorkshopError("per_unit_storage_throughput applies to PERSISTENT_* deployments only")

    def to_dict(self) -> dict:
        params = {
            "subnetId": self.subnet_id,
            "securityGroupIds": ",".join(self.security_group_ids),
            "deploymentType": self.deployment_type,
            "fileSystemTypeVersion": "2.15",
        }
        if self.per_unit_storage_throughput:
            params["perUnitStorageThroughput"] = str(self.per_unit_storage_throughput)
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": self.name, "labels": _labels()},
            "provisioner": FSX_PROVISIONER,
            "parameters": params,
            "reclaimPolicy": self.reclaim_policy,
            "volumeBindingMode": "Immediate",
            "mountOptions": ["flock"],
        }


@dataclass
class OutputClaim:
    """A ReadWriteMany claim on the StorageClass: every node pod of the job mounts the same file system."""

    storage_class: str = "fsx-lustre"
    name: str = "workshop-outputs"
    namespace: str = "default"
    size: str = "1200Gi"

    def __post_init__(self) -> None:

        for what, value in (
            ("claim name", self.name),
            ("namespace", self.namespace),
            ("StorageClass name", self.storage_class),
        ):
            check_dns_label(what, value)
        m = _GI.match(str(self.size))
        # FSx for Lustre sizes: 1200 GiB, then steps of 2400 GiB (SCRATCH_2 / PERSISTENT_2)
        if not m or not (
            int(m.group(1)) == 1200 or (int(m.group(1)) >= 2400 and int(m.group(1)) % 2400 == 0)
        ):
            raise WorkshopError(
                _(
                    "FSx for Lustre size {size} must be 1200Gi or a multiple of 2400Gi (one Llama-3-8B "
                    "checkpoint with optimizer state is ~100 GiB; the final model 16 GiB)"
                ).format(size=repr(self.size))
            )

    def to_dict(self) -> dict:
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": _labels()},
            "spec": {
                "accessModes": ["ReadWriteMany"],
                "storageClassName": self.storage_class,
                "resources": {"requests": {"storage": self.size}},
            },
        }


@dataclass
class OutputStorage:
    """What the TrainJob needs to keep its outputs: a claim to mount (fsx) or a bucket and a service account
    (s3)."""

    kind: str = "fsx"
    claim: OutputClaim | None = None
    storage_class: FsxStorageClass | None = None
    s3_uri: str | None = None
    service_account: str | None = None  # IRSA: bound to an IAM role that may write the bucket
    mount_path: str = DEFAULT_MOUNT
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        check_choice("output storage", self.kind, STORAGE_KINDS)
        if self.kind == "fsx" and self.claim is None:
            raise WorkshopError("output storage 'fsx' needs a claim (OutputClaim)")
        if self.kind == "s3":
            parse_s3_uri(self.s3_uri or "")
            if not self.service_account:
                raise WorkshopError(
                    _(
                        "output storage 's3' needs service_account: the IRSA service account whose IAM role "
                        "may write the bucket (credentials never go into the manifest)"
                    )
                )
        if not self.mount_path.startswith("/"):
            raise WorkshopError(f"mount_path {self.mount_path!r} must be an absolute path")

    def output_dir(self, job: str) -> str:
        """On the shared volume, one folder per job name: a resubmitted job finds its checkpoints again."""
        return f"{self.mount_path}/{job}" if self.kind == "fsx" else f"/workspace/out/{job}"

    def train_kwargs(self, job: str) -> dict:
        kw = {
            "output_dir": self.output_dir(job),
            "save_model": True,
            "resume": True,
            "save_total_limit": self.keep_checkpoints,
        }
        if self.kind == "s3":
            assert self.s3_uri is not None  # __post_init__ parsed it
            kw["sync_to"] = f"{self.s3_uri.rstrip('/')}/{job}"
        return kw

    def volumes(self) -> list[dict]:
        if self.kind != "fsx":
            return []
        assert self.claim is not None  # __post_init__ refused fsx without a claim
        return [{"name": "outputs", "persistentVolumeClaim": {"claimName": self.claim.name}}]

    def volume_mounts(self) -> list[dict]:
        return [{"name": "outputs", "mountPath": self.mount_path}] if self.kind == "fsx" else []

    def documents(self) -> list[dict]:
        """What must exist before the job: StorageClass (cluster-wide) and claim. Nothing for s3."""
        docs = [self.storage_class.to_dict()] if self.storage_class else []
        return docs + ([self.claim.to_dict()] if self.claim else [])


def fsx_storage(
    *,
    subnet_id: str,
    security_group_ids: list[str] | str,
    namespace: str = "default",
    size: str = "1200Gi",
    deployment_type: str = "SCRATCH_2",
    per_unit_storage_throughput: int | None = None,
    claim: str = "workshop-outputs",
    mount_path: str = DEFAULT_MOUNT,
) -> OutputStorage:
    """FSx for Lustre (an OutputStorage), as the original workshop used it: a StorageClass + claim, mounted
    at /fsx in every node pod. `size` is a Kubernetes quantity (1200Gi is SCRATCH_2's smallest),
    `per_unit_storage_throughput` MB/s per TiB (PERSISTENT types only)."""
    sgs = (
        [s.strip() for s in security_group_ids.split(",")]
        if isinstance(security_group_ids, str)
        else list(security_group_ids)
    )
    sc = FsxStorageClass(
        subnet_id=subnet_id,
        security_group_ids=sgs,
        deployment_type=deployment_type,
        per_unit_storage_throughput=per_unit_storage_throughput,
    )
    return OutputStorage(
        "fsx", claim=OutputClaim(sc.name, claim, namespace, size), storage_class=sc, mount_path=mount_path
    )


def s3_storage(uri: str, *, service_account: str) -> OutputStorage:
    """An OutputStorage of kind "s3": the TrainJob writes its outputs to the bucket prefix `uri` (s3://...)
    with the credentials of `service_account` (IRSA), and mounts no claim."""
    return OutputStorage("s3", s3_uri=uri, service_account=service_account)


# The checked-in manifests use these placeholders; render with your own ids (chapter 05's parameters).
EXAMPLE_SUBNET = "subnet-0123456789abcdef0"
EXAMPLE_SG = "sg-0123456789abcdef0"


def default_fsx() -> OutputStorage:
    return fsx_storage(subnet_id=EXAMPLE_SUBNET, security_group_ids=[EXAMPLE_SG])


def flag_value(args: list[str], flag: str) -> str | None:
    """The value of `flag` in an argv list (`--flag value` or `--flag=value`); the last one wins, as
    argparse."""
    found = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            found = args[i + 1]
        elif arg.startswith(flag + "="):
            found = arg.split("=", 1)[1]
    return found


def model_dir(args: list[str], mount_path: str) -> str | None:
    """Where a training run with these arguments writes its final model (`<output-dir>/final`) when that is on
    a volume mounted at `mount_path`; None without --save-model or with the output elsewhere."""
    out = flag_value(args, "--output-dir")
    if "--save-model" not in args or not out or not mount_path.startswith("/"):
        return None
    out, mount = out.rstrip("/") or "/", mount_path.rstrip("/") or "/"
    if out != mount and not out.startswith(mount.rstrip("/") + "/"):
        return None
    return f"{out.rstrip('/')}/final"
