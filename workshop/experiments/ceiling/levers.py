"""The lever catalogue: each change to the workbook recipe that `bench ceiling` measures against its base,
what it needs on this host, and the TrainArgs and environment it runs with."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from workshop.errors import (
    WorkshopError,
    check_choice,
)
from workshop.experiments.recipes import WORKBOOK_ALLOCATOR
from workshop.lang import N_
from workshop.launch import allocator
from workshop.launch.allocator import allocator_env
from workshop.plan import hardware
from workshop.train import TrainArgs


@dataclass(frozen=True)
class Lever:
    """One change to the workbook recipe: TrainArgs overrides and/or another allocator, measured against
    `base`.

    The recipe holds every lever that paid on the machines this was measured on, so most levers take one of
    them away (an ablation: what that part is worth here); the rest try what the recipe does not do."""

    name: str
    label: str
    about: str
    args: dict = field(default_factory=dict)
    allocator: str | None = None  # None: the recipe's (WORKBOOK_ALLOCATOR); else launch.ALLOCATORS
    base: str | None = "recipe"
    cpu_only: bool = False
    needs: tuple[str, ...] = ()  # requirements checked on this host: compiler, jemalloc, recipe_bf16, ...


ZERO3 = {"engine": "deepspeed", "zero_stage": 3}
UNCOMPILED = {"compile": False, "attn_implementation": "sdpa"}

LEVERS: dict[str, Lever] = {
    lv.name: lv
    for lv in [
        Lever(
            "recipe",
            N_("workbook recipe"),
            "packed blocks, DDP, precision auto (bf16: bf16 weights with fp32 masters), "
            "torch.compile with eager attention, compiled AdamW step, shared-memory all-reduce, tcmalloc, "
            "1 thread per rank (uncompiled where no C++ compiler is found)",
            base=None,
        ),
        Lever(
            "no_compile",
            N_("without torch.compile"),
            "eager PyTorch (and SDPA attention, its best kernel there): every "
            "element-wise op a pass over memory, the optimizer in torch's fused AdamW plus separate casts",
            UNCOMPILED,
            needs=("recipe_compiled",),
        ),
        Lever(
            "sdpa_attention",
            N_("SDPA attention"),
            "scaled_dot_product_attention's fused CPU kernel instead of the plain "
            "matmuls + softmax that Inductor fuses",
            {"attn_implementation": "sdpa"},
            needs=("recipe_compiled",),
        ),
        Lever(
            "adamw_unfused",
            N_("AdamW, not fused"),
            "torch's per-tensor AdamW with separate clip and cast passes instead "
            "of one compiled pass per tensor",
            {"optimizer": "adamw_torch"},
        ),
        Lever(
            "gloo_allreduce",
            N_("gloo all-reduce"),
            "DDP's gradients all-reduced by gloo over loopback TCP instead of "
            "DeepSpeed's shared-memory kernel",
            {"allreduce": "backend"},
            cpu_only=True,
        ),
        Lever(
            "system_malloc",
            N_("glibc malloc"),
            "glibc's malloc instead of tcmalloc (LD_PRELOAD)",
            allocator="system",
            cpu_only=True,
            needs=("recipe_allocator",),
        ),
        Lever(
            N_("jemalloc"),
            "jemalloc",
            "jemalloc with Intel's MALLOC_CONF instead of tcmalloc",
            allocator="jemalloc",
            cpu_only=True,
            needs=("jemalloc",),
        ),
        Lever(
            "autocast",
            N_("fp32 weights + bf16 autocast"),
            "fp32 weights cast to bf16 on every forward (autocast) and "
            "fp32 gradients all-reduced, instead of bf16 weights with fp32 masters "
            "(workshop.train.master_weights)",
            {"master_weights": False},
            needs=("recipe_bf16",),
        ),
        Lever(
            "affinity",
            N_("pinned cores"),
            "each rank pinned to its own cores (sched_setaffinity) with OMP_PROC_BIND=close, "
            "OMP_PLACES=cores set in the rank",
            {"pin_cores": True},
            cpu_only=True,
        ),
        Lever(
            "micro_batch_x2",
            N_("micro-batch x2"),
            "twice the sequences per forward: GEMMs with twice the rows, the "
            "per-step costs (all-reduce, optimizer) spread over twice the tokens",
            {"micro_batch": "x2"},
        ),
        Lever(
            "grad_accum_x2",
            N_("micro-batch /2, GA 2"),
            "half the micro-batch, 2 accumulation steps: the same samples "
            "per optimizer step in GEMMs half as tall",
            {"micro_batch": "/2", "grad_accum": 2},
        ),
        Lever(
            "seq_len_x2",
            N_("sequences x2, micro-batch /2"),
            "the same tokens per forward in sequences twice as long: "
            "the same GEMMs, attention over twice the context",
            {"seq_len": "x2", "micro_batch": "/2"},
        ),
        Lever(
            "ddp_bucket_x4",
            N_("DDP buckets x4"),
            "100 MB gradient buckets instead of DDP's 25 MB: fewer, larger "
            "all-reduces, the last one waiting for more of the backward",
            {"ddp_bucket_mb": 100},
        ),
        Lever(
            "zero3",
            N_("ZeRO-3 engine"),
            "DeepSpeed ZeRO-3 instead of DDP, both uncompiled (against the uncompiled "
            "recipe); in bf16 it keeps bf16 weights + fp32 masters as the recipe does",
            {**ZERO3, **UNCOMPILED},
            base="no_compile",
        ),
        Lever(
            "ds_cpu_adam",
            N_("ZeRO-3 + DeepSpeed CPU Adam"),
            "offload_optimizer: DeepSpeed's C++ CPU Adam instead of "
            "torch's fused AdamW (against the ZeRO-3 engine)",
            {**ZERO3, **UNCOMPILED, "offload_optimizer": True},
            base="zero3",
        ),
        Lever(
            "zero3_persist",
            N_("ZeRO-3, big persistence/prefetch"),
            "stage3_param_persistence_threshold 1e7 (tensors "
            "up to 10M elements stay whole: no all-gather), stage3_prefetch_bucket_size 5e7 (against ZeRO-3)",
            {
                **ZERO3,
                **UNCOMPILED,
                "extra_ds": {
                    "stage3_param_persistence_threshold": int(1e7),
                    "stage3_prefetch_bucket_size": int(5e7),
                },
            },
            base="zero3",
        ),
        Lever(
            "fp32",
            "fp32",
            "fp32 weights and math instead of bf16 (only where the recipe resolves to bf16)",
            {"precision": "fp32", "master_weights": False},
            needs=("recipe_bf16",),
        ),
        Lever(
            "bf16",
            "bf16",
            "bf16 weights with fp32 masters instead of fp32 (only where the CPU or GPU has native bf16)",
            {"precision": "bf16"},
            needs=("native_bf16_recipe_fp32",),
        ),
    ]
}
DEFAULT_LEVERS = tuple(LEVERS)


def parse_levers(text: str | None) -> list[str]:
    """'no_compile,affinity' -> ['recipe', 'no_compile', 'affinity'] plus the bases they need; unknown names
    refused."""
    names = [n.strip() for n in (text or ",".join(DEFAULT_LEVERS)).split(",") if n.strip()]
    for n in names:
        check_choice("lever", n, LEVERS)
    out = ["recipe"]

    def add(n: str) -> None:
        base = LEVERS[n].base
        if base and base not in out:
            add(base)
        if n not in out:
            out.append(n)

    for n in names:
        add(n)
    return out


NO_COMPILER = "no C++ compiler on PATH: Inductor builds its CPU kernels with one (apt-get install g++)"


def requirement(
    needs: str, *, device: str, recipe_precision: str, gemm_ratio: float | None = None
) -> str | None:
    """None when the requirement is met here, else the reason the lever is skipped (recorded in the JSON)."""

    if needs == "recipe_compiled":
        return None if device != "cpu" or hardware.has_cxx_compiler() else NO_COMPILER
    if needs == "jemalloc":
        return (
            None
            if allocator.allocator_path("jemalloc")
            else N_("jemalloc is not installed (apt-get install libjemalloc2)")
        )
    if needs == "recipe_allocator":
        chosen = allocator_env(WORKBOOK_ALLOCATOR)[1]
        return (
            None
            if chosen != "system"
            else N_(
                "the recipe already runs glibc malloc here: tcmalloc is not "
                "installed (apt-get install libtcmalloc-minimal4)"
            )
        )
    if needs == "recipe_bf16":
        return (
            None if recipe_precision == "bf16" else N_("the recipe already runs fp32 here (precision auto)")
        )
    if needs == "native_bf16_recipe_fp32":
        if recipe_precision == "bf16":
            return N_("the recipe already runs bf16 here (precision auto)")
        native, why = hardware.native_bf16() if device == "cpu" else (True, "")
        if not native:
            ratio = (
                f"; measured here: bf16 GEMM at the model's gate_proj shape runs at x{gemm_ratio:.3g} of fp32"
                if gemm_ratio
                else ""
            )
            return f"{why}{ratio}"
        return None
    raise WorkshopError(f"unknown lever requirement {needs!r}")


def lever_args(lever: Lever, recipe: TrainArgs) -> TrainArgs:
    """The TrainArgs of one lever: the recipe with the lever's overrides ('x2' and '/2' scale the
    micro-batch)."""
    known = {f.name for f in fields(recipe)}
    bad = sorted(set(lever.args) - known)
    if bad:
        raise WorkshopError(
            f"lever {lever.name} sets unknown TrainArgs fields {bad}; allowed: {', '.join(sorted(known))}"
        )
    overrides = dict(lever.args)
    for name in ("micro_batch", "seq_len"):
        value, have = overrides.get(name), getattr(recipe, name)
        if value == "x2":
            overrides[name] = have * 2
        elif value == "/2":
            if have < 2:
                raise WorkshopError(
                    f"lever {lever.name} halves {name.replace('_', '-')}, which is {have}; "
                    f"allowed: a recipe {name.replace('_', '-')} >= 2"
                )
            overrides[name] = have // 2
    args = replace(recipe, **overrides)
    args.validate()
    return args


def lever_env(lever: Lever, device: str = "cpu") -> tuple[dict, str | None]:
    """The extra rank environment of one lever and the allocator it names (the recipe's unless it names
    another; GPU ranks keep the system allocator: the host's malloc is not what bounds them)."""

    if device != "cpu":
        return {}, None
    return allocator_env(lever.allocator or WORKBOOK_ALLOCATOR)
