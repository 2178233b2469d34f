"""Model presets: the tiny/small Llamas this machine can train, and the real Llama-3 architectures.

Real architectures carry their published config numbers, so parameter counts (and the memory plans
built on them) are exact without downloading weights: the model is instantiated on the meta device.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.lang import _


@dataclass(frozen=True)
class Preset:
    name: str
    about: str
    hub_id: str | None  # where the real weights live; None for local-only presets
    config: dict = field(default_factory=dict)


_LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 32.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_theta": 500000.0,
}

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            "tiny",
            "~7M params; CI and laptops, trains in seconds per step",
            None,
            {
                "vocab_size": 8192,
                "hidden_size": 256,
                "intermediate_size": 688,
                "num_hidden_layers": 4,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "max_position_embeddings": 1024,
            },
        ),
        Preset(
            "small",
            "~63M params; benchmarks on a 2-core box",
            None,
            {
                "vocab_size": 8192,
                "hidden_size": 768,
                "intermediate_size": 2048,
                "num_hidden_layers": 8,
                "num_attention_heads": 12,
                "num_key_value_heads": 4,
                "max_position_embeddings": 1024,
            },
        ),
        Preset(
            "medium",
            "~350M params; big enough that loading-memory effects are unmistakable",
            None,
            {
                "vocab_size": 32000,
                "hidden_size": 1024,
                "intermediate_size": 2816,
                "num_hidden_layers": 24,
                "num_attention_heads": 16,
                "num_key_value_heads": 8,
                "max_position_embeddings": 2048,
            },
        ),
        Preset(
            "llama-3.2-1b",
            "Meta Llama 3.2 1B (published config)",
            "meta-llama/Llama-3.2-1B",
            {
                "vocab_size": 128256,
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_hidden_layers": 16,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-5,
                "tie_word_embeddings": True,
                "rope_parameters": _LLAMA3_ROPE,
                "bos_token_id": 128000,
                "eos_token_id": 128001,
            },
        ),
        Preset(
            "llama-3-8b",
            "Meta Llama 3 8B (published config)",
            "meta-llama/Meta-Llama-3-8B",
            {
                "vocab_size": 128256,
                "hidden_size": 4096,
                "intermediate_size": 14336,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-5,
                "tie_word_embeddings": False,
                "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
                "bos_token_id": 128000,
                "eos_token_id": 128001,
            },
        ),
    ]
}


def get_preset(name: str) -> Preset:
    """A preset by name, or by its hub id (the architecture of meta-llama/Meta-Llama-3-8B is llama-3-8b)."""
    preset = preset_for(name)
    check_choice(
        "model preset", preset or name, [*PRESETS, *(p.hub_id for p in PRESETS.values() if p.hub_id)]
    )
    assert preset is not None  # check_choice refused a name that is neither a preset nor a preset's hub id
    return PRESETS[preset]


def build_config(name: str, **overrides):
    """A transformers `LlamaConfig` for a preset; overrides (e.g. vocab_size from a tokenizer) win."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**get_preset(name).config, **overrides})


@dataclass(frozen=True)
class Architecture:
    """The numbers the memory, traffic and FLOP models need, with the exact parameter count."""

    name: str
    params: int
    largest_layer_params: int  # the biggest module's own parameters: what ZeRO-3 gathers whole at once
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied_embeddings: bool

    def train_flops(self, seq_len: int, params: int | None = None) -> float:
        """Training FLOPs per token at `seq_len` tokens per sequence (flops_per_token's counting); `params`:
        a measured parameter count instead of this architecture's own."""
        return flops_per_token(
            params or self.params,
            layers=self.layers,
            hidden=self.hidden,
            seq_len=seq_len,
            vocab=self.vocab,
            tied=self.tied_embeddings,
        )


def slice_overrides(layers: int | None = None, vocab: int | None = None) -> dict[str, int | None]:
    """The LlamaConfig fields a slice of a preset changes (`--layers`, `--vocab`): its decoder layers, its
    embedding and head rows (special token ids beyond a cut vocab dropped); every other shape stays the
    preset's own."""
    out: dict[str, int | None] = {}
    if layers is not None:
        check_positive("layers", layers)
        out["num_hidden_layers"] = layers
    if vocab is not None:
        check_positive("vocab", vocab)
        out["vocab_size"] = vocab
        out.update({k: None for k in ("bos_token_id", "eos_token_id") if vocab <= 128001})
    return out


