"""LoRA beside full fine-tuning, through PEFT: low-rank adapters on the frozen model, their count, and a save
that `PeftModel.from_pretrained` (or `AutoPeftModelForCausalLM`) loads back.

Only the adapters train, so gradients, fp32 masters and Adam's moments exist for them alone; the frozen
weights stay in the model's own dtype (bf16 under DeepSpeed), and backward skips their weight gradients.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.train.args import TrainArgs


def lora_config(args: TrainArgs):
    """PEFT's LoraConfig for these arguments: rank, alpha, targets, no dropout (a short run's noise)."""
    from peft import LoraConfig

    names = [t.strip() for t in args.lora_targets.split(",") if t.strip()]
    targets: str | list[str] = "all-linear" if names == ["all-linear"] else names
    return LoraConfig(
        r=args.lora_rank,
        lora_alpha=args.lora_alpha,
        target_modules=targets,
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )


def add_adapters(args: TrainArgs, model):
    """The model with LoRA adapters on its target modules, every other weight frozen. Under ZeRO-3 the
    frozen weights are already partitioned; DeepSpeed partitions the adapters when the engine starts."""
    from peft import get_peft_model

    try:
        return get_peft_model(model, lora_config(args))
    except ValueError as e:  # PEFT names the targets it could not find
        raise WorkshopError(
            f"--lora-targets {args.lora_targets!r}: {e}; allowed: all-linear or module names such as "
            "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"
        ) from None


def trainable_count(model) -> int:
    """Parameters that train, by their full size (also under ZeRO-3, where a rank holds a placeholder)."""
    return sum(
        (p.ds_numel if hasattr(p, "ds_numel") else p.numel()) for p in model.parameters() if p.requires_grad
    )


def base_state(state_dict: dict) -> dict:
    """The frozen model's own weights from a PEFT model's state dict: adapter keys dropped, PEFT's prefixes
    (`base_model.model.`, `.base_layer`) removed, so `from_pretrained` of the base architecture reads it."""
    out = {}
    for key, value in state_dict.items():
        if "lora_" in key:
            continue
        key = key.removeprefix("base_model.model.").replace(".base_layer", "")
        out[key] = value.detach().to("cpu").clone().contiguous()
    return out


def save_adapter(trainer, out: Path, tok, *, base: str | None, merge: bool) -> Path:
    """<out>/final: the adapter (adapter_config.json + adapter_model.safetensors) and the tokenizer; with
    `base` None (a preset, whose random weights exist nowhere else) the frozen model in final/base, which the
    adapter's config then names; with `merge`, the merged model in final/merged. Every rank takes part in
    the gather (ZeRO-3: 16-bit weights onto rank 0); rank 0 writes, under a temporary name."""
    import torch.distributed as dist

    final, tmp = out / "final", out / ".final.partial"
    state = trainer.accelerator.get_state_dict(trainer.model_wrapped)  # a collective under ZeRO-3
    if dist.get_rank() == 0:
        shutil.rmtree(tmp, ignore_errors=True)
        peft_model = trainer.accelerator.unwrap_model(trainer.model)
        peft_model.save_pretrained(str(tmp), state_dict=state)
        tok.save_pretrained(str(tmp))
        if base is None:
            _save_base(peft_model, state, tmp / "base", tok)
            _name_base(tmp, str((final / "base").resolve()))
        if merge:
            _save_merged(tmp, str(tmp / "base") if base is None else base, tok)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
    dist.barrier()
    return final


def _save_base(peft_model, state: dict, where: Path, tok) -> None:
    from safetensors.torch import save_file

    where.mkdir(parents=True)
    peft_model.get_base_model().config.save_pretrained(str(where))
    weights = base_state(state)
    if getattr(peft_model.get_base_model().config, "tie_word_embeddings", False):
        weights.pop("lm_head.weight", None)
    save_file(weights, str(where / "model.safetensors"), metadata={"format": "pt"})
    tok.save_pretrained(str(where))


def _name_base(adapter: Path, base: str) -> None:
    """Point the adapter's config at the base it was trained on (AutoPeftModel loads it from there)."""
    cfg = adapter / "adapter_config.json"
    data = json.loads(cfg.read_text())
    data["base_model_name_or_path"] = base
    cfg.write_text(json.dumps(data, indent=2))


def _save_merged(adapter: Path, base: str, tok) -> None:
    """The base with the adapters merged in (W + alpha/r * B A, PEFT's merge_and_unload): a plain model."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()  # rank 0 alone builds a whole model on the host: no zero.Init partitions
    model = AutoModelForCausalLM.from_pretrained(base, dtype="auto")
    merged = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    merged.save_pretrained(str(adapter / "merged"))
    tok.save_pretrained(str(adapter / "merged"))
