"""ZeRO memory per rank, from the exact parameter count (fit: the smallest instance that holds it).

Why a planner: the original workshop sized its pods from one log line (24.47 GB per rank "after ZeRO init"),
but that line comes before the first optimizer step, so Adam's two fp32 moments and the activations are not in
it yet. Counting every component from the parameter count shows what a pod must really hold, and where.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import NotRequired, TypedDict

from workshop import errors, tables
from workshop.errors import WorkshopError, check_choice
from workshop.lang import N_, _
from workshop.plan.knobs import MemoryKnobs
from workshop.plan.models import SEQ_LEN, Architecture, architecture

TOTAL_PER_RANK = N_("total per rank")  # the memory table's last row

GiB = 1024**3
HEADROOM = 0.2  # spare memory asked for above the modelled total when fitting a node (slack, spikes)
ZERO_STAGES = (0, 1, 2, 3)
DTYPES = {"bf16": 2, "fp16": 2, "fp32": 4}
DEVICES = ("cpu", "gpu")
METHODS = ("full", "lora")  # full fine-tuning, or LoRA adapters on frozen weights (workshop.train.lora)
LORA_RANK = 8  # the training default, --lora-rank

# Per-rank process overhead (torch, DeepSpeed, Python, tokenized data): the original workshop's first ZeRO-3
# log line (MA 4.81 GiB, RSS of one rank) minus that rank's bf16 shard of Llama-3-8B (3.74 GiB) = 1.07 GiB.
RUNTIME_HOST_BYTES = int(1.07 * GiB)
# CUDA context + NCCL buffers on each GPU (typical for an H100/A100 process).
RUNTIME_DEVICE_BYTES = 1 * GiB
# DeepSpeed's default stage-3 sub_group_size: the fp32 gradient of one sub-group is built at step time.
SUB_GROUP_SIZE = 1_000_000_000
# Bytes per stepped element of torch AdamW's temporaries (denominator sqrt(v)/bc + eps): on a CPU torch takes
# its single-tensor path (CPU is no foreach device) and the sqrt and its quotient exist together (8 B); on a
# GPU the foreach path makes one sqrt list and divides and adds in place (4 B). DeepSpeed's CPU Adam
# (offload) updates in place. Measured on the tiny model (issue 47): +27 MiB inside the first step for a
# 3.5 M-element partition.
ADAM_TEMP_BYTES = {"cpu": 8, "gpu": 4}
# What the planner counts is live bytes. glibc keeps a freed buffer below its mmap threshold (which rises to
# 32 MiB as buffers are freed) in the heap for reuse, where RSS still counts it: a small model's measured peak
# then depends on the order of frees (on 2 ranks of the tiny model, LoRA's saving read 51-84 MiB from run to
# run). Measuring under this setting returns every freed buffer at once, as glibc always does for an 8B
# model's tensors (each above 32 MiB): chapter 03 and the LoRA comparison measure with it.
LIVE_BYTES_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}
# The two phases of a training step whose buffers never coexist: autograd frees the activations and ZeRO-3
# the gathered layers before the optimizer step, which then builds the fp32 gradient and AdamW's temporaries.
FORWARD_BACKWARD = ("activations", "gathered_params")
STEP = ("optimizer_grads_fp32", "optimizer_temps")


class PlanOptions(TypedDict):
    """plan_memory's training options (all but the model and the ranks), as `recommend` passes them on."""

    zero_stage: int
    offload_optimizer: bool
    offload_param: bool
    micro_batch: int
    seq_len: int
    grad_ckpt: bool
    dtype: str
    activations: NotRequired[str]  # ACTIVATIONS key; default DEFAULT_ACTIVATIONS
    method: NotRequired[str]  # "full" when absent


class RunSpec(PlanOptions):
    """A whole run as plan_memory's keyword arguments: `plan_memory(**spec)`."""

    model: str
    world_size: int
    procs_per_node: int
    device: str


