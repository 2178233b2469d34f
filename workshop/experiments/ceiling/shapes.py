"""The model's matmuls: every weight of a LlamaConfig as a GEMM shape, and its training FLOPs."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Linear:
    """One weight matrix of the model: y[tokens, out] = x[tokens, inp] @ W.T, `count` times per forward."""

    name: str
    inp: int
    out: int
    count: int

    def train_flops(self, tokens: int) -> float:
        """Forward (x W^T), input gradient (dy W) and weight gradient (dy^T x): three GEMMs of 2*T*in*out."""
        return 6.0 * tokens * self.inp * self.out * self.count


def linear_shapes(config) -> list[Linear]:
    """The matmul weights of a LlamaConfig: per layer q, k, v, o, gate, up, down; then the output head.

    The input embedding is a lookup (no GEMM) unless tied to the head, which is counted once as lm_head.
    """
    h, layers = config.hidden_size, config.num_hidden_layers
    heads, kv = config.num_attention_heads, config.num_key_value_heads or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or h // heads
    inter = config.intermediate_size
    return [
        Linear("q_proj", h, heads * head_dim, layers),
        Linear("k_proj", h, kv * head_dim, layers),
        Linear("v_proj", h, kv * head_dim, layers),
        Linear("o_proj", heads * head_dim, h, layers),
        Linear("gate_proj", h, inter, layers),
        Linear("up_proj", h, inter, layers),
        Linear("down_proj", inter, h, layers),
        Linear("lm_head", h, config.vocab_size, 1),
    ]


def distinct_shapes(shapes: list[Linear]) -> dict[tuple[int, int], list[str]]:
    """(in, out) -> the weights with that shape: each shape is timed once (q and o of a square model share
    one)."""
    out: dict[tuple[int, int], list[str]] = {}
    for s in shapes:
        out.setdefault((s.inp, s.out), []).append(s.name)
    return out
