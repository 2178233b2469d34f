"""The job the learner picks, declared once: a `Job` (what is trained), a `Placement` (where it runs) and a
`Plan` (the two, plus what the planner predicts for them), and the plan file that carries a Plan from
`workshop plan --out` to `workshop render --plan`.

Why one object: what the learner is told the job is and what the cluster runs must be the same numbers. The
global batch, the steps and the tokens are properties of the Job; the split of the global batch over a
placement's ranks (micro-batch x accumulation) is derived once, here (`Plan.grad_accum`); the one
reconciliation ("does this placement host this job?") is `check_hosts`. The Kubernetes layer renders a Plan
as it is given.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import date
from pathlib import Path
from typing import Any

from workshop.errors import WorkshopError, check_choice, check_count, read_json
from workshop.paths import MANIFESTS_DIR
from workshop.plan.catalog import InstanceRow, instance_info
from workshop.plan.fit import allocatable, pod_cores, vcpus_per_core
from workshop.plan.from_json import build
from workshop.plan.knobs import Knobs
from workshop.plan.memory import METHODS
from workshop.plan.models import get_preset, recipe
from workshop.plan.options import STORAGES, checkpoint_every_s

FORMAT = "workshop-plan/1"
WEIGHTS = ("hub", "random")  # the hub's pretrained weights (fine-tune), or the preset's random ones (lessons)
ENGINES = ("deepspeed", "ddp")
PRECISIONS = ("bf16", "fp32")
CAPACITY_TYPES = ("on-demand", "spot")
DEVICES = ("cpu", "gpu")
# Tokens a dataset holds, where known: wikitext-2-raw-v1's train split is ~2.4 M tokens with Llama-3's
# tokenizer (an estimate: 2.09 M words x ~1.15 tokens per word), so 1e8 tokens of it is ~42 epochs.
DATASET_TOKENS = {"wikitext": 2.4e6}
__all__ = [
    "Job",
    "Placement",
    "Plan",
    "Prediction",
    "checkpoint_every_s",
    "from_ranking",
    "load_plan",
    "save_plan",
]


@dataclass(frozen=True, kw_only=True)
class Job(Knobs):
    """What is trained: the model and where its weights come from, how much data (a token budget; `epochs`
    derives from it), the global batch (tokens per optimizer step), and the job's knobs (`Knobs`, declared
    once for this Job and the entry point's TrainArgs: dataset, sequence, micro-batch, precision, engine, ZeRO
    stage and offload, activation checkpointing, learning rate and warm-up, checkpoint interval in optimizer
    steps with 0 for only the final save, held-out evaluation). Steps and tokens are derived, never stored
    twice. A plan file names every field (load_plan): Knobs' defaults are the lessons', not a plan's."""

    model: str  # the architecture preset the planner sized (llama-3-8b)
    weights: str  # hub | random
    tokens: float  # the token budget
    global_batch: int  # tokens per optimizer step, over every rank

    @property
    def steps(self) -> int:
        """Optimizer steps: the token budget over the global batch, rounded up."""
        return math.ceil(self.tokens / self.global_batch)

    @property
    def trained_tokens(self) -> int:
        """Tokens the steps train (steps x global batch: the budget rounded up to whole steps)."""
        return self.steps * self.global_batch

    @property
    def epochs(self) -> float | None:
        """Passes over the dataset the budget makes, when the dataset's size is known."""
        held = DATASET_TOKENS.get(self.dataset)
        return self.tokens / held if held else None

    @property
    def train_model(self) -> str:
        """What `--model` of the entry point is: the hub id (pretrained weights) or the preset (random)."""
        hub = get_preset(self.model).hub_id
        return hub if self.weights == "hub" and hub else self.model

    def grad_accum(self, world: int, micro_batch: int | None = None) -> int:
        """Accumulation steps that make exactly the global batch on `world` ranks: the one place the split
        is derived. A split that does not divide is an error naming the global batch."""
        check_count("ranks", world)
        mb = self.micro_batch if micro_batch is None else micro_batch
        check_count("micro_batch", mb)
        per_pass = self.seq_len * world * mb
        accum, rest = divmod(self.global_batch, per_pass)
        if rest or accum < 1:
            raise WorkshopError(
                f"global_batch {self.global_batch:,} tokens does not split over {world} rank(s) x "
                f"micro-batch {mb} x seq {self.seq_len} ({per_pass:,} tokens per pass): re-plan, or "
                f"pick a global batch that is a multiple of {per_pass:,}"
            )
        return accum

    @classmethod
    def with_epochs(cls, epochs: float, **kw: Any) -> Job:
        """The same Job with its token budget given as passes over a dataset of known size."""
        held = DATASET_TOKENS.get(kw.get("dataset", ""))
        if not held:
            raise WorkshopError(
                f"dataset {kw.get('dataset')!r} has no known size; give tokens, or one of: "
                f"{', '.join(DATASET_TOKENS)}"
            )
        return cls(tokens=epochs * held, **kw)

    def check(self) -> None:
        """Every field, one error naming the first bad one."""
        get_preset(self.model)
        check_choice("weights", self.weights, WEIGHTS)
        if self.weights == "hub" and not get_preset(self.model).hub_id:
            raise WorkshopError(f"weights 'hub': model {self.model!r} has no hub weights; use 'random'")
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("engine", self.engine, ENGINES)
        check_choice("method", self.method, METHODS)
        check_choice("zero_stage", self.zero_stage, (0, 1, 2, 3))
        for what in ("seq_len", "global_batch", "micro_batch"):
            check_count(what, getattr(self, what))
        check_count("warmup_steps", self.warmup_steps, low=0)
        check_count("save_steps", self.save_steps, low=0)
        for what in ("tokens", "lr"):
            v = getattr(self, what)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise WorkshopError(f"{what} must be a finite number > 0, got {v!r}")
        if self.global_batch % self.seq_len:
            raise WorkshopError(
                f"global_batch {self.global_batch:,} tokens is not a whole number of {self.seq_len}-token "
                "sequences"
            )
        context = get_preset(self.model).config.get("max_position_embeddings")
        if context and self.seq_len > context:
            raise WorkshopError(f"seq_len {self.seq_len} is more than {self.model}'s context {context:,}")
        for what in ("offload_optimizer", "offload_param", "grad_ckpt"):
            if not isinstance(getattr(self, what), bool):
                raise WorkshopError(f"{what} must be true or false, got {getattr(self, what)!r}")