# What autograd keeps for backward depends on the training stack, not only on the model: each name below is
# one stack's activation model (activation_bytes), and the planner uses the one of the stack it ranks.
ACTIVATIONS = {
    "hf-sdpa": "HF transformers with SDPA attention (the workbook's stack: a fused kernel, no seq x seq "
    "scores kept), fp32 RMSNorm upcasts, fp32 log-softmax at the loss",
    "hf-eager": "HF transformers with eager attention: also the seq x seq scores of every head (fp32 softmax "
    "+ bf16 probabilities); selective recompute of the attention core brings it to hf-sdpa's bytes",
    "tuned": "fused stack (Megatron/NeMo with Transformer Engine): flash attention, fused RMSNorm, SwiGLU, "
    "cross-entropy (Korthikanti et al. 2022's accounting for a Llama layer; selective recompute adds "
    "nothing under flash attention)",
}
DEFAULT_ACTIVATIONS = "hf-sdpa"
# `workshop plan --stack` -> the activation model of that stack (CPU jobs always run the workbook's stack).
STACK_ACTIVATIONS = {"hf-deepspeed-bf16": "hf-sdpa", "tuned-bf16": "tuned", "tuned-fp8": "tuned"}


def activation_bytes(
    arch: Architecture,
    micro_batch: int,
    seq_len: int,
    grad_ckpt: bool,
    dtype_bytes: int = 2,
    activations: str = DEFAULT_ACTIVATIONS,
) -> dict[str, int]:
    """Bytes autograd keeps for backward in a Llama decoder, per micro-batch, for one stack (ACTIVATIONS).

    hf-sdpa, per token and layer: 2 RMSNorms (fp32 upcast 4h + normalized 2h + its scaled output 2h = 8h
    each), q and attention output 2h each, k and v 2*kv each, the SDPA log-sum-exp 4*heads, and the SwiGLU
    MLP 8*f (gate, silu(gate), up, product); the head keeps the fp32 log-softmax of the logits (4*vocab per
    token).
    hf-eager adds the fp32 softmax and bf16 probabilities of every head over the sequence (6*heads*seq).
    tuned keeps each norm's 2h input and output, q/k/v, the flash output, the SwiGLU input 4f and the down
    projection's input 2f (12h + 4kv + 6f + 4*heads) and the fused cross-entropy's fp32 softmax. With
    checkpointing (full recompute) only each layer's 2h input is kept, plus one layer rebuilt during backward.
    hf-sdpa is checked against a real forward pass in tests (saved-tensor hooks).
    """
    check_choice("activation model", activations, tuple(ACTIVATIONS))
    tokens = micro_batch * seq_len
    s = dtype_bytes / 2  # the coefficients above are for 16-bit activations
    kv = arch.kv_heads * arch.head_dim
    if activations == "tuned":
        per_layer = int(s * (12 * arch.hidden + 4 * kv + 6 * arch.intermediate)) + 4 * arch.heads
        head = 4 * arch.vocab + int(s * 2 * arch.hidden)
        transient = int(s * 2) * arch.vocab  # the logits beside their softmax, one chunk at a time
    else:
        per_layer = int(s * (20 * arch.hidden + 4 * kv + 8 * arch.intermediate)) + 4 * arch.heads
        if activations == "hf-eager":
            per_layer += 6 * arch.heads * seq_len
        head = 4 * arch.vocab + int(s * 8 * arch.hidden)
        # the bf16 logits and their fp32 upcast exist together for a moment at the loss
        transient = (int(s * 2) + 4) * arch.vocab
    kept = arch.layers * (int(s * 2 * arch.hidden) if grad_ckpt else per_layer)
    working = per_layer if grad_ckpt else 0  # the layer being recomputed
    return {
        "saved": tokens * (kept + head),
        "recompute": tokens * working,
        "loss_transient": tokens * transient,
    }


def lora_params(arch: Architecture, rank: int = LORA_RANK) -> int:
    """LoRA's adapter parameters on every linear layer of the decoder (PEFT's all-linear, the training
    default): r x (inputs + outputs) for each of q, k, v, o, gate, up and down, in every layer."""
    h, f = arch.hidden, arch.intermediate
    q, kv = arch.heads * arch.head_dim, arch.kv_heads * arch.head_dim
    per_layer = (h + q) + 2 * (h + kv) + (q + h) + 2 * (h + f) + (f + h)
    return arch.layers * rank * per_layer


