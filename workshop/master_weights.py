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
"""

from __future__ import annotations

MASTER_KEY = "fp32_master_weights"


def with_master_weights(optimizer_cls: type) -> type:
    """A subclass of `optimizer_cls` that steps fp32 masters of the (bf16) parameters it is given."""
    import torch

    class MasterWeights(optimizer_cls):
        def __init__(self, params, *args, **kwargs):
            groups = list(params)
            if groups and not isinstance(groups[0], dict):
                groups = [{"params": groups}]
            self.model_params: list[torch.Tensor] = []
            self.master_params: list[torch.Tensor] = []
            master_groups = []
            for g in groups:
                ps = list(g["params"])
                ms = [p.detach().to(torch.float32, copy=True) for p in ps]
                self.model_params += ps
                self.master_params += ms
                master_groups.append({**g, "params": ms})
            super().__init__(master_groups, *args, **kwargs)

        @torch.no_grad()
        def step(self, closure=None):
            if closure is not None:
                raise ValueError("with_master_weights: closures are not supported (the Trainer passes none)")
            for m, p in zip(self.master_params, self.model_params):
                m.grad = None if p.grad is None else p.grad.to(torch.float32)
            loss = super().step()
            torch._foreach_copy_(self.model_params, self.master_params)  # round to bf16 once, in place
            for m in self.master_params:
                m.grad = None  # the fp32 gradients live only for the update
            return loss

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
                raise ValueError(f"checkpoint holds {len(masters)} master weights, this model has "
                                 f"{len(self.master_params)}")
            for m, saved, p in zip(self.master_params, masters, self.model_params):
                m.copy_(saved)
                p.copy_(m)

    MasterWeights.__name__ = MasterWeights.__qualname__ = f"{optimizer_cls.__name__}WithMasterWeights"
    return MasterWeights