@dataclass(frozen=True)
class Placement:
    """Where a Job runs: the instance type (and the types of the planner's tie band that host the same pod),
    nodes, ranks per node, threads per rank, each pod's sizes, capacity type and storage."""

    instance_type: str
    device: str  # cpu | gpu
    nodes: int
    procs_per_node: int
    threads_per_rank: int
    cpu_request: str | None  # whole cores on CPU (requests == limits: Guaranteed QoS); None on GPU
    memory_request: str | None  # e.g. 150Gi
    shm_size: str
    gpus_per_node: int = 0
    efa_per_node: int = 0
    capacity_type: str = "on-demand"
    storage: str = "fsx"
    pool_types: tuple[str, ...] = ()  # every instance type the NodePool admits (the plan's own included)
    catalog: str = "moto"  # where the instance facts came from (moto: the offline catalog)

    @property
    def world(self) -> int:
        return self.nodes * self.procs_per_node

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.instance_type}"


@dataclass(frozen=True)
class Prediction:
    """What the planner predicts for the plan, and what it stands on (every rate and price cited)."""

    hours: float
    train_hours: float
    checkpoint_hours: float
    usd: float | None
    usd_per_hour: float | None
    fixed_usd: float | None
    bound: str
    tokens_per_s: float
    step_time_s: float
    price_kind: str
    sources: dict[str, str]
    made: str  # the date the prediction was made (ISO)


@dataclass(frozen=True)
class Plan:
    """A Job on a Placement, with the planner's Prediction: what `workshop render --plan` turns into
    manifests. `trainer` is the Kubeflow Trainer release the learner's cluster runs."""

    job: Job
    placement: Placement
    prediction: Prediction
    trainer: str = "2.3.0"
    format: str = FORMAT

    @property
    def grad_accum(self) -> int:
        return self.job.grad_accum(self.placement.world)

    def train_kwargs(self) -> dict[str, Any]:
        """The Job as TrainArgs keywords (the TrainJob's arguments): the view every TrainJob renders, the
        accumulation derived once from the placement's ranks."""
        job, pl = self.job, self.placement
        out: dict[str, Any] = {f.name: getattr(job, f.name) for f in fields(Knobs)}  # the knobs, as they are
        out.update(
            model=job.train_model,
            grad_accum=self.grad_accum,
            max_steps=job.steps,
            backend="gloo" if pl.device == "cpu" else "nccl",
        )
        if pl.device == "cpu":
            out["threads"] = pl.threads_per_rank
        return out

    def summary(self) -> dict[str, str]:
        """What the TrainJob's annotations and its start line state: global batch, tokens, steps, the
        prediction."""
        p = self.prediction
        usd = f"{p.usd:.0f}" if p.usd is not None else "unknown"
        return {
            "global-batch-tokens": str(self.job.global_batch),
            "tokens": str(self.job.trained_tokens),
            "steps": str(self.job.steps),
            "split": f"{self.placement.nodes}x{self.placement.procs_per_node}x{self.job.micro_batch}x"
            f"{self.grad_accum}x{self.job.seq_len}",
            "predicted-hours": f"{p.hours:.3g}",
            "predicted-usd": usd,
            "checkpoint-hours": f"{p.checkpoint_hours:.3g}",
            "capacity-type": self.placement.capacity_type,
            "predicted-on": p.made,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "trainer": self.trainer,
            "job": asdict(self.job),
            "placement": {**asdict(self.placement), "pool_types": list(self.placement.pool_types)},
            "prediction": asdict(self.prediction),
            "derived": {
                "steps": self.job.steps,
                "tokens": self.job.trained_tokens,
                "grad_accum": self.grad_accum,
                "epochs": self.job.epochs,
            },
        }