@dataclass
class MemoryPlan:
    """Per-rank bytes by component, where each lives, and the totals a pod and a node must hold."""

    model: str
    params: int
    world_size: int
    procs_per_node: int
    knobs: MemoryKnobs  # what it sized: ZeRO stage, offloads, micro-batch, sequence, checkpointing, method
    dtype: str
    device: str
    components: dict[str, int] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)
    activations: str = DEFAULT_ACTIVATIONS  # the stack's activation model (ACTIVATIONS)

    # the knobs, read through (declared once, in workshop.plan.knobs)
    @property
    def zero_stage(self) -> int:
        return self.knobs.zero_stage

    @property
    def offload_optimizer(self) -> bool:
        return self.knobs.offload_optimizer

    @property
    def offload_param(self) -> bool:
        return self.knobs.offload_param

    @property
    def micro_batch(self) -> int:
        return self.knobs.micro_batch

    @property
    def seq_len(self) -> int:
        return self.knobs.seq_len

    @property
    def grad_ckpt(self) -> bool:
        return self.knobs.grad_ckpt

    @property
    def method(self) -> str:
        return self.knobs.method

    def _step_keys(self) -> tuple[str, ...]:
        """The step's transient buffers; an offloaded optimizer keeps its fp32 gradient buffer all along."""
        return ("optimizer_temps",) if self.offload_optimizer else STEP

    def _fb_keys(self) -> tuple[str, ...]:
        """The forward/backward's transient buffers; ZeRO-1/2 also free the 16-bit gradients once the step
        has copied them to fp32 (stage_1_and_2.py), where ZeRO-3 keeps its flat gradient buffer."""
        stage12 = self.zero_stage in (1, 2) and not self.offload_optimizer
        return FORWARD_BACKWARD + (("grads",) if stage12 else ())

    def phases(self, where: str | None = None) -> dict[str, int]:
        """Bytes of each phase's transient buffers (in `where`, or everywhere): forward/backward, step."""

        def add(keys: tuple[str, ...]) -> int:
            return sum(
                self.components.get(k, 0) for k in keys if where is None or self.placement.get(k) == where
            )

        return {"forward_backward": add(self._fb_keys()), "step": add(self._step_keys())}

    def _sum(self, where: str | None = None) -> int:
        """What stays all along, plus the larger of the two phases (their buffers never coexist)."""
        transient = self._fb_keys() + self._step_keys()
        kept = sum(
            v
            for k, v in self.components.items()
            if k not in transient and (where is None or self.placement[k] == where)
        )
        return kept + max(self.phases(where).values())

    @property
    def total(self) -> int:
        """Per-rank peak during training: every kept component, plus the larger of the forward/backward
        buffers and the optimizer step's (checked against the tiny model's measured peaks, issue 47)."""
        return self._sum()

    @property
    def host_bytes(self) -> int:
        return self._sum("host")

    @property
    def device_bytes(self) -> int:
        return self._sum("device")

    @property
    def host_total(self) -> int:
        """Host memory the ranks of one node need together (node overhead not included)."""
        return self.procs_per_node * self.host_bytes

    @property
    def at_zero_init(self) -> int:
        """What DeepSpeed has allocated by 'After initializing ZeRO optimizer' (before any step)."""
        keys = ("runtime", "params", "master_fp32", "optimizer_grads_fp32", "grads")
        offload_grads = self.offload_optimizer
        return sum(self.components.get(k, 0) for k in keys if k != "optimizer_grads_fp32" or offload_grads)

    def stages(self) -> list[tuple[str, int]]:
        """Cumulative per-rank bytes in the order DeepSpeed's stage-3 log reports them, then training."""
        c = self.components
        steps = [
            ("Stage 3 initialize beginning", c["runtime"] + c["params"]),
            ("After creating fp16 partitions", 0),
            ("After creating fp32 partitions", c.get("master_fp32", 0)),
            (
                "After initializing optimizer states",
                c["optimizer_grads_fp32"] if self.offload_optimizer else 0,
            ),
            ("After initializing ZeRO optimizer", 0 if "grads" in self._fb_keys() else c["grads"]),
            (N_("After the first step (Adam moments)"), c["adam_moments"]),
            (
                N_("Training peak (the larger: activations or step buffers)"),
                max(self.phases().values()) + c.get("cuda_context", 0),
            ),
        ]
        out, running = [], 0
        for label, add in steps:
            running += add
            out.append((label, running))
        return out

    def explain(self) -> str:
        """Every component of the per-rank total, in GiB, with why it is there (the chapter prints this)."""
        w, offl = self.world_size, self.offload_optimizer
        lora = _(" (LoRA adapters only)") if self.method == "lora" else ""
        why = {
            "runtime": _(
                "torch, DeepSpeed, Python, tokenized data (calibrated on the original workshop's log)"
            ),
            "params": _("{dtype} parameters").format(dtype=self.dtype)
            + (_(", frozen but the LoRA adapters") if self.method == "lora" else "")
            + (_(", 1/{w} each (ZeRO-3)").format(w=w) if self.zero_stage >= 3 else ""),
            "grads": (_("{dtype} gradients").format(dtype=self.dtype) + lora)
            + (_(", 1/{w} each (ZeRO-2+)").format(w=w) if self.zero_stage >= 2 else ""),
            "master_fp32": _("fp32 master copy of the weights")
            + lora
            + (f", 1/{w}" if self.zero_stage >= 1 else ""),
            "adam_moments": _("Adam's two fp32 moments, created at the first step")
            + lora
            + (f", 1/{w}" if self.zero_stage else ""),
            "optimizer_grads_fp32": (
                _("fp32 copy of the gradient partition that CPU Adam reads (offload), 1/{w}").format(w=w)
                if offl
                else _(
                    "fp32 gradient of ONE optimizer sub-group, built at step time (DeepSpeed's "
                    "sub_group_size = {size:.0e} parameters x 4 B)"
                ).format(size=SUB_GROUP_SIZE)
                if self.zero_stage == 3
                else _("fp32 gradient of the partition, built at step time, 1/{w}").format(w=w)
            ),
            "optimizer_temps": (
                _("none: DeepSpeed's CPU Adam updates in place")
                if offl
                else _(
                    "AdamW's temporaries at the step: sqrt of the second moment and its quotient, 2 x 4 B "
                    "per stepped parameter (torch's single-tensor path on a CPU)"
                )
                if self.device == "cpu"
                else _(
                    "AdamW's temporary at the step: sqrt of the second moment, 4 B per stepped parameter "
                    "(torch's foreach path on a GPU)"
                )
            ),
            "gathered_params": _("the largest layer, all-gathered whole (fp32-sized working buffer)"),
            "activations": (
                _("activations kept for backward: micro-batch {mb} x {seq} tokens").format(
                    mb=self.micro_batch, seq=self.seq_len
                )
                + (_(", checkpointed") if self.grad_ckpt else "")
                + f" [{self.activations}]"
            ),
            "cuda_context": _("CUDA context and NCCL buffers"),
            "load_staging": _("checkpoint shard read into host memory before the GPU copy"),
        }
        lines = [
            f"{k:22s} {v / GiB:7.2f} GiB  {self.placement[k]:6s}  {why.get(k, '')}"
            for k, v in self.components.items()
        ]
        lines.append(f"{tables.ljust(_(TOTAL_PER_RANK), 22)} {self.total / GiB:7.2f} GiB")
        lines.append(self.phase_note())
        return "\n".join(lines)

    def phase_note(self) -> str:
        """Why the total is not the components' sum: the sentence under every breakdown."""
        ph = self.phases()
        if "grads" in self._fb_keys():
            said = _(
                "The total counts the larger of two phases that never coexist: activations + 16-bit "
                "gradients {fb:.2f} GiB (freed once the step has their fp32 copy), fp32 gradient + AdamW "
                "temporaries {step:.2f} GiB (the optimizer step)."
            )
        else:
            said = _(
                "The total counts the larger of two phases that never coexist: activations + gathered layer "
                "{fb:.2f} GiB (freed after backward), fp32 gradient + AdamW temporaries {step:.2f} GiB (the "
                "optimizer step)."
            )
        return said.format(fb=ph["forward_backward"] / GiB, step=ph["step"] / GiB)

    def options(self) -> PlanOptions:
        """The training options this plan was made with (plan_memory's keywords besides model and ranks)."""
        return PlanOptions(**{k: getattr(self, k) for k in PlanOptions.__annotations__})  # type: ignore[typeddict-item]

    def as_dict(self) -> dict:
        flat = asdict(self)
        return {
            **{k: v for k, v in flat.items() if k != "knobs"},
            **flat["knobs"],
            "total": self.total,
            "host_bytes": self.host_bytes,
            "device_bytes": self.device_bytes,
            "host_total": self.host_total,
            "at_zero_init": self.at_zero_init,
            "phases": self.phases(),
            "stages": self.stages(),
        }


