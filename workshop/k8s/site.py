"""Your account's values a rendered plan needs (registry, namespace, zone, FSx subnet and security group, S3
prefix): the names are chapter 05's parameters and `workshop render --plan`'s flags. The defaults are the
checked-in manifests' examples; `example_fields` names the ones still left at them, so the render and the
preflight can refuse a job that cannot start in your account."""

from __future__ import annotations

from dataclasses import dataclass, fields

from workshop.errors import WorkshopError
from workshop.k8s.storage import (
    EXAMPLE_SG,
    EXAMPLE_SUBNET,
    OutputStorage,
    flag_value,
    fsx_storage,
    s3_storage,
)
from workshop.k8s.trainjob import DEFAULT_REGISTRY
from workshop.lang import _

EXAMPLE_S3_URI = "s3://my-bucket/workshop"
# The zone of the example subnet (the catalog prices us-east-1). Yours: the zone of your FSx subnet.
EXAMPLE_ZONE = "us-east-1a"


@dataclass(frozen=True)
class Site:
    """Where a plan's job runs in your account. One zone for the pool, the job and the FSx subnet: a ring
    that crosses zones is slow and billed per GB each way."""

    registry: str = DEFAULT_REGISTRY
    namespace: str = "default"
    zone: str = EXAMPLE_ZONE
    fsx_subnet_id: str = EXAMPLE_SUBNET
    fsx_security_group_id: str = EXAMPLE_SG
    fsx_size: str = "1200Gi"
    s3_uri: str = EXAMPLE_S3_URI
    service_account: str = "workshop-trainer"

    def storage(self, kind: str) -> OutputStorage:
        """The OutputStorage of kind fsx (a claim on FSx in this subnet) or s3 (the job writes under
        `<s3_uri>/<job>` as `service_account`)."""
        if kind == "s3":
            return s3_storage(self.s3_uri, service_account=self.service_account)
        return fsx_storage(
            subnet_id=self.fsx_subnet_id,
            security_group_ids=self.fsx_security_group_id,
            namespace=self.namespace,
            size=self.fsx_size,
        )

    def needed(self, storage: str) -> dict[str, str]:
        """The values (field -> value) a job on `storage` (fsx or s3) takes from your account."""
        names = {"registry"} | (
            {"fsx_subnet_id", "fsx_security_group_id"} if storage == "fsx" else {"s3_uri"}
        )
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name in names}

    def example_fields(self, storage: str) -> list[str]:
        """The fields a job on `storage` needs that still hold the examples' values."""
        return [name for name, value in self.needed(storage).items() if _example(name, value)]


def values_in(documents: list[dict]) -> dict[str, str]:
    """The account values (Site field -> value) rendered documents carry: the StorageClass's subnet and
    security groups, the images' registry and the S3 prefix the job uploads to."""
    found: dict[str, str] = {}
    for doc in documents:
        if doc.get("kind") == "StorageClass":
            params = doc.get("parameters") or {}
            found["fsx_subnet_id"] = str(params.get("subnetId", ""))
            for sg in str(params.get("securityGroupIds", "")).split(","):
                if _example("fsx_security_group_id", sg) or "fsx_security_group_id" not in found:
                    found["fsx_security_group_id"] = sg
        for container in _containers(doc):
            image = str(container.get("image", ""))
            if "/" in image:
                found["registry"] = image.rsplit("/", 1)[0]
            args = [str(a) for a in (container.get("args") or []) + (container.get("command") or [])]
            sync = flag_value(args, "--sync-to")
            if sync:
                found["s3_uri"] = sync
    return found


def _containers(node) -> list[dict]:
    """Every dict under `node` that looks like a container (has an image)."""
    out: list[dict] = []
    if isinstance(node, dict):
        if "image" in node and isinstance(node.get("image"), str):
            out.append(node)
        for value in node.values():
            out += _containers(value)
    elif isinstance(node, list):
        for value in node:
            out += _containers(value)
    return out


_EXAMPLES = {
    "fsx_subnet_id": EXAMPLE_SUBNET,
    "fsx_security_group_id": EXAMPLE_SG,
    "registry": DEFAULT_REGISTRY,
    "s3_uri": EXAMPLE_S3_URI,
}


def _example(name: str, value: str) -> bool:
    example = _EXAMPLES.get(name)
    return example is not None and (value == example or value.startswith(example.rstrip("/") + "/"))


def refuse_examples(values: dict[str, str]) -> None:
    """One error naming the first value (field: value) that is still a checked-in example."""
    for name, value in values.items():
        if _example(name, value):
            raise WorkshopError(
                _(
                    "{field} is the example value '{value}': render the plan with yours "
                    "(--{flag} or chapter 05's parameter {field})"
                ).format(field=name, value=value, flag=name.replace("_", "-"))
            )
