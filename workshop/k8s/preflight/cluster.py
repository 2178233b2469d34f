"""The cluster's side of the preflight: what a TrainJob of the plan needs to be scheduled and to run.

Every read is a discovery lookup, a get or a list through `workshop.k8s.cluster.Cluster` (the package's one
client): a CRD is present when the API server serves its kind; a controller is a Deployment (Karpenter in
kube-system or karpenter, Kubeflow Trainer in kubeflow-system) whose image tag is its release; a device plugin
is a DaemonSet, or a node that already advertises its resource (Karpenter starts GPU nodes on demand, so
before the first job there may be none). A read the server refuses (403) is "not checked" with who may not
read what; nothing is written."""

from __future__ import annotations

from collections.abc import Callable

from workshop.k8s.api_errors import ClusterError
from workshop.k8s.crds import pinned_versions
from workshop.k8s.install import TRAINER_REPO, install_commands
from workshop.k8s.preflight.matrix import (
    KARPENTER_MATRIX_PAGE,
    KARPENTER_MIN_FOR,
    TRAINER_INSTALL_PAGE,
    TRAINER_MIN_KUBERNETES,
    dotted,
    karpenter_supports,
    newest_known_minor,
    parse_version,
)
from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, NOT_NEEDED, PASS, Check, Requirements
from workshop.k8s.preflight.releases import KARPENTER_CRD_RELEASE, TRAINER_CRD_RELEASE, crd_release_check
from workshop.k8s.storage import FSX_PROVISIONER
from workshop.k8s.trainjob import DEFAULT_RUNTIME, TRAINER_VERSIONS
from workshop.lang import N_, _

SERVER = N_("Kubernetes server")
KARPENTER_CRDS = N_("Karpenter CRDs")
KARPENTER_CONTROLLER = N_("Karpenter controller")
KARPENTER_MATRIX = N_("Karpenter supports this Kubernetes")
NODECLASS = N_("EC2NodeClass role / instance profile")
TRAINER_CRDS = N_("Kubeflow Trainer + JobSet CRDs")
TRAINER_CONTROLLER = N_("Kubeflow Trainer release")
RUNTIME = N_("torch-distributed runtime")
FSX = N_("FSx CSI driver")
NVIDIA = N_("NVIDIA device plugin")
EFA = N_("EFA device plugin")
NAMES = (
    SERVER,
    KARPENTER_CRDS,
    KARPENTER_CONTROLLER,
    KARPENTER_MATRIX,
    KARPENTER_CRD_RELEASE,
    NODECLASS,
    TRAINER_CRDS,
    TRAINER_CONTROLLER,
    TRAINER_CRD_RELEASE,
    RUNTIME,
    FSX,
    NVIDIA,
    EFA,
)

KARPENTER_NAMESPACES = ("kube-system", "karpenter")
TRAINER_NAMESPACES = ("kubeflow-system", "kubeflow")
KARPENTER_KINDS = (
    ("NodePool", "karpenter.sh/v1"),
    ("NodeClaim", "karpenter.sh/v1"),
    ("EC2NodeClass", "karpenter.k8s.aws/v1"),
)
TRAINER_KINDS = (
    ("TrainJob", "trainer.kubeflow.org/v1alpha1"),
    ("ClusterTrainingRuntime", "trainer.kubeflow.org/v1alpha1"),
    ("JobSet", "jobset.x-k8s.io/v1alpha2"),
)
KARPENTER_CHART = "oci://public.ecr.aws/karpenter/karpenter"
KARPENTER_GUIDE = "https://karpenter.sh/docs/getting-started/getting-started-with-karpenter/"
FSX_INSTALL = (
    "helm repo add aws-fsx-csi-driver https://kubernetes-sigs.github.io/aws-fsx-csi-driver && helm upgrade "
    "--install aws-fsx-csi-driver aws-fsx-csi-driver/aws-fsx-csi-driver --namespace kube-system "
    "(https://github.com/kubernetes-sigs/aws-fsx-csi-driver/blob/master/docs/install.md)"
)
NVIDIA_INSTALL = (
    "helm repo add nvdp https://nvidia.github.io/k8s-device-plugin && helm upgrade -i nvdp "
    "nvdp/nvidia-device-plugin --namespace nvidia-device-plugin --create-namespace "
    "(https://github.com/NVIDIA/k8s-device-plugin)"
)
EFA_INSTALL = (
    "helm repo add eks https://aws.github.io/eks-charts && helm upgrade -i aws-efa-k8s-device-plugin "
    "eks/aws-efa-k8s-device-plugin --namespace kube-system "
    "(https://docs.aws.amazon.com/eks/latest/userguide/node-efa.html)"
)
GPU_RESOURCE, EFA_RESOURCE = "nvidia.com/gpu", "vpc.amazonaws.com/efa"


