"""Model presets: the tiny/small Llamas this machine can train, and the real Llama-3 architectures.

Real architectures carry their published config numbers, so parameter counts (and the memory plans
built on them) are exact without downloading weights: the model is instantiated on the meta device.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache

from workshop.errors import check_choice


@dataclass(frozen=True)
class Preset:
    name: str
    about: str
    hub_id: str | None  # where the real weights live; None for local-only presets
    config: dict = field(default_factory=dict)


_LLAMA3_ROPE = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192, "rope_theta": 500000.0}

PRESETS: dict[str, Preset] = {p.name: p for p in [
    Preset("tiny", "~7M params; CI and laptops, trains in seconds per step", None, {
        "vocab_size": 8192, "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4,
        "num_attention_heads": 8, "num_key_value_heads": 4, "max_position_embeddings": 1024}),
    Preset("small", "~63M params; benchmarks on a 2-core box", None, {
        "vocab_size": 8192, "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 8,
        "num_attention_heads": 12, "num_key_value_heads": 4, "max_position_embeddings": 1024}),
    Preset("medium", "~350M params; big enough that loading-memory effects are unmistakable", None, {
        "vocab_size": 32000, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24,
        "num_attention_heads": 16, "num_key_value_heads": 8, "max_position_embeddings": 2048}),
    Preset("llama-3.2-1b", "Meta Llama 3.2 1B (published config)", "meta-llama/Llama-3.2-1B", {
        "vocab_size": 128256, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 131072,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "rope_parameters": _LLAMA3_ROPE,
        "bos_token_id": 128000, "eos_token_id": 128001}),
    Preset("llama-3-8b", "Meta Llama 3 8B (published config)", "meta-llama/Meta-Llama-3-8B", {
        "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0},
        "bos_token_id": 128000, "eos_token_id": 128001}),
]}


def get_preset(name: str) -> Preset:
    check_choice("model preset", name, PRESETS)
    return PRESETS[name]


def build_config(name: str, **overrides):
    """A transformers `LlamaConfig` for a preset; overrides (e.g. vocab_size from a tokenizer) win."""
    from transformers import LlamaConfig

    return LlamaConfig(**{**get_preset(name).config, **overrides})


@cache
def count_parameters(name: str) -> int:
    """Exact parameter count, from instantiating the architecture on the meta device (no memory used)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(build_config(name))
    return sum(p.numel() for p in model.parameters())


def architecture(name: str) -> dict:
    """The numbers the memory and communication models need, with the exact parameter count."""
    cfg = build_config(name)
    return {
        "name": name,
        "params": count_parameters(name),
        "layers": cfg.num_hidden_layers,
        "hidden": cfg.hidden_size,
        "intermediate": cfg.intermediate_size,
        "heads": cfg.num_attention_heads,
        "kv_heads": cfg.num_key_value_heads,
        "vocab": cfg.vocab_size,
        "tied_embeddings": bool(cfg.tie_word_embeddings),
    }