def check_count(what: str, value: object, minimum: int = 1) -> None:
    """A count (ranks, nodes, tokens) must be an int >= `minimum`: errors.check_count, the one count check."""
    errors.check_count(what, value, low=minimum)


def _check_options(world_size: int, procs_per_node: int, opts: PlanOptions, device: str) -> None:
    """plan_memory's arguments, each checked before any arithmetic: one line naming the bad one."""
    check_count("micro_batch", opts["micro_batch"])
    check_count("seq_len", opts["seq_len"])
    check_choice("ZeRO stage", opts["zero_stage"], ZERO_STAGES)
    check_choice("dtype", opts["dtype"], DTYPES)
    check_choice("device", device, DEVICES)
    check_choice("method", opts.get("method", "full"), METHODS)
    check_count("procs_per_node", procs_per_node)
    if procs_per_node > world_size:
        raise WorkshopError(f"procs_per_node {procs_per_node} exceeds world_size {world_size}")
    if opts["offload_param"] and opts["zero_stage"] != 3:
        raise WorkshopError(f"offload_param needs ZeRO stage 3 (got stage {opts['zero_stage']})")
    if opts["offload_optimizer"] and opts["zero_stage"] == 0:
        raise WorkshopError("offload_optimizer needs ZeRO stage 1, 2 or 3 (got stage 0)")