@cache
def architecture(name: str, layers: int | None = None, vocab: int | None = None) -> Architecture:
    """Exact counts from the model built on PyTorch's meta device (no memory, no download); a hub id counts as
    its architecture's preset; `layers`/`vocab`: a slice of it (slice_overrides)."""
    import torch  # lazy: torch and transformers take seconds to import, and the CLI's --help needs neither
    from transformers import AutoModelForCausalLM

    cfg = build_config(name, **slice_overrides(layers, vocab))
    with torch.device("meta"):
        net = AutoModelForCausalLM.from_config(cfg)
    seen, params, largest = set(), 0, 0
    for module in net.modules():
        own = 0
        for p in module.parameters(recurse=False):
            if id(p) not in seen:  # tied embeddings count once, as DeepSpeed counts them
                seen.add(id(p))
                own += p.numel()
        params += own
        largest = max(largest, own)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return Architecture(
        name,
        params,
        largest,
        cfg.num_hidden_layers,
        cfg.hidden_size,
        cfg.intermediate_size,
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
        head_dim,
        cfg.vocab_size,
        bool(cfg.tie_word_embeddings),
    )


# ------------------------------------------------------------------------------ where weights come from
HUB_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


@dataclass(frozen=True)
class ModelSource:
    """What `--model` means, decided once: a preset's architecture with RANDOM weights (offline lessons), a
    model's own weights and tokenizer from the hub, or a saved checkpoint directory (both: fine-tuning)."""

    kind: str  # preset | hub | local
    name: str  # as given
    preset: str | None  # the preset with this architecture, when one is known (sizes the memory plan)

    @property
    def pretrained(self) -> bool:
        return self.kind != "preset"

    def describe(self) -> str:
        if self.kind == "preset":
            hub = PRESETS[self.name].hub_id
            if hub:
                return _(
                    "preset {name}: its architecture with RANDOM weights (training from scratch); for the "
                    "real weights use --model {hub}"
                ).format(name=self.name, hub=hub)
            return _("preset {name}: its architecture with RANDOM weights (training from scratch)").format(
                name=self.name
            )
        if self.kind == "hub":
            return _(
                "{name}: real weights and the model's own tokenizer from the Hugging Face hub (fine-tuning)"
            ).format(name=self.name)
        return _(
            "{name}: real weights and the model's own tokenizer from a local directory (fine-tuning)"
        ).format(name=self.name)


def preset_for(model: str) -> str | None:
    """The preset whose architecture `model` has: a preset name itself, or a preset's hub id."""
    if model in PRESETS:
        return model
    return next(
        (p.name for p in PRESETS.values() if p.hub_id and p.hub_id.lower() == str(model).lower()), None
    )


def resolve_source(model: str) -> ModelSource:
    """Preset name, existing local directory, or hub id (org/name); anything else is an error naming all
    three. Returns a ModelSource: kind (preset | local | hub), the name as given (a local path expanded), and
    the preset with the same architecture when one is known."""
    model = str(model)
    if model in PRESETS:
        return ModelSource("preset", model, model)
    path = Path(model).expanduser()
    if path.is_dir():
        return ModelSource("local", str(path), None)
    if HUB_ID.match(model) and not model.startswith((".", "/", "~")):
        return ModelSource("hub", model, preset_for(model))
    hubs = ", ".join(p.hub_id for p in PRESETS.values() if p.hub_id)
    raise WorkshopError(
        _(
            "unknown model '{model}'; use a preset ({presets}), an existing checkpoint directory, or a hub "
            "id such as {hubs}"
        ).format(model=model, presets=", ".join(PRESETS), hubs=hubs)
    )


def hub_token() -> str | None:
    """The token the TrainJob gets from its Kubernetes Secret as $HF_TOKEN (never printed, never in argv)."""
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN") or None


