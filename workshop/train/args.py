"""The training run's arguments, declared once: each `TrainArgs` field is a flag of `python -m
workshop.train`.

The parser and `to_argv` are derived from the fields (type, default, `metadata["help"]`), so an argument is
one declaration here and torchrun, a TrainJob and a notebook pass the same flags. `validate` runs every check
that can fail before a process group or a model exists.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, check_output, check_positive, read_json, read_text
from workshop.plan.knobs import Knobs, arg
from workshop.plan.models import PRESETS, resolve_source
from workshop.train.outputs import parse_s3_uri
from workshop.train.shm import ALLREDUCES

PROG = "python -m workshop.train"
DESCRIPTION = "The ONE training entry point: `python -m workshop.train` (== `workshop train`)."
PRECISIONS = ("auto", "bf16", "fp32")
ENGINES = ("deepspeed", "ddp")
BACKENDS = ("auto", "gloo", "nccl")
METHODS = ("full", "lora")
ATTENTIONS = (
    "sdpa",
    "eager",
)  # transformers' attn_implementation: fused scaled_dot_product_attention, or plain matmuls
# How long a rank may wait in one collective before the process group gives up (gloo raises, NCCL's watchdog
# aborts). 10 minutes is DeepSpeed's own default (deepspeed.constants.default_pg_timeout) and plenty for the
# lessons, where every collective takes seconds. The EKS jobs render a larger value (workshop.k8s.trainjob
# JOB_SETTINGS): ranks there wait in a collective for another rank's hub download, for rank 0 writing the
# gathered 16-bit model, and for a ~100 GiB checkpoint to reach FSx.
DIST_TIMEOUT_MIN = 10
DIST_TIMEOUT_MAX_MIN = (
    7 * 24 * 60
)  # a week: beyond it a timeout only hides a hang (and overflows timedelta near 1e12)


def json_object(text: str) -> dict:
    """A `--extra-ds` value: the JSON object the text spells (WorkshopError naming the text otherwise)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise WorkshopError(f"malformed JSON {text!r}: {e.msg} at column {e.colno}") from None
    if not isinstance(value, dict):
        raise WorkshopError(f"expected a JSON object such as '{{\"overlap_comm\": true}}', got {text!r}")
    return value