def _components(arch: Architecture, world_size: int, opts: PlanOptions, device: str) -> dict[str, int]:
    """Bytes per rank of each component; a term that ZeRO stage s shards is divided by the world size."""
    P, W, d = arch.params, world_size, DTYPES[opts["dtype"]]  # noqa: N806 (the formulas' P and W)
    stage = opts["zero_stage"]
    # LoRA: only the adapters (A parameters) have gradients, fp32 masters and Adam moments; the frozen
    # weights stay in the model's dtype
    A = lora_params(arch) if opts.get("method", "full") == "lora" else P  # noqa: N806 (trained params)

    def part(n_bytes_per_param: float, stage_from: int, n: int = A) -> int:
        return math.ceil(n_bytes_per_param * n / (W if stage >= stage_from else 1))

    acts = activation_bytes(
        arch,
        opts["micro_batch"],
        opts["seq_len"],
        opts["grad_ckpt"],
        d,
        opts.get("activations", DEFAULT_ACTIVATIONS),
    )
    # the elements AdamW steps at once: stage 3 one sub-group of the flat partition, stages 1-2 the flat
    # partition, stage 0 the parameters themselves (one at a time on a CPU, the whole list on a GPU)
    if stage == 3:
        stepped = min(math.ceil(A / W), SUB_GROUP_SIZE)
    elif stage:
        stepped = math.ceil(A / W)
    else:
        stepped = min(A, arch.largest_layer_params) if device == "cpu" else A
    comp = {
        "runtime": RUNTIME_HOST_BYTES,
        "params": part(d, 3, P + (A if A != P else 0)),
        "grads": part(d, 2),
        "master_fp32": part(4, 1) if d < 4 else 0,
        "adam_moments": part(8, 1),
        # offloaded optimizer: CPU Adam reads an fp32 copy of the gradient partition, kept all along;
        # otherwise the step builds the fp32 gradient of what it steps (stage 3: one sub-group; stages 1-2:
        # the partition, stage_1_and_2.py's single_grad_partition)
        "optimizer_grads_fp32": (part(4, 1) if opts["offload_optimizer"] else (4 * stepped if stage else 0)),
        "optimizer_temps": 0 if opts["offload_optimizer"] else ADAM_TEMP_BYTES[device] * stepped,
        "gathered_params": 4 * arch.largest_layer_params if stage == 3 else 0,
        "activations": sum(acts.values()),
    }
    if device == "gpu":
        comp["cuda_context"] = RUNTIME_DEVICE_BYTES
        if not opts["offload_param"]:  # each rank reads its checkpoint shard into host memory first
            comp["load_staging"] = part(d, 3, P)
    return comp