# ---------------------------------------------------------------- the one reconciliation


def check_hosts(plan: Plan) -> InstanceRow:
    """Does this placement host this job? The one reconciliation: node and rank counts, ranks the instance
    has (GPUs, or physical cores), the global batch split over the ranks, the pod's sizes within what the
    instance can allocate, and every pool type able to host the same pod. Returns the instance's row."""
    job, pl = plan.job, plan.placement
    job.check()
    check_count("placement.nodes", pl.nodes, high=1000)
    check_count("placement.procs_per_node", pl.procs_per_node)
    check_count("placement.threads_per_rank", pl.threads_per_rank)
    check_choice("placement.device", pl.device, DEVICES)
    check_choice("placement.capacity_type", pl.capacity_type, CAPACITY_TYPES)
    check_choice("placement.storage", pl.storage, STORAGES)
    row = _row(pl.instance_type, pl.catalog, "placement.instance_type")
    _check_pod(row, pl, "placement.instance_type")
    try:
        plan.job.grad_accum(pl.world)
    except WorkshopError as e:
        raise WorkshopError(f"job.global_batch: {e}") from None
    if pl.instance_type not in pl.pool_types:
        raise WorkshopError(
            f"placement.pool_types {list(pl.pool_types)} omit the plan's own {pl.instance_type}"
        )
    for t in pl.pool_types:
        _check_pod(_row(t, pl.catalog, "placement.pool_types"), pl, "placement.pool_types")
    return row


def _row(instance_type: str, catalog: str, what: str) -> InstanceRow:
    try:
        return instance_info(instance_type, source=catalog)
    except WorkshopError as e:
        raise WorkshopError(f"{what}: {e}") from None


def _check_pod(row: InstanceRow, pl: Placement, what: str) -> None:
    """The pod fits this instance type: device kind, ranks, threads, requests within allocatable."""
    name = row.instance_type
    if (row.gpus > 0) != (pl.device == "gpu"):
        raise WorkshopError(
            f"{what}: {name} is {'a GPU' if row.gpus else 'a CPU'} type, the plan a {pl.device} one"
        )
    if pl.device == "gpu":  # one rank per GPU; a pod may hold fewer GPUs than its node (chapter 06's 4 x 1)
        if pl.procs_per_node != pl.gpus_per_node or not 1 <= pl.gpus_per_node <= row.gpus:
            raise WorkshopError(
                f"{what}: {name} has {row.gpus} GPUs, the plan runs {pl.procs_per_node} rank(s) on "
                f"{pl.gpus_per_node} GPU(s) per node"
            )
        if pl.efa_per_node > row.max_efa_interfaces:
            raise WorkshopError(
                f"{what}: {name} has {row.max_efa_interfaces} EFA interfaces, the pod asks {pl.efa_per_node}"
            )
        return
    if pl.procs_per_node * pl.threads_per_rank > pod_cores(row):
        raise WorkshopError(
            f"{what}: a pod on {name} holds {pod_cores(row)} physical cores, the plan runs "
            f"{pl.procs_per_node} rank(s) x {pl.threads_per_rank} thread(s) per node"
        )
    gib, vcpus = allocatable(row)
    cpu = float(pl.cpu_request or 0)
    held = cpu / vcpus_per_core(row)  # whole cores the request holds (both hyperthreads of each)
    if pl.procs_per_node * pl.threads_per_rank > held:
        raise WorkshopError(
            f"placement.cpu_request: {pl.cpu_request} vCPUs on {name} hold {held:g} core(s), the plan runs "
            f"{pl.procs_per_node} rank(s) x {pl.threads_per_rank} thread(s) per node, one per core"
        )
    mem = float(str(pl.memory_request or "0").removesuffix("Gi"))
    if cpu > vcpus or mem > gib:
        raise WorkshopError(
            f"{what}: {name} allocates {vcpus:.1f} vCPUs and {gib:.0f} GiB to a pod; the plan's pod asks "
            f"{pl.cpu_request} and {pl.memory_request}"
        )


