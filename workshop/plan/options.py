"""What a cost ranking is asked for: the job every plan trains (one global batch), the clusters searched, the
run's costs besides its steps, and the checks that turn a bad option into one line naming it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from workshop.errors import WorkshopError, check_choice, check_count
from workshop.lang import _
from workshop.plan import calibration, rates
from workshop.plan.catalog import check_families
from workshop.plan.memory import HEADROOM, METHODS, plan_memory
from workshop.plan.models import SEQ_LEN, Architecture, get_preset
from workshop.plan.topology import GB

DEFAULT_FAMILIES = ("c7i", "m7i", "r7i", "c8i", "m8i", "r8i", "p4d", "p4de", "p5", "p5en", "g6e", "g5")
NODE_COUNTS = (1, 2, 4, 8)
MICRO_BATCHES = (1, 2, 4, 8, 16)
# The fine-tune's own optimizer step: the original workshop's 4 ranks x micro-batch 1 x 4 accumulation steps
# x 512 tokens (models.FINETUNE). Every plan trains this global batch, so every plan is the same fine-tune.
DEFAULT_GLOBAL_BATCH = 4 * 1 * 4 * 512
PLANNER_ERROR = 0.35  # the planner's stated +/-35% target: plans closer in cost than this are ties
STATE_BYTES_PER_PARAM = 14  # a checkpoint: bf16 weights + fp32 master, Adam m and v
STACKS = tuple(rates.GPU_STACKS)
CPU_ENGINES = tuple(rates.CPU_ENGINES)
STORAGES = ("fsx", "s3")
# The workbook's stated target for the jobs it renders (chapter 05, manifests/): checkpoint writes take 5 % of
# the wall time, the interval derived from it and the storage's write rate (checkpoint_every_s). A failure
# then loses at most one interval of training; a smaller share loses more, a larger one pays more writes.
CHECKPOINT_SHARE = 0.05


def checkpoint_every_s(params: int, write_gbytes_per_s: float, share: float) -> float:
    """Seconds of training between checkpoints so that writing them takes `share` of the wall time: a save
    of `params` x 14 B (bf16 weights, fp32 master, Adam m and v) at `write_gbytes_per_s` takes c seconds;
    every T seconds of training it costs c / (T + c) of the run, so T = c (1 - share) / share."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share < 1:  # nan too
        raise WorkshopError(f"checkpoint share {share!r} is out of range; allowed (0, 1)")
    if not write_gbytes_per_s > 0:
        raise WorkshopError(f"checkpoint write rate {write_gbytes_per_s!r} GB/s must be > 0")
    save_s = params * STATE_BYTES_PER_PARAM / GB / write_gbytes_per_s
    return save_s * (1 - share) / share