def rank_peak(arch: Architecture, world_size: int, opts: PlanOptions, device: str = "cpu") -> int:
    """Per-rank peak bytes (MemoryPlan.total, not the components' sum) for an Architecture built here (a
    slice of a preset, say)."""
    return _plan(arch.name, arch, world_size, world_size, opts, device).total


def _placement(comp: dict[str, int], opts: PlanOptions, device: str) -> dict[str, str]:
    """Where each component lives: "host" or "device" (a CPU rank has only the host)."""
    host = "host"
    dev = "host" if device == "cpu" else "device"
    opt_where = host if opts["offload_optimizer"] else dev
    placement = {
        "runtime": host,
        "params": host if opts["offload_param"] else dev,
        "grads": opt_where,
        "master_fp32": opt_where,
        "adam_moments": opt_where,
        "optimizer_grads_fp32": opt_where,
        "optimizer_temps": opt_where,
        "gathered_params": dev,
        "activations": dev,
        "cuda_context": dev,
        "load_staging": host,
    }
    return {k: placement[k] for k in comp}


def plan_memory(
    model: str,
    *,
    world_size: int,
    zero_stage: int = 3,
    offload_optimizer: bool = False,
    offload_param: bool = False,
    micro_batch: int = 1,
    seq_len: int = SEQ_LEN,
    grad_ckpt: bool = False,
    dtype: str = "bf16",
    device: str = "cpu",
    procs_per_node: int | None = None,
    activations: str = DEFAULT_ACTIVATIONS,
    method: str = "full",
) -> MemoryPlan:
    """Per-rank bytes for params, grads, fp32 master, Adam moments, activations and runtime overhead.

    Returns a MemoryPlan: `components` in bytes per rank, `placement` ("host" or "device") of each, `total`
    and `host_total` in bytes (x/GiB for GiB). ZeRO-1 partitions the optimizer state (master + moments),
    ZeRO-2 also the gradients, ZeRO-3 also the parameters; each partition is 1/world_size. On a CPU
    everything is host memory; on a GPU the offload flags decide what moves to the host.
    """
    opts: PlanOptions = {
        "zero_stage": zero_stage,
        "offload_optimizer": offload_optimizer,
        "offload_param": offload_param,
        "micro_batch": micro_batch,
        "seq_len": seq_len,
        "grad_ckpt": grad_ckpt,
        "dtype": dtype,
        "activations": activations,
        "method": method,
    }
    check_count("world_size", world_size)
    procs_per_node = procs_per_node or world_size
    _check_options(world_size, procs_per_node, opts, device)
    return _plan(model, architecture(model), world_size, procs_per_node, opts, device)


def _plan(
    name: str, arch: Architecture, world_size: int, procs_per_node: int, opts: PlanOptions, device: str
) -> MemoryPlan:
    comp = _components(arch, world_size, opts, device)
    return MemoryPlan(
        name,
        arch.params,
        world_size,
        procs_per_node,
        MemoryKnobs(
            zero_stage=opts["zero_stage"],
            offload_optimizer=opts["offload_optimizer"],
            offload_param=opts["offload_param"],
            micro_batch=opts["micro_batch"],
            seq_len=opts["seq_len"],
            grad_ckpt=opts["grad_ckpt"],
            method=opts.get("method", "full"),
        ),
        opts["dtype"],
        device,
        comp,
        _placement(comp, opts, device),
        opts.get("activations", DEFAULT_ACTIVATIONS),
    )
