"""Checkpoints shaped like hub ones (sharded safetensors + index + config + tokenizer), checked before any
rank starts, and the preflight that refuses, before minutes of work, what this machine cannot hold.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, read_json
from workshop.lang import _
from workshop.launch.progress import no_library_bars
from workshop.plan.models import build_config
from workshop.plan.topology import GB

DTYPES = ("bf16", "fp32")
_MARKER = "workshop_checkpoint.json"
_BYTES_PER = {"bf16": 2, "fp32": 4}


def _torch_dtype(dtype: str):
    import torch

    check_choice("dtype", dtype, DTYPES)
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def _write_tokenizer(out_dir: Path, vocab_size: int) -> None:
    """A small byte-level BPE tokenizer, saved the way hub checkpoints ship theirs (tokenizer.json +
    config)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = [f"Sharded loading keeps {n} parameters per rank instead of the whole model." for n in range(200)]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=min(vocab_size, 1024),
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(text, trainer)
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="</s>"
    ).save_pretrained(out_dir)


def write_checkpoint(
    out_dir: str | Path,
    model: str = "medium",
    *,
    dtype: str = "bf16",
    max_shard_size: str = "200MB",
    seed: int = 0,
    force: bool = False,
    overrides: dict | None = None,
) -> Path:
    """Write a checkpoint shaped like a hub one: sharded safetensors + index + config + tokenizer; returns its
    folder.

    Random weights (no hub here), but a fixed seed, so a re-run with the same arguments is skipped.
    `overrides` change the preset's config, e.g. {"num_hidden_layers": 1, "vocab_size": 8192}: a real
    architecture's widths, head layout, rope scaling and tied embeddings at a size a 2-core test can load.
    """
    import torch
    from transformers import AutoModelForCausalLM

    out = Path(out_dir)
    spec = {
        "model": model,
        "dtype": dtype,
        "max_shard_size": max_shard_size,
        "seed": seed,
        **({"overrides": overrides} if overrides else {}),
    }
    marker = out / _MARKER
    if not force and marker.exists() and json.loads(marker.read_text()).get("spec") == spec:
        try:
            verify_checkpoint(out)
            return out
        except WorkshopError:
            pass  # damaged: write it again
    config = build_config(model, **(overrides or {}))  # validates the preset name
    preflight_checkpoint(config, dtype, out)
    torch.manual_seed(seed)
    net = AutoModelForCausalLM.from_config(config, dtype=_torch_dtype(dtype))
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("model*.safetensors*"):
        old.unlink()

    with no_library_bars():
        net.save_pretrained(out, max_shard_size=max_shard_size)
    numel = sum(p.numel() for p in net.parameters())
    del net
    gc.collect()
    _write_tokenizer(out, config.vocab_size)
    marker.write_text(
        json.dumps({"spec": spec, "numel": numel, "bytes": numel * _BYTES_PER[dtype]}, indent=1)
    )
    return out


@dataclass
class CheckpointInfo:
    path: str
    shards: list[str]
    numel: int
    bytes: int
    dtype: str
    model_type: str


def _folder(path: str | Path) -> Path:
    """The checkpoint folder, or one error that says it is a file or missing."""
    root = Path(path)
    if not root.is_dir():
        said = (
            _(
                "checkpoint directory '{root}' is a file; write one with "
                "`python -m workshop load checkpoint --out DIR`"
            )
            if root.exists()
            else _(
                "checkpoint directory '{root}' does not exist; write one with "
                "`python -m workshop load checkpoint --out DIR`"
            )
        )
        raise WorkshopError(said.format(root=root))
    return root


def _shards(root: Path) -> tuple[dict | None, list[str]]:
    """The checkpoint's weight map (None for a single file) and shard file names, or one error that says what
    is missing."""
    index_file = root / "model.safetensors.index.json"
    if index_file.exists():
        weight_map = read_json(index_file, "safetensors index", "a JSON object with a weight_map").get(
            "weight_map"
        )
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise WorkshopError(
                _("{index} is not a valid safetensors index: no weight_map of tensor -> file").format(
                    index=index_file
                )
            )
        return weight_map, sorted(set(weight_map.values()))
    if (root / "model.safetensors").exists():
        return None, ["model.safetensors"]
    raise WorkshopError(_("no model.safetensors or model.safetensors.index.json in {root}").format(root=root))