def check_hub_access(hub_id: str, token: str | None = None, revision: str | None = None) -> str:
    """Fetch the model's config.json (from the cache when offline) BEFORE any weights or process group, so a
    gated, missing or uncached model fails with what to do, not a stack of OSErrors. Returns its local
    path."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        return hf_hub_download(hub_id, "config.json", revision=revision, token=token)
    except GatedRepoError as exc:
        said = (
            _(
                "{hub_id} is a gated model and this token may not download it (no token: set HF_TOKEN). "
                "Accept the licence at https://huggingface.co/{hub_id} with the account that owns the token, "
                "wait for the approval e-mail, then put that token in the Secret "
                "(`kubectl create secret generic hf-token ...`)"
            )
            if not token
            else _(
                "{hub_id} is a gated model and this token may not download it (token set, but access not "
                "granted). Accept the licence at https://huggingface.co/{hub_id} with the account that owns "
                "the token, wait for the approval e-mail, then put that token in the Secret "
                "(`kubectl create secret generic hf-token ...`)"
            )
        )
        raise WorkshopError(said.format(hub_id=hub_id)) from exc
    except RepositoryNotFoundError as exc:
        raise WorkshopError(
            f"no model {hub_id!r} on the hub (or it is private and the token cannot see it); "
            f"check the spelling, e.g. {preset_hub_ids()}"
        ) from exc
    except RevisionNotFoundError as exc:
        raise WorkshopError(f"{hub_id} has no revision {revision!r}") from exc
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:
        offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")
        raise WorkshopError(
            f"{hub_id} is not in the hub cache "
            f"({os.environ.get('HF_HUB_CACHE') or os.environ.get('HF_HOME') or '~/.cache/huggingface'})"
            + (
                " and HF_HUB_OFFLINE is set: download it once with network access (`hf download "
                f"{hub_id}`), or unset HF_HUB_OFFLINE"
                if offline
                else " and the hub could not be reached: check the network, "
                "or use a preset for an offline run"
            )
        ) from exc


def preset_hub_ids() -> str:
    return ", ".join(p.hub_id for p in PRESETS.values() if p.hub_id)


# ------------------------------------------------------------------------------------- training recipes
# Fine-tuning real weights: the original workshop's settings (its train.py): lr 2e-5, gradient accumulation 4,
# bf16, wikitext-2 (empty lines dropped) -- packed here instead of padded to 512, so every token trains.
SEQ_LEN = 512  # the original workshop's sequence length: the default of every plan and benchmark here
FINETUNE = {
    "lr": 2e-5,
    "grad_accum": 4,
    "precision": "bf16",
    "dataset": "wikitext",
    "packing": True,
    "seq_len": SEQ_LEN,
    "micro_batch": 1,
    "warmup_steps": 10,
}
# From scratch (random weights): the lessons' own numbers; a large lr is what makes a tiny model learn in 20
# steps.
SCRATCH = {
    "lr": 1e-3,
    "grad_accum": 1,
    "precision": "bf16",
    "dataset": "local",
    "packing": True,
    "seq_len": 128,
    "micro_batch": 4,
    "warmup_steps": 2,
}


def recipe(model: str) -> dict:
    """The TrainArgs settings that suit this model source: FINETUNE for real weights, SCRATCH for random ones.

    2e-5 on random weights learns almost nothing in a lesson's 20 steps; 1e-3 on pretrained weights wrecks
    them in a few. So the choice follows the weights, not the model's size."""
    return dict(FINETUNE if resolve_source(model).pretrained else SCRATCH)


def flops_per_token(
    params: int, *, layers: int, hidden: int, seq_len: int, vocab: int = 0, tied: bool = False
) -> float:
    """Training FLOPs per token: 6 per matmul weight (forward 2, backward 4) plus causal-free attention.

    Kaplan/PaLM counting: 6 * N + 12 * layers * hidden * seq_len, where N excludes the input embedding (a
    table lookup, no FLOPs) unless it is tied to the output head (then the head's matmul uses it).
    """
    for name, v in (("params", params), ("layers", layers), ("hidden", hidden), ("seq_len", seq_len)):
        check_positive(name, v)
    matmul_params = params - (0 if tied else vocab * hidden)
    return 6.0 * matmul_params + 12.0 * layers * hidden * seq_len
