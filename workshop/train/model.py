"""The model: how its weights are kept, built or loaded (after TrainingArguments, so ZeRO-3 partitions it as
it is built), and the final save every rank takes part in.
"""

from __future__ import annotations

import os
from pathlib import Path

from workshop.plan.models import (
    PRESETS,
    build_config,
    check_hub_access,
    hub_token,
    resolve_source,
    slice_overrides,
)
from workshop.train.args import TrainArgs
from workshop.train.data import load_tokenizer, local_kit


def ddp_masters(args: TrainArgs) -> bool:
    """fp32 masters in the optimizer (workshop.train.master_weights) instead of autocast: DDP with bf16 and
    --master-weights. DeepSpeed's bf16 keeps its own fp32 masters."""
    return args.master_weights and args.precision == "bf16" and args.engine == "ddp"


def weights_kind(args: TrainArgs) -> str:
    """How the weights are kept, in words for the start line: what --precision and --master-weights became."""
    if args.precision != "bf16":
        return "fp32"
    if args.engine == "deepspeed" or args.master_weights:
        return "bf16+fp32-master"
    return "fp32+bf16-autocast"


def weights_dtype(args: TrainArgs):
    """The model's own dtype: bf16 where the fp32 masters live in the optimizer (DeepSpeed, --master-weights),
    else fp32 (autocast computes in bf16 from fp32 weights)."""
    import torch

    return torch.bfloat16 if weights_kind(args) == "bf16+fp32-master" else torch.float32


def load_model_and_tokenizer(args: TrainArgs, cache_dir: Path):
    """Preset: its architecture with RANDOM weights and the local tokenizer (offline lessons). Hub id or
    local directory: the model's own weights and tokenizer via from_pretrained (fine-tuning).

    Must run after TrainingArguments(deepspeed=...) exists: transformers then builds the model inside
    deepspeed.zero.Init, so under ZeRO-3 each rank only ever holds its 1/N partition.
    """
    import torch
    from transformers import AutoModelForCausalLM

    dtype = weights_dtype(args)
    source = resolve_source(args.model)
    if source.kind == "preset":
        vocab = args.vocab or PRESETS[args.model].config["vocab_size"]
        _, tok = local_kit(cache_dir, vocab_size=min(vocab, 8192))
        config = build_config(
            args.model,
            **slice_overrides(args.layers),
            vocab_size=max(vocab, len(tok)),
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_config(
            config, dtype=dtype, attn_implementation=args.attn_implementation
        )
    else:
        token = hub_token()  # from the Kubernetes Secret in the TrainJob; never logged
        if source.kind == "hub":
            check_hub_access(
                source.name, token
            )  # gated / missing / not cached: plain words, before any weights
        tok = load_tokenizer(source.name, token=token)
        model = AutoModelForCausalLM.from_pretrained(
            source.name, dtype=dtype, token=token, attn_implementation=args.attn_implementation
        )
        if args.lr >= 1e-4 and int(os.environ.get("RANK", "0")) == 0:
            print(
                f"workshop.train: warning: lr {args.lr:g} on pretrained weights; fine-tuning uses ~2e-5 "
                "(workshop.plan.models.FINETUNE), a from-scratch lr can wreck them in a few steps",
                flush=True,
            )
    if args.grad_ckpt:
        model.config.use_cache = False
    return model, tok


def save_final_model(trainer, out: Path) -> Path:
    """The trained model, loadable with from_pretrained: every rank takes part (ZeRO-3 gathers the 16-bit
    weights onto rank 0, `stage3_gather_16bit_weights_on_model_save`), rank 0 writes. Written under a
    temporary name and renamed, so a `final/` directory is always complete."""
    import torch.distributed as dist

    final, tmp = out / "final", out / ".final.partial"
    trainer.save_model(str(tmp))
    dist.barrier()
    if dist.get_rank() == 0:
        import shutil

        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    dist.barrier()
    return final


def parameter_count(model) -> int:
    """Every parameter's full size, also under ZeRO-3 (where a rank's tensor is a placeholder: ds_numel)."""
    return sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters())