def _served(cluster, kind: str, api_version: str) -> bool:
    try:
        cluster.resource(kind, api_version)
    except ClusterError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _items(cluster, kind: str, api_version: str, namespace: str | None = None) -> list[dict]:
    """A list (every namespace when none is given); [] when the kind is not served."""
    try:
        listing = cluster.get(
            kind, namespace=namespace, api_version=api_version, all_namespaces=namespace is None
        )
    except ClusterError as exc:
        if exc.status == 404:
            return []
        raise
    return listing.get("items") or []


def _image_tag(image: str) -> str | None:
    """'public.ecr.aws/karpenter/controller:1.8.8@sha256:...' -> '1.8.8'; None without a tag."""
    name = image.split("@", 1)[0]
    tail = name.rsplit("/", 1)[-1]
    return tail.rsplit(":", 1)[1] if ":" in tail else None


def _controller(
    cluster, namespaces, match: Callable[[dict, str], bool]
) -> tuple[dict, str, str | None] | None:
    """The first Deployment a predicate picks: (deployment, its namespace/name, its release or None)."""
    for ns in namespaces:
        for dep in _items(cluster, "Deployment", "apps/v1", ns):
            meta = dep.get("metadata") or {}
            containers = (((dep.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
                "containers"
            ) or []
            images = [c.get("image") or "" for c in containers]
            for image in images:
                if match(meta, image):
                    version = _image_tag(image) or (meta.get("labels") or {}).get("app.kubernetes.io/version")
                    return dep, f"{ns}/{meta.get('name')}", version
    return None


def _ready(dep: dict) -> tuple[int, int]:
    status = dep.get("status") or {}
    return int(status.get("readyReplicas") or 0), int((dep.get("spec") or {}).get("replicas") or 1)


def _is_karpenter(meta: dict, image: str) -> bool:
    labels = meta.get("labels") or {}
    return "karpenter/controller" in image or (
        labels.get("app.kubernetes.io/name") == "karpenter" and "karpenter" in image
    )


def _is_trainer(meta: dict, image: str) -> bool:
    return "trainer-controller-manager" in image


def server(cluster) -> Check:
    version = parse_version(cluster.version)
    if version is None:
        return Check(
            SERVER, NOT_CHECKED, _("the server's version '{v}' names no version").format(v=cluster.version)
        )
    return Check(
        SERVER,
        PASS,
        _("Kubernetes {v} at {host} ({where})").format(
            v=cluster.version, host=cluster.api.configuration.host, where=cluster.where
        ),
    )


def karpenter_crds(cluster) -> Check:
    missing = [f"{kind} ({gv})" for kind, gv in KARPENTER_KINDS if not _served(cluster, kind, gv)]
    if missing:
        version = pinned_versions("karpenter")[-1]
        return Check(
            KARPENTER_CRDS,
            FAIL,
            _("not served: {kinds}").format(kinds=", ".join(missing)),
            "helm upgrade --install karpenter-crd oci://public.ecr.aws/karpenter/karpenter-crd "
            f"--version {version} --namespace kube-system ({KARPENTER_GUIDE})",
        )
    return Check(KARPENTER_CRDS, PASS, ", ".join(kind for kind, _gv in KARPENTER_KINDS))


def karpenter_controller(cluster) -> tuple[Check, str | None]:
    """The controller's check and its release (for the matrix)."""
    found = _controller(cluster, KARPENTER_NAMESPACES, _is_karpenter)
    version = pinned_versions("karpenter")[-1]
    install = (
        f"helm upgrade --install karpenter {KARPENTER_CHART} --version {version} --namespace kube-system "
        f"--set settings.clusterName=CLUSTER ({KARPENTER_GUIDE})"
    )
    if found is None:
        return Check(
            KARPENTER_CONTROLLER,
            FAIL,
            _("no Karpenter Deployment in {namespaces}").format(namespaces=" or ".join(KARPENTER_NAMESPACES)),
            install,
        ), None
    dep, where, release = found
    ready, wanted = _ready(dep)
    if ready < 1:
        return Check(
            KARPENTER_CONTROLLER,
            FAIL,
            _("{where} (Karpenter {release}): {ready} of {wanted} replicas ready").format(
                where=where, release=release or "?", ready=ready, wanted=wanted
            ),
            _inspect(where),
        ), release
    return Check(
        KARPENTER_CONTROLLER,
        PASS,
        _("Karpenter {release} ({where}, {ready} of {wanted} replicas ready)").format(
            release=release or "?", where=where, ready=ready, wanted=wanted
        ),
    ), release


def karpenter_matrix(cluster, release: str | None) -> Check:
    kube = parse_version(cluster.version)
    karp = parse_version(release)
    if karp is None or kube is None:
        why = _("no Karpenter release found") if karp is None else _("the server's version is unknown")
        return Check(KARPENTER_MATRIX, NOT_CHECKED, why)
    minor = kube[:2]
    ok = karpenter_supports(karp, minor)
    if ok is None:
        return Check(
            KARPENTER_MATRIX,
            NOT_CHECKED,
            _("Kubernetes {k} is outside the matrix known here (1.29 to {newest}): read {page}").format(
                k=dotted(minor), newest=dotted(newest_known_minor()), page=KARPENTER_MATRIX_PAGE
            ),
        )
    needed = dotted(KARPENTER_MIN_FOR[minor])
    if not ok:
        return Check(
            KARPENTER_MATRIX,
            FAIL,
            _("Karpenter {have} does not support Kubernetes {k} (it needs >= {needed})").format(
                have=dotted(karp), k=dotted(minor), needed=needed
            ),
            f"helm upgrade karpenter {KARPENTER_CHART} --version {pinned_versions('karpenter')[-1]} "
            f"--namespace kube-system --reuse-values, CRDs first ({KARPENTER_MATRIX_PAGE})",
        )
    return Check(
        KARPENTER_MATRIX,
        PASS,
        _("Karpenter {have} on Kubernetes {k} (the matrix asks >= {needed})").format(
            have=dotted(karp), k=dotted(minor), needed=needed
        ),
    )


def nodeclasses(cluster) -> Check:
    if not _served(cluster, "EC2NodeClass", "karpenter.k8s.aws/v1"):
        return Check(NODECLASS, NOT_CHECKED, _("no EC2NodeClass CRD (see Karpenter CRDs)"))
    items = _items(cluster, "EC2NodeClass", "karpenter.k8s.aws/v1")
    apply = (
        "python -m workshop run --only 02 -p cluster_name CLUSTER -p node_role ROLE -p apply_to_cluster true "
        "-p server_dry_run false"
    )
    if not items:
        return Check(NODECLASS, FAIL, _("no EC2NodeClass on the cluster"), apply)
    found, bad = [], []
    for item in items:
        name = (item.get("metadata") or {}).get("name")
        spec, status = item.get("spec") or {}, item.get("status") or {}
        who = (
            spec.get("role")
            and f"role {spec['role']}"
            or (spec.get("instanceProfile") and f"instanceProfile {spec['instanceProfile']}")
        )
        ready = {c.get("type"): c for c in status.get("conditions") or []}.get("Ready")
        if not who:
            bad.append(_("{name}: neither spec.role nor spec.instanceProfile").format(name=name))
        elif ready is not None and ready.get("status") != "True":
            bad.append(
                _("{name}: {who}, not Ready ({why})").format(
                    name=name, who=who, why=ready.get("message") or ready.get("reason") or "?"
                )
            )
        else:
            found.append(f"{name}: {who}" + (" (Ready)" if ready is not None else ""))
    if bad:
        return Check(
            NODECLASS,
            FAIL,
            "; ".join(bad),
            "kubectl describe ec2nodeclass NAME; the node role must exist and be allowed to join "
            "(https://karpenter.sh/docs/troubleshooting/)",
        )
    return Check(NODECLASS, PASS, "; ".join(found))


def trainer_crds(cluster, req: Requirements) -> Check:
    missing = [f"{kind} ({gv})" for kind, gv in TRAINER_KINDS if not _served(cluster, kind, gv)]
    if missing:
        return Check(
            TRAINER_CRDS,
            FAIL,
            _("not served: {kinds}").format(kinds=", ".join(missing)),
            install_commands(req.trainer_version)[0] + f" ({TRAINER_INSTALL_PAGE})",
        )
    return Check(TRAINER_CRDS, PASS, ", ".join(kind for kind, _gv in TRAINER_KINDS))


def trainer_release(cluster, req: Requirements) -> Check:
    """The running Trainer's release against the one the TrainJob is rendered for, and Kubernetes against
    what Trainer v2 needs."""
    install = install_commands(req.trainer_version)[0]
    found = _controller(cluster, TRAINER_NAMESPACES, _is_trainer)
    if found is None:
        return Check(
            TRAINER_CONTROLLER,
            FAIL,
            _("no Kubeflow Trainer controller Deployment in {namespaces}").format(
                namespaces=" or ".join(TRAINER_NAMESPACES)
            ),
            install,
        )
    dep, where, release = found
    ready, wanted = _ready(dep)
    have = parse_version(release)
    kube = parse_version(cluster.version)
    said = _("Kubeflow Trainer {release} ({where}, {ready} of {wanted} replicas ready)").format(
        release=release or "?", where=where, ready=ready, wanted=wanted
    )
    if kube is not None and kube[:2] < TRAINER_MIN_KUBERNETES:
        return Check(
            TRAINER_CONTROLLER,
            FAIL,
            said
            + "; "
            + _("Kubernetes {k} is older than Trainer v2 needs ({need})").format(
                k=dotted(kube[:2]), need=dotted(TRAINER_MIN_KUBERNETES)
            ),
            f"upgrade the cluster: aws eks update-cluster-version --name CLUSTER --kubernetes-version "
            f"{dotted(TRAINER_MIN_KUBERNETES)} ({TRAINER_INSTALL_PAGE})",
        )
    if ready < 1:
        return Check(TRAINER_CONTROLLER, FAIL, said, _inspect(where))
    if have is None:
        return Check(TRAINER_CONTROLLER, NOT_CHECKED, said + "; " + _("its image names no release"))
    return _trainer_version(said, dotted(have), req, install)


def _inspect(where: str) -> str:
    """What to run when a controller's Deployment has no ready replica."""
    ns, name = where.split("/")
    return f"kubectl -n {ns} describe deployment {name}; kubectl -n {ns} logs deployment/{name}"


def _trainer_version(said: str, running: str, req: Requirements, install: str) -> Check:
    """The running release against the releases the workbook renders for and the one this job is for."""
    if running not in TRAINER_VERSIONS:
        return Check(
            TRAINER_CONTROLLER,
            FAIL,
            said
            + "; "
            + _("the workbook renders TrainJobs for {known} only").format(known=", ".join(TRAINER_VERSIONS)),
            install,
        )
    if running != req.trainer_version:
        return Check(
            TRAINER_CONTROLLER,
            FAIL,
            said + "; " + _("the job is rendered for {wanted}").format(wanted=req.trainer_version),
            f"-p trainer_version {running} (chapter 05), or --trainer-version {running}; or install "
            f"{req.trainer_version}: {install}",
        )
    return Check(TRAINER_CONTROLLER, PASS, said)


def runtime(cluster, req: Requirements) -> Check:
    if not _served(cluster, "ClusterTrainingRuntime", "trainer.kubeflow.org/v1alpha1"):
        return Check(RUNTIME, NOT_CHECKED, _("no ClusterTrainingRuntime CRD (see Kubeflow Trainer CRDs)"))
    try:
        cluster.get("ClusterTrainingRuntime", DEFAULT_RUNTIME)
    except ClusterError as exc:
        if exc.status != 404:
            raise
        return Check(
            RUNTIME,
            FAIL,
            _("no ClusterTrainingRuntime {name}").format(name=DEFAULT_RUNTIME),
            install_commands(req.trainer_version)[1],
        )
    return Check(RUNTIME, PASS, _("ClusterTrainingRuntime {name} exists").format(name=DEFAULT_RUNTIME))


def _fsx_not_needed(req: Requirements) -> str:
    if req.storage is None:
        return _("the job keeps its outputs on no volume")
    return _("outputs go to {where}").format(where=req.storage)


def fsx_driver(cluster, req: Requirements) -> Check:
    if req.storage != "fsx":
        return Check(FSX, NOT_NEEDED, _fsx_not_needed(req))
    try:
        cluster.get("CSIDriver", FSX_PROVISIONER, api_version="storage.k8s.io/v1")
    except ClusterError as exc:
        if exc.status != 404:
            raise
        return Check(FSX, FAIL, _("no CSIDriver {name}").format(name=FSX_PROVISIONER), FSX_INSTALL)
    return Check(FSX, PASS, _("CSIDriver {name} is registered").format(name=FSX_PROVISIONER))


def _plugin(cluster, name: str, resource: str, words: tuple[str, ...], install: str) -> Check:
    daemonsets = [
        f"{(d.get('metadata') or {}).get('namespace')}/{(d.get('metadata') or {}).get('name')}"
        for d in _items(cluster, "DaemonSet", "apps/v1")
        if all(w in ((d.get("metadata") or {}).get("name") or "") for w in words)
    ]
    nodes = [
        (n.get("metadata") or {}).get("name")
        for n in _items(cluster, "Node", "v1")
        if str(((n.get("status") or {}).get("allocatable") or {}).get(resource, "0")) not in ("0", "")
    ]
    if daemonsets or nodes:
        parts = []
        if daemonsets:
            parts.append(_("DaemonSet {names}").format(names=", ".join(daemonsets)))
        if nodes:
            parts.append(_("{n} node(s) advertise {resource}").format(n=len(nodes), resource=resource))
        return Check(name, PASS, "; ".join(parts))
    return Check(
        name,
        FAIL,
        _("no DaemonSet named like {words} and no node advertising {resource}").format(
            words="*".join(words), resource=resource
        ),
        install,
    )


def device_plugins(cluster, req: Requirements) -> list[Check]:
    if req.device != "gpu":
        why = _("a CPU plan") if req.device == "cpu" else _("no plan names a GPU")
        return [Check(NVIDIA, NOT_NEEDED, why), Check(EFA, NOT_NEEDED, why)]
    return [
        _plugin(cluster, NVIDIA, GPU_RESOURCE, ("nvidia", "device-plugin"), NVIDIA_INSTALL),
        _plugin(cluster, EFA, EFA_RESOURCE, ("efa",), EFA_INSTALL),
    ]


def _guarded(name: str, fn: Callable[[], Check]) -> Check:
    """A check whose reads the server refused is 'not checked', with the server's sentence."""
    try:
        return fn()
    except ClusterError as exc:
        return Check(name, NOT_CHECKED, str(exc))


def cluster_checks(cluster, req: Requirements) -> list[Check]:
    """Every cluster check, in the order a learner fixes them."""
    checks = [
        _guarded(SERVER, lambda: server(cluster)),
        _guarded(KARPENTER_CRDS, lambda: karpenter_crds(cluster)),
    ]
    release: list[str | None] = [None]

    def controller() -> Check:
        check, release[0] = karpenter_controller(cluster)
        return check

    checks.append(_guarded(KARPENTER_CONTROLLER, controller))
    checks.append(_guarded(KARPENTER_MATRIX, lambda: karpenter_matrix(cluster, release[0])))
    checks.append(_crds_match(cluster, "karpenter", checks[1], release[0]))
    checks.append(_guarded(NODECLASS, lambda: nodeclasses(cluster)))
    checks.append(_guarded(TRAINER_CRDS, lambda: trainer_crds(cluster, req)))
    checks.append(_guarded(TRAINER_CONTROLLER, lambda: trainer_release(cluster, req)))
    trainer = _guarded_release(cluster, TRAINER_NAMESPACES, _is_trainer)
    checks.append(_crds_match(cluster, "trainer", checks[-2], trainer))
    checks.append(_guarded(RUNTIME, lambda: runtime(cluster, req)))
    checks.append(_guarded(FSX, lambda: fsx_driver(cluster, req)))
    try:
        checks += device_plugins(cluster, req)
    except ClusterError as exc:
        checks += [Check(NVIDIA, NOT_CHECKED, str(exc)), Check(EFA, NOT_CHECKED, str(exc))]
    return checks


def _guarded_release(cluster, namespaces, match) -> str | None:
    """A controller's release as 'x.y.z' (None when it is not found or may not be read)."""
    try:
        found = _controller(cluster, namespaces, match)
    except ClusterError:
        return None
    version = parse_version(found[2]) if found else None
    return dotted(version) if version else None


def _crds_match(cluster, family: str, served: Check, release: str | None) -> Check:
    """The CRDs against the controller's release, once both are there (else 'not checked', pointing at the
    check that failed)."""
    name = KARPENTER_CRD_RELEASE if family == "karpenter" else TRAINER_CRD_RELEASE
    if served.verdict != PASS:
        return Check(name, NOT_CHECKED, _("see {check}").format(check=_(served.name)))
    if family == "karpenter":
        fix = (
            "helm upgrade --install karpenter-crd oci://public.ecr.aws/karpenter/karpenter-crd "
            f"--version {release} --namespace kube-system, before the controller ({KARPENTER_GUIDE})"
        )
    else:
        fix = f'kubectl apply --server-side -k "{TRAINER_REPO}/manifests/overlays/manager?ref=v{release}"'
    return _guarded(name, lambda: crd_release_check(cluster, family, release, fix))


def unchecked(req: Requirements, why: str) -> list[Check]:
    """Every cluster check as 'not checked' (no cluster), except those the plan does not need."""
    out = []
    for name in NAMES:
        if name == FSX and req.storage != "fsx":
            out.append(Check(FSX, NOT_NEEDED, _fsx_not_needed(req)))
        elif name in (NVIDIA, EFA) and req.device != "gpu":
            out.append(
                Check(name, NOT_NEEDED, _("a CPU plan") if req.device == "cpu" else _("no plan names a GPU"))
            )
        else:
            out.append(Check(name, NOT_CHECKED, why))
    return out
