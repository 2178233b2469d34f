"""bf16 weights with fp32 master copies: mixed precision without autocast.

Autocast keeps the weights in fp32 and casts every weight to bf16 on every forward, and every bf16 gradient
back to fp32 on the way back: hundreds of small copies per step, and DDP then all-reduces fp32 gradients.
The other classic recipe (Megatron, DeepSpeed's bf16 mode, Micikevicius et al. 2018) keeps the MODEL in bf16,
so forward, backward and the gradient all-reduce move half the bytes, and keeps an fp32 master copy of every
weight inside the optimizer: the update is computed in fp32 (a bf16 weight cannot take a step smaller than
1/256 of itself) and rounded to bf16 once per step.

`with_master_weights(torch.optim.AdamW)` gives an optimizer class that does this around any torch optimizer,
so the HF Trainer builds it like its own (`Trainer(optimizer_cls_and_kwargs=...)`): parameter groups, fused
kernels and the learning-rate schedule stay the Trainer's. The master copies travel in its state_dict, so a
resumed run continues from the fp32 weights, not from their bf16 rounding.

The step is memory-bound: on a CPU core it streams ~28 bytes per parameter (bf16 gradient and weight, fp32
master and two moments, read and written). Done as separate passes (clip the gradients, cast them to fp32,
AdamW, cast the masters back) it reads much of that four times. `compiled_step=True` (AdamW only) fuses
clipping, the cast, AdamW and the rounding into one pass per tensor with torch.compile.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

MASTER_KEY = "fp32_master_weights"


def _adamw_update(
    params,
    grads,
    masters,
    exp_avgs,
    exp_avg_sqs,
    scale,
    lr,
    step_size,
    bc2_sqrt,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
) -> None:
    """torch.optim.AdamW's update (decoupled weight decay, bias-corrected moments) on fp32 masters, reading
    the bf16 gradients times the clip `scale` and writing the rounded bf16 weights: one pass per tensor once
    Inductor fuses it. Every per-step number is a 0-d tensor, so a new learning rate does not recompile."""
    for p, g, m, a, s in zip(params, grads, masters, exp_avgs, exp_avg_sqs):
        g32 = g.to(torch.float32) * scale
        m.mul_(1 - lr * weight_decay)
        a.lerp_(g32, 1 - beta1)
        s.mul_(beta2).addcmul_(g32, g32, value=1 - beta2)
        m.sub_(step_size * a / (s.sqrt() / bc2_sqrt + eps))
        p.copy_(m)


_COMPILED: dict = {}


def _compiled_update():
    if "adamw" not in _COMPILED:
        _COMPILED["adamw"] = torch.compile(_adamw_update, dynamic=False)
    return _COMPILED["adamw"]


def clip_scale(grads, max_norm: float, divisor: float = 1.0):
    """(total L2 norm of `grads` / divisor in fp32, the factor that brings it to `max_norm` or 1): what
    torch.nn.utils.clip_grad_norm_ computes, without its extra pass that multiplies every gradient."""
    norms = torch._foreach_norm(grads, 2.0, dtype=torch.float32)
    total = torch.linalg.vector_norm(torch.stack(norms)) / divisor
    return total, torch.clamp(max_norm / (total + 1e-6), max=1.0)


def with_master_weights(
    optimizer_cls: type,
    *,
    compiled_step: bool = False,
    max_grad_norm: float | None = None,
    grad_divisor: float = 1.0,
) -> type:
    """A subclass of `optimizer_cls` that steps fp32 masters of the (bf16) parameters it is given.

    `max_grad_norm`: clip the gradients' total norm inside the step (the Trainer's own clipping is then off);
    the norm of the last step is `last_grad_norm`. `compiled_step`: one fused pass per tensor (AdamW only).
    `grad_divisor`: the gradients arrive as a sum over this many ranks (an all-reduce that did not average):
    the division joins the clip factor instead of costing a pass of its own.
    """
    name = f"{optimizer_cls.__name__}WithMasterWeights"
    return type(
        name,
        (MasterWeights, optimizer_cls),
        {
            "__qualname__": name,
            "_compiled_step_asked": compiled_step,
            "_max_grad_norm": max_grad_norm,
            "_grad_divisor": grad_divisor,
        },
    )


# The mixin calls the torch optimizer it is always combined with (super().step, self.state, ...); for the type
# checker it derives from that optimizer, at run time from object (`with_master_weights` adds the real one).
if TYPE_CHECKING:
    from torch.optim import Optimizer as _OptimizerBase
else:
    _OptimizerBase = object


class MasterWeights(_OptimizerBase):
    """The methods `with_master_weights` puts in front of a torch optimizer class; its settings are class
    attributes of the class it makes."""

    _compiled_step_asked: bool = False
    _max_grad_norm: float | None = None
    _grad_divisor: float = 1.0

    def __init__(self, params, *args, **kwargs):
        groups = list(params)
        if groups and not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        self.model_params: list[torch.Tensor] = []
        self.master_params: list[torch.Tensor] = []
        self.last_grad_norm: float | None = None
        master_groups = []
        for g in groups:
            ps = list(g["params"])
            ms = [p.detach().to(torch.float32, copy=True) for p in ps]
            self.model_params += ps
            self.master_params += ms
            master_groups.append({**g, "params": ms})
        super().__init__(master_groups, *args, **kwargs)
        self._model_of = {id(m): p for m, p in zip(self.master_params, self.model_params)}
        self.compiled_step = (
            self._compiled_step_asked
            and isinstance(self, torch.optim.AdamW)
            and not any(g.get("amsgrad") or g.get("maximize") for g in self.param_groups)
        )

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None:
            raise ValueError("with_master_weights: closures are not supported (the Trainer passes none)")
        device = self.master_params[0].device if self.master_params else None
        scale = torch.tensor(1.0 / self._grad_divisor, device=device)  # on the weights' device (CUDA too)
        if self._max_grad_norm:
            grads = [p.grad for p in self.model_params if p.grad is not None]
            total, clip = clip_scale(grads, self._max_grad_norm, self._grad_divisor)
            self.last_grad_norm = float(total)
            scale = clip / self._grad_divisor
        if self.compiled_step:
            self._fused_adamw(scale)
            return None
        for m, p in zip(self.master_params, self.model_params):
            m.grad = None if p.grad is None else p.grad.to(torch.float32)
        if float(scale) != 1.0:  # most steps need no clipping, and one rank no averaging: skip that pass
            torch._foreach_mul_([m.grad for m in self.master_params if m.grad is not None], scale)
        loss = super().step()
        torch._foreach_copy_(self.model_params, self.master_params)  # round to bf16 once, in place
        for m in self.master_params:
            m.grad = None  # the fp32 gradients live only for the update
        return loss

    def _fused_adamw(self, scale) -> None:
        """AdamW on the masters in torch.optim.AdamW's own state layout (step, exp_avg, exp_avg_sq), so a
        checkpoint loads into either path."""
        update = _compiled_update()
        for group in self.param_groups:
            rows = [
                (self._model_of[id(m)], m) for m in group["params"] if self._model_of[id(m)].grad is not None
            ]
            if not rows:
                continue
            for _, m in rows:
                st = self.state[m]
                if not st:  # torch.optim.AdamW keeps `step` on the CPU unless capturable
                    st.update(
                        step=torch.zeros((), dtype=torch.float32),
                        exp_avg=torch.zeros_like(m),
                        exp_avg_sq=torch.zeros_like(m),
                    )
                st["step"] += 1
            step = float(self.state[rows[0][1]]["step"])
            beta1, beta2 = group["betas"]
            lr = float(group["lr"])

            def scalar(x: float, device=rows[0][1].device):
                return torch.tensor(x, device=device)

            update(
                [p for p, _ in rows],
                [p.grad for p, _ in rows],
                [m for _, m in rows],
                [self.state[m]["exp_avg"] for _, m in rows],
                [self.state[m]["exp_avg_sq"] for _, m in rows],
                scale,
                scalar(lr),
                scalar(lr / (1 - beta1**step)),
                scalar((1 - beta2**step) ** 0.5),
                float(beta1),
                float(beta2),
                float(group["eps"]),
                float(group["weight_decay"]),
            )

    def zero_grad(self, set_to_none: bool = True) -> None:
        super().zero_grad(set_to_none)
        for p in self.model_params:
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    def state_dict(self) -> dict:
        return {**super().state_dict(), MASTER_KEY: [m.clone() for m in self.master_params]}

    @torch.no_grad()
    def load_state_dict(self, state_dict: dict) -> None:
        state_dict = dict(state_dict)
        masters = state_dict.pop(MASTER_KEY, None)
        super().load_state_dict(state_dict)
        if masters is None:  # a checkpoint written without master weights: start them from the model
            masters = [p.to(torch.float32) for p in self.model_params]
        if len(masters) != len(self.master_params):
            raise ValueError(
                f"checkpoint holds {len(masters)} master weights, this model has {len(self.master_params)}"
            )
        for m, saved, p in zip(self.master_params, masters, self.model_params):
            m.copy_(saved)
            p.copy_(m)
