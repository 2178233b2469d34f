"""`workshop render`: write every default manifest of the workbook into manifests/, validated first.

The YAML in manifests/ is what a learner without Python can `kubectl apply`; it must never drift from the
code that generates it, so `--check` (and a test) re-renders and fails on any difference. Chapters add
their manifests by appending to DEFAULT_MANIFESTS (file name -> builder + the CRD releases it must pass).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.k8s import karpenter, planned_job, storage, trainjob
from workshop.k8s.base import to_yaml
from workshop.k8s.site import EXAMPLE_ZONE, Site
from workshop.k8s.validate import DEFAULT_KARPENTER, DEFAULT_TRAINER, ensure_valid
from workshop.paths import MANIFESTS_DIR
from workshop.plan.job import Plan, stored_plan


@dataclass(frozen=True)
class ManifestEntry:
    build: Callable[[], list[dict]]
    about: str
    karpenter: tuple[str, ...] = (DEFAULT_KARPENTER,)  # every release listed must accept the documents
    trainer: tuple[str, ...] = (DEFAULT_TRAINER,)
    crd_checked: bool = (
        True  # False for core kinds (StorageClass, PVC): their typed spec checks its own values
    )


DEFAULT_MANIFESTS: dict[str, ManifestEntry] = {
    "karpenter-cpu-amx.yaml": ManifestEntry(
        lambda: karpenter.plan_pool(stored_plan("cpu"), zone=EXAMPLE_ZONE).to_dicts(),
        "cpu-amx NodePool + EC2NodeClass of manifests/plans/cpu-4-nodes.json (its type and the tie band's "
        "that host its pod, on-demand, one zone: the FSx subnet's, static CPU manager, intel.com/amx taint)",
        karpenter=("1.8.8", "1.14.1"),
    ),
    "karpenter-gpu.yaml": ManifestEntry(
        lambda: karpenter.plan_pool(stored_plan("gpu"), zone=EXAMPLE_ZONE).to_dicts(),
        "gpu NodePool + EC2NodeClass of manifests/plans/gpu.json (its type and the tie band's that host its "
        "pod, on-demand, one zone, nvidia.com/gpu taint)",
        karpenter=("1.8.8", "1.14.1"),
    ),
    # chapter 05: the same jobs in both Trainer forms (v2.1 podTemplateOverrides, v2.2+ runtimePatches)
    "trainjob-cpu-v2.1.yaml": ManifestEntry(
        lambda: planned_job.default_cpu_job("2.1.0").documents("2.1.0"),
        "CPU TrainJob for Trainer v2.1 (podTemplateOverrides) of manifests/plans/cpu-4-nodes.json, "
        "HF token from a Secret",
        trainer=("2.1.0",),
    ),
    "trainjob-cpu-v2.2.yaml": ManifestEntry(
        lambda: planned_job.default_cpu_job("2.2.0").documents("2.2.0"),
        "CPU TrainJob for Trainer v2.2+ (runtimePatches)",
        trainer=("2.3.0",),
    ),
    "storage-fsx.yaml": ManifestEntry(
        lambda: _storage().default_fsx().documents(),
        "FSx for Lustre StorageClass + ReadWriteMany claim the TrainJobs mount at /fsx "
        "(placeholder subnet and security group ids: render yours with chapter 05)",
        crd_checked=False,
    ),
    "trainjob-gpu-v2.2.yaml": ManifestEntry(
        lambda: planned_job.default_gpu_job("2.2.0").documents("2.2.0"),
        "GPU TrainJob for Trainer v2.2+ (runtimePatches) of manifests/plans/gpu.json: the same global batch "
        "as the CPU job",
        trainer=("2.3.0",),
    ),
}


def _storage():

    return storage


def render(name: str) -> str:
    """The YAML text of one registry entry, after it passed every CRD release it lists."""
    if name not in DEFAULT_MANIFESTS:
        raise WorkshopError(f"unknown manifest {name!r}; known: {', '.join(DEFAULT_MANIFESTS)}")
    entry = DEFAULT_MANIFESTS[name]
    docs = entry.build()
    for kv, tv in itertools.product(entry.karpenter, entry.trainer) if entry.crd_checked else ():
        ensure_valid(docs, karpenter=kv, trainer=tv)
    return to_yaml(docs)


def render_all(out_dir: str | Path = MANIFESTS_DIR) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in DEFAULT_MANIFESTS:
        path = out_dir / name
        path.write_text(render(name))
        written.append(path)
    return written


def drift(out_dir: str | Path = MANIFESTS_DIR) -> list[str]:
    """Names of manifests whose file is missing or differs from a fresh render (empty = in sync)."""
    out_dir = Path(out_dir)
    return [
        name
        for name in DEFAULT_MANIFESTS
        if not (out_dir / name).is_file() or (out_dir / name).read_text() != render(name)
    ]


# ------------------------------------------------------------------------------------- one plan


def plan_storage(plan: Plan, site: Site | None = None):
    """The OutputStorage the plan's placement names, with `site`'s values (default: the examples): the FSx
    claim in its subnet, or its S3 prefix written with its service account (IRSA)."""
    return (site or Site()).storage(plan.placement.storage)


def plan_documents(
    plan: Plan, *, trainer: str | None = None, name: str | None = None, site: Site | None = None
) -> dict[str, str]:
    """File name -> YAML for exactly this plan (workshop.plan.job.Plan): the NodePool + EC2NodeClass, the
    storage and the TrainJob in Trainer release `trainer` (default: the plan's), with `site`'s registry,
    namespace, zone and storage (default: the examples), each validated against its CRDs first. Nothing is
    written here."""
    site = site or Site()
    try:
        release = trainjob.normalize_trainer_version(trainer or plan.trainer)
    except WorkshopError as e:
        raise WorkshopError(f"trainer (--trainer-version, or the plan file's 'trainer'): {e}") from None
    device = plan.placement.device
    job_name = name or f"{device}-llama3"
    out = plan_storage(plan, site)
    spec = planned_job.plan_trainjob(
        plan,
        job_name,
        namespace=site.namespace,
        registry=site.registry,
        storage=out,
        hf_secret=trainjob.HFTokenSecret(namespace=site.namespace) if plan.job.weights == "hub" else None,
        trainer=release,
        zone=site.zone,
    )
    pool = karpenter.plan_pool(plan, zone=site.zone)
    pool_docs = pool.to_dicts()
    job_docs = spec.documents(release)
    ensure_valid(pool_docs, karpenter=DEFAULT_KARPENTER)
    ensure_valid(job_docs, trainer=trainjob.crd_release(release))
    files = {f"karpenter-{pool.node_pool.name}.yaml": to_yaml(pool_docs)}
    store_docs = out.documents()
    if store_docs:
        files[f"storage-{plan.placement.storage}.yaml"] = to_yaml(store_docs)
    files[f"trainjob-{device}-v{release.rsplit('.', 1)[0]}.yaml"] = to_yaml(job_docs)
    return files


def render_plan(
    plan: Plan, out_dir: str | Path, *, trainer: str | None = None, site: Site | None = None
) -> list[Path]:
    """Write plan_documents into `out_dir` whole: every file is rendered and validated, then written to a
    temporary folder beside it and moved in, so a bad plan leaves nothing behind."""
    files = plan_documents(plan, trainer=trainer, site=site)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".render-"))
    try:
        for fname, text in files.items():
            (tmp / fname).write_text(text)
        written = []
        for fname in files:
            os.replace(tmp / fname, out / fname)
            written.append(out / fname)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return written