def verify_checkpoint(path: str | Path) -> CheckpointInfo:
    """Check config, index and every shard's header before any rank starts, so a bad file fails plainly.
    Returns the CheckpointInfo: preset, dtype, parameter count, shard files and their bytes."""
    from safetensors import safe_open

    root = _folder(path)
    config = read_json(root / "config.json", "checkpoint config", "a transformers checkpoint's config.json")
    weight_map, shards = _shards(root)
    numel = nbytes = 0
    dtypes, seen = set(), set()
    for shard in shards:
        f = root / shard
        shard_bytes = 0
        if not f.exists():
            raise WorkshopError(
                _("checkpoint shard '{shard}' listed in the index is missing from {root}").format(
                    shard=shard, root=root
                )
            )
        try:
            with safe_open(f, framework="pt") as st:
                for key in st.keys():  # noqa: SIM118  (safe_open is not a dict)
                    sl = st.get_slice(key)
                    n = 1
                    for d in sl.get_shape():
                        n *= d
                    numel += n
                    shard_bytes += n * {"BF16": 2, "F16": 2, "F32": 4}.get(sl.get_dtype(), 4)
                    dtypes.add(sl.get_dtype())
                    seen.add(key)
        except Exception as exc:  # noqa: BLE001  safetensors raises its own error types for truncated/garbled headers
            raise WorkshopError(
                _("checkpoint shard '{shard}' is corrupt or truncated: {error}").format(
                    shard=shard, error=exc
                )
            ) from None
        nbytes += shard_bytes
        size = f.stat().st_size
        if size < shard_bytes:  # cheap extra guard; the header check above catches most truncations
            raise WorkshopError(
                _("checkpoint shard '{shard}' is truncated ({size} bytes)").format(shard=shard, size=size)
            )
    if weight_map is not None and set(weight_map) != seen:
        missing = sorted(set(weight_map) - seen)[:3]
        raise WorkshopError(
            _("the index lists tensors not found in the shards, e.g. {missing}").format(missing=missing)
        )
    model_type = config.get("model_type", "?")
    dtype = "bf16" if dtypes == {"BF16"} else "fp32" if dtypes == {"F32"} else ",".join(sorted(dtypes))
    return CheckpointInfo(str(root), shards, numel, nbytes, dtype, model_type)


def checkpoint_preset(checkpoint: str | Path) -> str | None:
    """The preset a checkpoint was written from (None for foreign checkpoints)."""
    marker = Path(checkpoint) / _MARKER
    return json.loads(marker.read_text())["spec"]["model"] if marker.exists() else None


def preflight_checkpoint(config, dtype: str, out: Path, world_sizes=(1,), method: str = "naive") -> int:
    """Before minutes of writing: the model must fit in memory to be built once, the files on disk, and the
    largest requested loading run in memory. Returns the model's bytes in `dtype`."""
    import psutil
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        numel = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    size = numel * _BYTES_PER[dtype]
    have = psutil.virtual_memory().available
    if size * 1.2 > have:
        raise WorkshopError(
            _(
                "writing this checkpoint builds the model in memory: about {need:.1f} GB needed, "
                "{have:.1f} GB available; choose a smaller model or --dtype"
            ).format(need=size * 1.2 / GB, have=have / GB)
        )
    probe = out if out.exists() else next(p for p in out.parents if p.exists())
    free = shutil.disk_usage(probe).free
    if size * 1.05 > free:
        raise WorkshopError(
            _(
                "the checkpoint needs about {need:.1f} GB on disk, {free:.1f} GB free under {where}; "
                "choose another --work-dir"
            ).format(need=size / GB, free=free / GB, where=probe)
        )
    for n in world_sizes:
        check_world_size(n, model_bytes=size, method=method)
    return size


def check_world_size(world_size: int, *, model_bytes: int | None = None, method: str = "naive") -> None:
    """Refuse a world size this machine cannot host: one core per rank, and the estimated peak (bytes) must
    fit in RAM. Returns None; raises WorkshopError naming the allowed range."""
    import psutil

    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise WorkshopError(_("world size must be an integer >= 1, got {n}").format(n=world_size))
    cores = os.cpu_count() or 1
    if world_size > cores:
        raise WorkshopError(
            _(
                "world size {n} is larger than this machine allows: {cores} CPU cores (one rank per core at "
                "most); allowed: 1..{cores}"
            ).format(n=world_size, cores=cores)
        )
    if model_bytes:
        per_rank = {"naive": 2.0}.get(method, 1.0) * model_bytes + 0.8 * GB
        need, have = world_size * per_rank, psutil.virtual_memory().available
        if need > have:
            raise WorkshopError(
                _(
                    "{method} loading with {n} ranks needs about {need:.1f} GB but only {have:.1f} GB is "
                    "available; use fewer ranks or a smaller model"
                ).format(method=method, n=world_size, need=need / GB, have=have / GB)
            )