# ---------------------------------------------------------------- from the planner's ranking


def from_ranking(
    ranked: Sequence[Any],
    opts: Any,
    pick: int = 0,
    *,
    weights: str = "hub",
    capacity_type: str = "on-demand",
    trainer: str = "2.3.0",
) -> Plan:
    """The Plan of row `pick` (0: the planner's first) of `ranked` (workshop.plan.cost.rank's list, made with
    `opts`): its Job, its Placement (pod sizes from the memory plan; pool types: the tie band's types on the
    same node count that host the same pod) and its Prediction."""
    from workshop.plan.catalog import instance_info as info
    from workshop.plan.estimate import memory_options
    from workshop.plan.fit import fit_named, pod_sizes

    if not isinstance(pick, int) or not 0 <= pick < len(ranked):
        raise WorkshopError(f"pick {pick!r} is not a row of the ranking; allowed 0..{len(ranked) - 1}")
    r = ranked[pick]
    preset = get_preset(opts.model).name
    job = _job_of(r, weights)
    source = opts.source or "moto"
    row = info(r.instance_type, source=source)
    if r.device == "cpu":
        got = fit_named(row, preset, r.nodes, r.procs_per_node, memory_options(r), opts.headroom)
        sizes: dict[str, Any] = dict(pod_sizes(row, got))
        gpus, efa = 0, 0
    else:
        sizes = {"cpu_request": None, "memory_request": None, "shm_size": "64Gi"}
        # one node: no traffic leaves it, so the pod asks no EFA, and any tie-band type with as many GPUs
        # hosts it
        gpus, efa = row.gpus, (row.max_efa_interfaces if r.nodes > 1 else 0)
    placement = Placement(
        instance_type=r.instance_type,
        device=r.device,
        nodes=r.nodes,
        procs_per_node=r.procs_per_node,
        threads_per_rank=r.threads_per_rank,
        gpus_per_node=gpus,
        efa_per_node=efa,
        capacity_type=capacity_type,
        storage=opts.fixed.storage,
        pool_types=(r.instance_type,),
        catalog=source,
        **sizes,
    )
    placement = replace(placement, pool_types=tie_band_types(ranked, r, placement, preset))
    plan = Plan(job=job, placement=placement, prediction=_prediction_of(r), trainer=trainer)
    check_hosts(plan)
    return plan


def ranked_job(
    model: str, tokens: float, seq_len: int, global_batch: int, method: str = "full", weights: str = "hub"
) -> Job:
    """The Job a ranking prices (its split and ZeRO settings are set per candidate): the model's preset, its
    hub weights where it has them (else random), the recipe's dataset, learning rate and warm-up."""
    check_choice("weights", weights, WEIGHTS)
    preset = get_preset(model)
    hub = preset.hub_id
    settings = recipe(hub if weights == "hub" and hub else preset.name)
    return Job(
        model=preset.name,
        weights=weights if hub else "random",
        dataset=settings["dataset"],
        tokens=float(tokens),
        seq_len=seq_len,
        global_batch=global_batch,
        micro_batch=1,
        precision="bf16",
        method=method,
        lr=settings["lr"],
        warmup_steps=settings["warmup_steps"],
    )


def _job_of(r: Any, weights: str) -> Job:
    """The ranked plan's own Job (its knobs as the estimate priced them), with the weights the learner picked
    and the evaluation its steps allow."""
    job = r.job.job
    if weights != job.weights:
        again = ranked_job(job.model, job.tokens, job.seq_len, job.global_batch, job.method, weights)
        job = replace(job, weights=again.weights, dataset=again.dataset, lr=again.lr,
                      warmup_steps=again.warmup_steps)  # fmt: skip
    return replace(job, **held_out(job.dataset, job.steps))


EVALS_PER_RUN = 10  # held-out evaluations over a run: a curve to judge it by, at a forward-only cost