@dataclass(frozen=True)
class FixedCosts:
    """What a run pays besides its training steps, each a stated assumption with a flag; billed per node."""

    startup_s: rates.Rate = field(default_factory=rates.startup_s)
    download_gbytes_per_s: rates.Rate = rates.DOWNLOAD_GBYTES_PER_S
    init_s: rates.Rate = rates.INIT_S
    checkpoint_minutes: float = rates.CHECKPOINT_MINUTES
    # the stated target share of wall time for checkpoint writes (0.05 = 5 %): the interval derives from it
    # and the storage's write rate (checkpoint_every_s). The default is the workbook's one policy, so every
    # chapter and the CLI price one plan alike; None: a checkpoint every checkpoint_minutes instead
    checkpoint_share: float | None = CHECKPOINT_SHARE
    storage: str = "fsx"
    storage_gbytes_per_s: rates.Rate | None = None  # default: the storage's own (rates.STORAGE)

    def write_rate(self) -> rates.Rate:
        return self.storage_gbytes_per_s or rates.STORAGE[self.storage].gbytes_per_s

    def every_s(self, arch: Architecture) -> float:
        """Seconds of training between checkpoints: the stated interval, or the one that keeps checkpoint
        writes at checkpoint_share of the wall time."""
        if self.checkpoint_share is None:
            return self.checkpoint_minutes * 60
        return checkpoint_every_s(arch.params, self.write_rate().value, self.checkpoint_share)

    def terms(self, arch: Architecture, train_s: float) -> dict[str, float]:
        """Seconds of the run besides its steps: start-up, download, init, checkpoints, final save."""
        write = self.write_rate().value
        weights_gb = arch.params * 2 / GB
        states_gb = arch.params * STATE_BYTES_PER_PARAM / GB
        every = self.every_s(arch)
        n_ckpt = int(train_s // every) if every > 0 else 0
        return {
            "startup": self.startup_s.value,
            "download": weights_gb / self.download_gbytes_per_s.value,
            "init": self.init_s.value,
            "checkpoints": n_ckpt * states_gb / write,
            "final save": weights_gb / write,
        }

    def storage_usd(self, arch: Architecture, hours: float) -> float:
        """The storage the run writes to, for the run's hours (FSx bills its whole capacity)."""
        spec = rates.STORAGE[self.storage]
        gb = max(spec.min_gb, arch.params * (STATE_BYTES_PER_PARAM + 2) / GB)
        return gb * spec.usd_per_gb_month.value * hours / rates.HOURS_PER_MONTH

    def cite(self) -> dict[str, str]:
        return {
            "startup": self.startup_s.cite(),
            "download": self.download_gbytes_per_s.cite(),
            "init": self.init_s.cite(),
            "checkpoints": (
                _("every {minutes:g} min of training").format(minutes=self.checkpoint_minutes)
                if self.checkpoint_share is None
                else _("at the interval that keeps checkpoint writes at {share:.0%} of wall time").format(
                    share=self.checkpoint_share
                )
            )
            + _(", {state} B/param of states to {storage} at {rate}").format(
                state=STATE_BYTES_PER_PARAM, storage=self.storage, rate=self.write_rate().cite()
            ),
            "storage": rates.STORAGE[self.storage].usd_per_gb_month.cite(),
        }


@dataclass
class Options:
    """Everything a ranking is asked for; the flags of `workshop plan`. Units: tokens and global_batch in
    tokens, seq_len in tokens per sequence, headroom a fraction (0.2 = 20 %), max_hours in hours, budget in
    USD, prices in USD per hour."""

    model: str = "llama-3-8b"
    tokens: float = 1e8
    families: Sequence[str] = DEFAULT_FAMILIES
    nodes: Sequence[int] = NODE_COUNTS
    procs_per_node: int | None = None  # default: 1 per CPU node, every GPU
    zero_stages: Sequence[int] = (3, 2, 1, 0)
    micro_batches: Sequence[int] = MICRO_BATCHES
    global_batch: int = DEFAULT_GLOBAL_BATCH  # tokens per optimizer step, the same for every plan
    seq_len: int = SEQ_LEN
    grad_ckpts: Sequence[bool] = (False, True)  # activation checkpointing off, on: both tried
    headroom: float = HEADROOM
    placement_group: bool = False
    ena_express: bool = False
    stack: str = "hf-deepspeed-bf16"  # the GPU software stack and precision (rates.GPU_STACKS)
    cpu_engine: str = "deepspeed"  # the CPU job's engine: its measured rate (rates.CPU_ENGINES)
    cpu_efficiency: rates.Rate | None = None  # default: measured for cpu_engine
    ceiling: str | None = None  # a ceiling.json measured on this machine (calibrate), else the stored one
    gpu_efficiency: rates.Rate | None = None  # default: the stack's
    fixed: FixedCosts = field(default_factory=FixedCosts)
    prices: dict[str, float] = field(default_factory=dict)
    max_hours: float | None = None
    budget: float | None = None
    source: str | None = None
    offload: bool = False  # also try GPU optimizer/parameter offload (estimates optimistic: see _offloads)
    method: str = "full"  # full fine-tuning, or "lora" (adapters on frozen weights)
    eval_share: float = 0.0  # held-out tokens evaluated per trained token (forward only)


def split_batch(
    global_batch: int, seq_len: int, world: int, micro_batches: Sequence[int]
) -> list[tuple[int, int]]:
    """(micro_batch, grad_accum) pairs that make exactly `global_batch` tokens per step on `world` ranks."""
    seqs, rest = divmod(global_batch, seq_len * world)
    if rest or seqs < 1:
        return []
    return [(mb, seqs // mb) for mb in sorted(micro_batches) if seqs % mb == 0]


def batch_reason(opts: Options, world: int) -> str:
    """Why `world` ranks cannot train the job's global batch."""
    seqs = opts.global_batch / opts.seq_len
    return (
        f"the global batch of {opts.global_batch:,} tokens is {seqs:g} sequences of {opts.seq_len}: it does "
        f"not split evenly over {world} ranks with a micro-batch in {sorted(opts.micro_batches)} "
        "(--global-batch changes the fine-tune)"
    )


def check_range(what: str, value: float | None, low: float, high: float, *, low_open: bool = False) -> None:
    """One line naming the bad value and the allowed range (also refuses nan and inf)."""
    if value is None:
        return
    ok = isinstance(value, (int, float)) and math.isfinite(value) and low <= value <= high
    if ok and low_open and value == low:
        ok = False
    if not ok:
        bracket = "(" if low_open else "["
        raise WorkshopError(f"{what} {value!r} is out of range; allowed {bracket}{low:g}, {high:g}]")


# The range of each number a plan takes (low, high, low end open): beyond it the estimate means nothing (an
# efficiency of 1e-308 turns the step time into inf and nan). `workshop plan` checks its flags' text against
# the same bounds (cli/plan_args.py).
LIMITS: dict[str, tuple[float, float, bool]] = {
    "tokens": (0, 1e13, True),
    "startup_s": (0, 7200, False),
    "init_s": (0, 7200, False),
    "download_gbps": (1e-3, 100, False),
    "storage_gbps": (1e-3, 1000, False),
    "checkpoint_minutes": (1, 1e5, False),  # or 0: only the final save
    "headroom": (0, 1, False),
    "max_hours": (1e-2, 1e9, False),
    "budget": (1e-2, 1e9, False),
    "efficiency": (1e-3, 1, False),
    "price": (1e-3, 1e4, False),
    "checkpoint_share": (0, 0.5, True),  # of the wall time: more than half spent writing is no training run
    "eval_share": (0, 1, False),  # held-out tokens evaluated per trained token (0: no evaluation)
}


def check_limit(what: str, name: str, value: float | None, *, zero: bool = False) -> None:
    """check_range with LIMITS[name] (`zero`: 0 also allowed)."""
    if zero and value == 0:
        return
    low, high, low_open = LIMITS[name]
    check_range(what, value, low, high, low_open=low_open)


def validate(opts: Options) -> None:
    check_families(opts.families)
    check_limit("tokens", "tokens", opts.tokens)
    for n in opts.nodes:
        check_count("nodes", n, high=1000)
    for s in opts.zero_stages:
        check_choice("ZeRO stage", s, (0, 1, 2, 3))
    check_choice("method", opts.method, METHODS)
    check_range("eval-share", opts.eval_share, 0, 10)
    for mb in opts.micro_batches:
        check_count("micro_batch", mb)
    if opts.procs_per_node is not None:
        check_count("procs_per_node", opts.procs_per_node)
    for what, v in (("max_hours", opts.max_hours), ("budget", opts.budget)):
        check_limit(what, what, v)
    check_limit("headroom", "headroom", opts.headroom)
    for what, rate in (("cpu efficiency", opts.cpu_efficiency), ("gpu efficiency", opts.gpu_efficiency)):
        if rate is not None:
            check_limit(what, "efficiency", rate.value)
    for instance, usd in opts.prices.items():
        check_limit(f"price of {instance}", "price", usd)
    check_choice("GPU stack", opts.stack, STACKS)
    check_choice("CPU engine", opts.cpu_engine, CPU_ENGINES)
    if opts.cpu_efficiency is None:
        # a bad --ceiling is an error, not "no CPU plan"
        calibration.cpu_efficiency(opts.cpu_engine, opts.ceiling)
    check_choice("storage", opts.fixed.storage, STORAGES)
    check_limit("start-up seconds", "startup_s", opts.fixed.startup_s.value)
    check_limit("init seconds", "init_s", opts.fixed.init_s.value)
    check_limit("download GB/s", "download_gbps", opts.fixed.download_gbytes_per_s.value)
    check_limit("checkpoint minutes", "checkpoint_minutes", opts.fixed.checkpoint_minutes, zero=True)
    share = opts.fixed.checkpoint_share
    if share is not None:
        checkpoint_every_s(1, 1.0, share)  # (0, 1), named
    check_limit("storage GB/s", "storage_gbps", opts.fixed.write_rate().value)
    context = get_preset(opts.model).config.get("max_position_embeddings")
    if context:
        check_range(f"seq_len (the model's context is {context:,})", opts.seq_len, 1, context)
    if isinstance(opts.global_batch, bool) or not isinstance(opts.global_batch, int) or opts.global_batch < 1:
        raise WorkshopError(
            _("global batch must be a whole number of tokens >= 1, got {value}").format(
                value=repr(opts.global_batch)
            )
        )
    if opts.global_batch % opts.seq_len:
        raise WorkshopError(
            _("global batch {batch:,} tokens is not a whole number of {seq}-token sequences").format(
                batch=opts.global_batch, seq=opts.seq_len
            )
        )
    if opts.global_batch > opts.tokens:
        raise WorkshopError(
            _(
                "global batch {batch:,} tokens is more than the token budget {tokens:.3g}: not one whole "
                "optimizer step; lower --global-batch or raise --tokens"
            ).format(batch=opts.global_batch, tokens=opts.tokens)
        )
    plan_memory(opts.model, world_size=1, seq_len=opts.seq_len, micro_batch=1)  # model and seq_len