@dataclass(frozen=True)
class TrainArgs(Knobs):
    """The training run's arguments, one field per flag of `python -m workshop.train` (`--seq-len` is
    `seq_len`); `to_argv()` is the command line, `validate()` every check. The job's knobs (dataset, method,
    seq_len, micro_batch, precision, engine, ZeRO, checkpointing, lr, ...) are inherited from
    `workshop.plan.knobs.Knobs`, declared there once for this grammar and for the planner's Job; the run's
    own settings are declared here. Units: dist_timeout_min in minutes (the knobs': see Knobs)."""

    model: str = arg("tiny", f"preset ({', '.join(PRESETS)}), local dir or hub id", always=True)
    text_column: str | None = arg(None, "the dataset's column to train on (default: text; --chat: messages)")
    chat: bool = arg(  # a messages column through the tokenizer's chat template (workshop.train.data)
        False, "the column holds chat messages: format each sample with the tokenizer's chat template"
    )
    lora_rank: int = arg(8, "LoRA: the adapters' rank r")
    lora_alpha: float = arg(16.0, "LoRA: the scale alpha (updates are scaled by alpha / r)")
    lora_targets: str = arg("all-linear", "LoRA: comma-separated module names, or all-linear")
    merge: bool = arg(
        False, "LoRA with --save-model: also save the merged model to <output-dir>/final/merged"
    )
    tensorboard: bool = arg(True, "rank 0 writes TensorBoard event files to <output-dir>/tensorboard")
    grad_accum: int = arg(1)
    max_steps: int = arg(20, "optimizer steps", always=True)
    master_weights: bool = arg(  # DDP + bf16: bf16 weights, fp32 masters in the optimizer, no autocast
        False,
        "bf16 only: keep the model in bf16 and fp32 master copies in the optimizer, no autocast "
        "(DDP then all-reduces bf16 gradients); DeepSpeed's bf16 mode always works this way",
    )
    allreduce: str = (
        arg(  # DDP's gradient all-reduce: shm on one host, else the backend's (workshop.train.shm)
            "auto",
            "DDP's gradient all-reduce: auto (DeepSpeed's shared-memory kernel when every rank is on "
            "this host, else the backend's) | shm | backend",
        )
    )
    ddp_bucket_mb: int | None = arg(None, "DDP's gradient bucket size (default 25)")  # torch's default: 25 MB
    backend: str = arg("auto", "auto (gloo on CPU, nccl on GPU) | gloo | nccl")
    threads: int | None = arg(None, "torch/OpenMP threads per rank")
    layers: int | None = arg(None, "a preset's decoder layers instead of its own count (a slice of it)")
    vocab: int | None = arg(None, "a preset's embedding and head rows instead of its own (a slice of it)")
    packing: bool = arg(True, "pack tokens into full blocks (else: one line per sample, padded)")
    min_chars: int = arg(1, "drop lines shorter than this")
    output_dir: str = arg("out/train", always=True)
    cache_dir: str = arg("~/.cache/workshop", "corpus + tokenizer cache")
    resume: bool = arg(False, "continue from the last checkpoint in --output-dir")
    seed: int = arg(0)
    optimizer: str = arg("adamw_torch", "transformers optim name, e.g. adamw_torch, adamw_torch_fused")
    compile: bool = arg(False, "torch.compile the model (Inductor)")
    attn_implementation: str = arg("sdpa", " | ".join(ATTENTIONS))
    pin_cores: bool = arg(  # pin each rank to its own `threads` cores (launch.rank_cores)
        False, "pin each rank to its own --threads cores (os.sched_setaffinity, before torch starts)"
    )
    extra_ds: dict = field(default_factory=dict, metadata={"help": "JSON merged into zero_optimization"})
    max_grad_jump: float = arg(
        1e3,
        "stop when a step's grad norm exceeds this many times the median so far "
        "(0: off); a non-finite loss or a loss of exactly 0 always stops the run",
    )
    save_model: bool = arg(  # gather the final weights (16-bit from ZeRO-3) into <output-dir>/final
        False, "save the final model (ZeRO-3: 16-bit weights gathered on rank 0) to <output-dir>/final"
    )
    save_total_limit: int | None = arg(None, "keep only the newest N checkpoints")
    sync_to: str | None = arg(  # s3://bucket/prefix: upload every checkpoint and the final model there
        None, "s3://bucket/prefix: upload checkpoints and the final model (credentials: IRSA / AWS chain)"
    )
    timers: bool = arg(
        False, "DeepSpeed's wall-clock breakdown per step (forward, backward, step) in the log"
    )
    dist_timeout_min: float = arg(  # the process group's collective timeout, minutes (see DIST_TIMEOUT_MIN)
        DIST_TIMEOUT_MIN,
        "minutes a rank may wait in one collective before the process group fails the run "
        "(gloo and NCCL; replaces DeepSpeed's DEEPSPEED_TIMEOUT). 10 = DeepSpeed's default, "
        "ample for the lessons; the EKS jobs use 60: ranks wait there for another rank's hub "
        "download, the 16-bit gather at save and a first checkpoint to FSx",
    )

    def to_argv(self) -> list[str]:
        """The command-line form of these arguments (what torchrun or a TrainJob passes to the entry point):
        every field that differs from its default, and the ones declared `always`."""
        argv: list[str] = []
        for f in command_line_fields():
            value, default, flag = getattr(self, f.name), field_default(f), flag_of(f.name)
            if value == default and not f.metadata.get("always"):
                continue
            if isinstance(value, bool):
                argv += [flag] if value else (["--no-" + flag[2:]] if default else [])
            elif isinstance(value, dict):
                argv += [flag, json.dumps(value)]
            elif value is not None:
                argv += [flag, str(value)]
        return argv

    def validate(self) -> None:
        """Every check that can fail runs here, before a process group or a model exists."""
        self._check_numbers()
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("engine", self.engine, ENGINES)
        check_choice("backend", self.backend, BACKENDS)
        check_choice("allreduce", self.allreduce, ALLREDUCES)
        check_choice("zero stage", self.zero_stage, (0, 1, 2, 3))
        check_choice("attn-implementation", self.attn_implementation, ATTENTIONS)
        check_choice("method", self.method, METHODS)
        self._check_finetune()
        if self.master_weights and self.precision == "fp32":
            raise WorkshopError(
                "--master-weights keeps the weights in bf16 (fp32 copies in the optimizer); it needs "
                "--precision bf16 or auto, got fp32"
            )
        if self.offload_param and self.zero_stage != 3:
            raise WorkshopError(f"--offload-param needs --zero-stage 3, got {self.zero_stage}")
        if self.engine == "ddp" and (self.offload_param or self.offload_optimizer):
            raise WorkshopError("offload flags need --engine deepspeed (DDP keeps everything on each rank)")
        if (
            resolve_source(self.model).kind == "local"
        ):  # preset, local directory or hub id; else names all three
            read_json(
                Path(self.model).expanduser() / "config.json", "--model", "a checkpoint folder's config.json"
            )
        context = PRESETS[self.model].config.get("max_position_embeddings") if self.model in PRESETS else None
        if context and self.seq_len > context:
            raise WorkshopError(
                f"seq-len {self.seq_len} is longer than {self.model}'s context of {context} "
                f"tokens; allowed: 1..{context}"
            )
        if not isinstance(self.extra_ds, dict):
            raise WorkshopError(
                f"extra-ds must be a JSON object such as '{{\"overlap_comm\": true}}', got {self.extra_ds!r}"
            )
        self._check_places()
        required = ["torch", "transformers", "datasets", "accelerate"] + (
            ["deepspeed"] if self.engine == "deepspeed" else []
        )
        missing = [m for m in required if importlib.util.find_spec(m) is None]
        if missing:
            raise WorkshopError(
                f"missing packages: {', '.join(missing)}; install the workbook with `pip install -e .`"
            )
        check_choice("--optimizer", self.optimizer, optimizer_names())

    def _check_numbers(self) -> None:
        for name in ("seq_len", "micro_batch", "grad_accum", "max_steps", "warmup_steps"):
            check_positive(name.replace("_", "-"), getattr(self, name), allow_zero=name == "warmup_steps")
        check_positive("lr", self.lr)
        check_positive("max-grad-jump", self.max_grad_jump, allow_zero=True)
        check_positive("dist-timeout-min", self.dist_timeout_min)
        if not self.dist_timeout_min <= DIST_TIMEOUT_MAX_MIN:  # inf too
            raise WorkshopError(
                f"dist-timeout-min {self.dist_timeout_min!r} is longer than a week; allowed: "
                f"minutes > 0 and <= {DIST_TIMEOUT_MAX_MIN}"
            )
        for name in ("min_chars", "save_steps", "seed"):
            check_positive(name.replace("_", "-"), getattr(self, name), allow_zero=True)
        if self.threads is not None:
            check_positive("threads", self.threads)
        if self.ddp_bucket_mb is not None:
            check_positive("ddp-bucket-mb", self.ddp_bucket_mb)
        for name in ("layers", "vocab"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
                if self.model not in PRESETS:
                    raise WorkshopError(
                        f"--{name} slices a preset's architecture; {self.model!r} is not a preset "
                        f"(allowed: {', '.join(PRESETS)})"
                    )

    def _check_finetune(self) -> None:
        """The held-out split, the dataset's column and LoRA's settings."""
        if not 0 <= self.eval_fraction < 1:
            raise WorkshopError(
                f"eval-fraction {self.eval_fraction!r} is not a fraction; allowed: 0 <= F < 1"
            )
        if self.eval_fraction and self.eval_split:
            raise WorkshopError("pass --eval-fraction or --eval-split, not both: each names the held-out set")
        check_positive("eval-steps", self.eval_steps, allow_zero=True)
        if self.eval_steps and not (self.eval_fraction or self.eval_split):
            raise WorkshopError(
                f"--eval-steps {self.eval_steps} needs a held-out split: --eval-fraction F or "
                "--eval-split NAME"
            )
        if self.eval_split and (self.dataset == "local" or is_file_dataset(self.dataset)):
            raise WorkshopError(
                f"--eval-split {self.eval_split!r}: dataset {self.dataset!r} has no named splits; "
                "use --eval-fraction F"
            )
        if self.text_column is not None and not self.text_column.strip():
            raise WorkshopError("--text-column is empty; name the dataset's column, e.g. text or messages")
        check_positive("lora-rank", self.lora_rank)
        check_positive("lora-alpha", self.lora_alpha)
        if not [t for t in self.lora_targets.split(",") if t.strip()]:
            raise WorkshopError(
                "--lora-targets is empty; allowed: all-linear or module names such as q_proj,v_proj"
            )
        if self.merge and not (self.method == "lora" and self.save_model):
            raise WorkshopError(
                "--merge merges LoRA adapters into the saved model: it needs --method lora --save-model"
            )
        if self.method == "lora" and self.master_weights:
            raise WorkshopError(
                "--master-weights keeps fp32 masters of every weight; with --method lora only the adapters "
                "train (fp32): drop --master-weights"
            )

    def _check_places(self) -> None:
        """Folders, the resume point, the S3 target and the dataset: what lies outside the arguments."""
        check_output(self.output_dir, "--output-dir", folder=True)
        check_output(self.cache_dir, "--cache-dir", folder=True)
        if self.resume:
            _check_resumable(Path(self.output_dir))
        if self.save_total_limit is not None:
            check_positive("save-total-limit", self.save_total_limit)
        if self.sync_to is not None:
            parse_s3_uri(self.sync_to)
        if self.dataset not in ("local", "wikitext") and not is_hub_dataset(self.dataset):
            # its head: a folder, an empty or a binary file fail here
            read_text(
                self.dataset,
                "--dataset",
                "'local', 'wikitext', a hub dataset id (org/name) or a UTF-8 text or .jsonl file",
                limit=1 << 16,
            )


HUB_DATASET = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def is_file_dataset(dataset: str) -> bool:
    """A --dataset that names a local file (text, one sample a line, or JSON lines)."""
    return dataset not in ("local", "wikitext") and Path(dataset).expanduser().exists()


def is_hub_dataset(dataset: str) -> bool:
    """A --dataset that reads as a hub id (org/name) and is no local path: `datasets.load_dataset` fetches it
    (or reads the hub cache, offline)."""
    return bool(HUB_DATASET.match(dataset)) and not Path(dataset).expanduser().exists()


def optimizer_names() -> list[str]:
    """The `optim` names transformers' TrainingArguments accepts: an unknown one is refused here, before any
    rank starts, instead of inside every rank once the process group is up."""
    from transformers.training_args import OptimizerNames

    return [o.value for o in OptimizerNames]


def _check_resumable(out: Path) -> None:
    """--resume continues from the newest checkpoint-N in --output-dir: refuse one that cannot be resumed
    (a run killed while saving leaves a folder without trainer_state.json) before any rank starts."""
    found = (
        sorted(
            (p for p in out.glob("checkpoint-*") if re.fullmatch(r"checkpoint-\d+", p.name)),
            key=lambda p: int(p.name.split("-")[1]),
        )
        if out.is_dir()
        else []
    )
    if found and not (found[-1] / "trainer_state.json").is_file():
        raise WorkshopError(
            f"cannot resume from {found[-1]}: it has no trainer_state.json (a save that was cut "
            f"short?); delete that folder to resume from {found[-2].name if len(found) > 1 else 'scratch'}"
        )


# ---------------------------------------------------------------- the command line, derived from the fields


# The command line's order (--help and every rendered argv): the fields as they were declared before the job's
# knobs moved to Knobs (a base's fields come first in `fields()`), so a TrainJob's args stay as rendered. It
# names each field once; the import-time check below refuses a field added without its place here.
COMMAND_LINE = (
    "model", "dataset", "text_column", "chat", "eval_fraction", "eval_split", "eval_steps", "method",
    "lora_rank", "lora_alpha", "lora_targets", "merge", "tensorboard", "seq_len", "micro_batch", "grad_accum",
    "max_steps", "precision", "master_weights", "engine", "allreduce", "ddp_bucket_mb", "zero_stage",
    "offload_optimizer", "offload_param", "backend", "threads", "layers", "vocab", "grad_ckpt", "packing",
    "min_chars", "output_dir", "cache_dir", "resume", "save_steps", "seed", "lr", "warmup_steps", "optimizer",
    "compile", "attn_implementation", "pin_cores", "extra_ds", "max_grad_jump", "save_model",
    "save_total_limit", "sync_to", "timers", "dist_timeout_min",
)  # fmt: skip
if sorted(COMMAND_LINE) != sorted(f.name for f in fields(TrainArgs)):
    raise TypeError(
        "TrainArgs: COMMAND_LINE must name every field once; differs by "
        f"{sorted(set(COMMAND_LINE) ^ {f.name for f in fields(TrainArgs)})}"
    )


def command_line_fields() -> list[dataclasses.Field]:
    """TrainArgs' fields in the command line's order (the parser's and `to_argv`'s)."""
    by_name = {f.name: f for f in fields(TrainArgs)}
    return [by_name[name] for name in COMMAND_LINE]


def flag_of(name: str) -> str:
    """A field's flag: `seq_len` -> `--seq-len`."""
    return "--" + name.replace("_", "-")


def field_default(f: dataclasses.Field):
    """A field's default value (a fresh one for fields with a default factory)."""
    if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def field_kind(hint) -> type:
    """The field's type without `| None`: int for `int | None` (the command line knows five kinds)."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    kinds = [k for k in typing.get_args(hint) if k is not type(None)] if union else [hint]
    if len(kinds) != 1 or kinds[0] not in (str, int, float, bool, dict):
        raise TypeError(
            f"TrainArgs: no command-line form for the type {hint!r}; use str, int, float, bool or dict"
        )
    return kinds[0]


def _value(flag: str, kind: type, text: str):
    if kind is dict:
        try:
            return json_object(text)
        except WorkshopError as e:
            raise WorkshopError(f"argument {flag}: {e}") from None
    try:
        return kind(text)
    except ValueError:
        raise WorkshopError(f"argument {flag}: invalid {kind.__name__} value: {text!r}") from None


def from_argv(argv: Sequence[str]) -> TrainArgs:
    """The TrainArgs a list of flags names, the inverse of `to_argv`: `--flag value`, `--flag=value`,
    `--switch`, `--no-switch` (a switch on by default). For programs (launchers, experiments); people type
    the command, whose parser (workshop.cli.train, with --help) is built from the same fields. Not
    validated."""
    hints, named = typing.get_type_hints(TrainArgs), {flag_of(f.name): f for f in command_line_fields()}
    values: dict = {}
    rest = list(argv)
    while rest:
        token = rest.pop(0)
        flag, eq, text = token.partition("=")
        f = named.get(flag)
        off = named.get("--" + flag[len("--no-") :]) if flag.startswith("--no-") else None
        if off is not None and field_kind(hints[off.name]) is bool and field_default(off) and not eq:
            values[off.name] = False
            continue
        if f is None:
            raise WorkshopError(f"unknown training argument {token!r}; allowed: {', '.join(named)}")
        kind = field_kind(hints[f.name])
        if kind is bool:
            if eq:
                raise WorkshopError(f"argument {flag}: ignored explicit argument {text!r}")
            values[f.name] = True
            continue
        if not eq:
            if not rest:
                raise WorkshopError(f"argument {flag}: expected one argument")
            text = rest.pop(0)
        values[f.name] = _value(flag, kind, text)
    return TrainArgs(**values)


def parse_args(argv: Sequence[str]) -> TrainArgs:
    """The validated TrainArgs of a list of flags (`from_argv`, then `validate`); WorkshopError on bad
    input."""
    args = from_argv(argv)
    args.validate()
    return args