def held_out(dataset: str, steps: int) -> dict[str, Any]:
    """The job's evaluation: the dataset's own validation split where it has one (wikitext), else 1 % of the
    samples held out; EVALS_PER_RUN times over the run and at its end."""
    split = {"eval_split": "validation"} if dataset == "wikitext" else {"eval_fraction": 0.01}
    return {**split, "eval_steps": max(1, steps // EVALS_PER_RUN)}


def _prediction_of(r: Any) -> Prediction:
    return Prediction(
        hours=r.hours,
        train_hours=r.train_hours,
        checkpoint_hours=r.fixed_s.get("checkpoints", 0.0) / 3600,
        usd=r.usd,
        usd_per_hour=r.usd_per_hour,
        fixed_usd=r.fixed_usd,
        bound=r.bound,
        tokens_per_s=r.tokens_per_s,
        step_time_s=r.step_time_s,
        price_kind=r.price_kind,
        sources=dict(r.sources),
        made=date.today().isoformat(),
    )


def tie_band_types(ranked: Sequence[Any], r: Any, placement: Placement, model: str) -> tuple[str, ...]:
    """The plan's instance type and the types of the planner's tie band (same node count, same ranks per
    node) whose instances host the same pod (its requests, and the job's memory plan): what the NodePool may
    launch without changing the job."""
    from workshop.plan.estimate import memory_options
    from workshop.plan.fit import fit_named
    from workshop.plan.memory import HEADROOM

    types = [r.instance_type]
    for q in ranked:
        if q.tie and q.nodes == r.nodes and q.procs_per_node == r.procs_per_node and q.device == r.device:
            if q.instance_type in types:
                continue
            try:
                row = _row(q.instance_type, placement.catalog, "pool type")
                _check_pod(row, placement, "pool type")
                fit_named(row, model, r.nodes, r.procs_per_node, memory_options(r), HEADROOM)
            except WorkshopError:
                continue
            types.append(q.instance_type)
    return tuple(sorted(types))


# ---------------------------------------------------------------- plan files
# The plans manifests/ is rendered from (written by `workshop plan --source moto ... --out`, see
# manifests/plans/README.md): the CPU lesson keeps the original workshop's 4 nodes; the GPU plan is the
# planner's first GPU plan for the same global batch.
STORED_PLANS = {
    "cpu": "cpu-4-nodes.json",  # --family c7i --family m7i --family r7i --nodes 4
    "cpu-first": "cpu.json",  # --family c7i --family m7i --family r7i: what the planner would run instead
    "gpu": "gpu.json",  # --family p4d --family p4de --family p5 --family p5en --family g6e
}


def stored_plan(name: str) -> Plan:
    """One of the workbook's stored plan files (manifests/plans/), loaded and checked."""
    check_choice("stored plan", name, STORED_PLANS)
    return load_plan(MANIFESTS_DIR / "plans" / STORED_PLANS[name])


def save_plan(plan: Plan, path: str | Path) -> Path:
    """Write the plan file (JSON) whole: to a temporary file beside it, then renamed over it."""
    check_hosts(plan)
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(plan.to_dict(), fh, indent=2)
            fh.write("\n")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return p


def load_plan(path: str | Path) -> Plan:
    """The Plan in a plan file, every field checked (a missing or mistyped field, an instance type the catalog
    does not know, a node count the instance cannot host, a global batch the ranks do not divide: one
    WorkshopError naming the field)."""
    data = read_json(path, "plan file", "a plan file (workshop plan --out FILE)")
    return plan_from_dict(data)


def plan_from_dict(data: dict[str, Any]) -> Plan:
    if data.get("format") != FORMAT:
        raise WorkshopError(f"plan file field 'format' is {data.get('format')!r}; expected {FORMAT!r}")
    parts: dict[str, Any] = {}
    for key, cls in (("job", Job), ("placement", Placement), ("prediction", Prediction)):
        section = data.get(key)
        if not isinstance(section, dict):
            raise WorkshopError(f"plan file field '{key}' is missing or not an object")
        parts[key] = build(cls, section, key, every_field=cls is Job)
    trainer = data.get("trainer", "2.3.0")
    if not isinstance(trainer, str):
        raise WorkshopError(f"plan file field 'trainer' must be a release such as 2.3.0, got {trainer!r}")
    plan = Plan(trainer=trainer, **parts)
    try:
        check_hosts(plan)
    except WorkshopError as e:
        text = str(e)
        raise WorkshopError(text if text.startswith(("placement.", "job.")) else f"job: {text}") from None
    derived = data.get("derived") or {}
    for key, value in plan.to_dict()["derived"].items():  # derived, never read: a hand edit there is refused
        if key in derived and derived[key] != value:
            raise WorkshopError(
                f"plan file field 'derived.{key}' is {derived[key]!r}, but the job gives {value!r}: "
                "edit the job instead"
            )
    return plan
