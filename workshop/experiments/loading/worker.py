"""One rank of one loading method, run under torchrun: load, measure, check the weights, report JSON."""

from __future__ import annotations

import gc
import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypedDict

from workshop.errors import WorkshopError, check_choice
from workshop.experiments.loading.checkpoint import _BYTES_PER, _torch_dtype, verify_checkpoint
from workshop.experiments.loading.rss import PeakRSS, rss_bytes, ru_maxrss_bytes
from workshop.plan.topology import GB

METHODS = ("naive", "meta", "zero3", "zero3-stream")


def ds_config(dtype: str = "bf16") -> dict:
    """The smallest DeepSpeed config that turns on ZeRO-3 (batch sizes are needed by DeepSpeedConfig)."""
    return {
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 1,
        "bf16": {"enabled": dtype == "bf16"},
        "zero_optimization": {"stage": 3},
    }


@dataclass
class RankReport:
    method: str
    world_size: int
    rank: int
    dtype: str
    baseline_rss_gb: float  # after imports + process group, before loading
    peak_rss_gb: float  # sampled during the load (psutil rss, every 5 ms)
    peak_anon_gb: float  # ... of which anonymous memory (tensors the process owns)
    peak_file_gb: float  # ... of which file-backed pages (the mmap'd checkpoint)
    ru_maxrss_gb: float  # kernel's lifetime high-water mark
    end_rss_gb: float  # after the load, what the rank keeps
    used_rss_gb: float  # after every weight this rank holds was read once (mmap'd pages count now)
    load_s: float
    local_numel: int  # elements this rank holds (ds_tensor for zero3)
    full_numel: int  # elements of the whole model
    model_bytes: int  # full model in the load dtype
    weights_match: bool | None  # gathered weights equal the file (checked after the peak is taken)
    partitioned: bool
    notes: list[str] = field(default_factory=list)


class RankMeasures(TypedDict):
    """What one rank measured while one method loaded the checkpoint (GB of resident memory, seconds)."""

    method: str
    world_size: int
    rank: int
    baseline_rss_gb: float
    peak_rss_gb: float
    peak_anon_gb: float
    peak_file_gb: float
    ru_maxrss_gb: float
    end_rss_gb: float
    used_rss_gb: float
    load_s: float
    local_numel: int
    full_numel: int
    model_bytes: int
    weights_match: bool | None


class RankRecord(RankMeasures):
    """A RankReport as the rank's JSON (asdict): what `run_method` reads back, one per rank."""

    dtype: str
    partitioned: bool
    notes: list[str]


def _load(method: str, checkpoint: str, dtype: str, low_cpu_mem_usage: bool | None):
    """One of the four ways; returns the model and anything that must stay alive with it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    tdt = _torch_dtype(dtype)
    if method == "naive":
        from safetensors.torch import load_file

        config = AutoConfig.from_pretrained(checkpoint)
        model = AutoModelForCausalLM.from_config(config, dtype=tdt)  # 1x: real, randomly initialised
        state = {}
        for shard in verify_checkpoint(checkpoint).shards:  # 2x: the whole state dict in RAM
            state.update({k: v.clone() for k, v in load_file(Path(checkpoint) / shard).items()})
        # tied embeddings (llama-3.2-1b): the file keeps one copy, lm_head shares it once re-tied
        tied = set(getattr(model, "_tied_weights_keys", None) or ()) if config.tie_word_embeddings else set()
        missing, unexpected = model.load_state_dict(state, strict=False)
        if set(missing) - tied or unexpected:
            raise WorkshopError(
                f"checkpoint {checkpoint} does not fit its config: missing "
                f"{sorted(set(missing) - tied)[:3]}, unexpected {sorted(unexpected)[:3]}"
            )
        if tied:
            model.tie_weights()
        del state
        return model, None
    kwargs = {} if low_cpu_mem_usage is None else {"low_cpu_mem_usage": low_cpu_mem_usage}
    if method == "meta":
        return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=tdt, **kwargs), None
    from transformers.integrations import HfDeepSpeedConfig

    keep = HfDeepSpeedConfig(ds_config(dtype))  # must stay referenced until the model is built
    if method == "zero3":
        return AutoModelForCausalLM.from_pretrained(checkpoint, dtype=tdt, **kwargs), keep
    config = AutoConfig.from_pretrained(checkpoint)
    model = AutoModelForCausalLM.from_config(
        config, dtype=tdt
    )  # inside zero.Init: 1/N per rank from the start
    load_shards_zero3(model, checkpoint)
    return model, keep


def load_shards_zero3(model, checkpoint: str | Path) -> None:
    """Fill a ZeRO-3 model one shard at a time: rank 0 maps one file, each module is gathered, filled,
    re-split.

    transformers 5 merges every shard into one state dict on rank 0 before copying; streaming keeps rank 0's
    extra memory to one shard, the difference that matters when the checkpoint is larger than a rank's RAM.
    """
    import contextlib
    from collections import defaultdict

    import deepspeed
    import torch.distributed as dist
    from safetensors import safe_open

    root = Path(checkpoint)
    index = root / "model.safetensors.index.json"
    weight_map = (
        json.loads(index.read_text())["weight_map"]
        if index.exists()
        else {n: "model.safetensors" for n, _ in model.named_parameters()}
    )
    params = dict(model.named_parameters())
    if missing := sorted(set(params) - set(weight_map)):
        raise WorkshopError(
            f"checkpoint {root} lacks {len(missing)} of the model's tensors, e.g. {missing[:3]}"
        )
    by_shard: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, shard in weight_map.items():
        if name in params:
            by_shard[shard][name.rpartition(".")[0]].append(name)
    is_src = dist.get_rank() == 0
    for shard in sorted(by_shard):
        ctx = safe_open(root / shard, framework="pt") if is_src else contextlib.nullcontext()
        with ctx as f:
            for names in by_shard[shard].values():  # one module's parameters per collective
                group = [params[n] for n in names]
                with deepspeed.zero.GatheredParameters(group, modifier_rank=0):
                    if is_src:
                        assert f is not None  # rank 0 opened the shard (the others hold a nullcontext)
                        for n, p in zip(names, group):
                            p.data.copy_(f.get_tensor(n))


def touch_weights(params) -> int:
    """Read one element per page of every weight this rank holds; return the RSS afterwards.

    Zero-copy loading leaves weights as untouched file pages, which RSS does not count until first use.
    """
    import torch

    with torch.no_grad():
        for p in params:
            t = p.ds_tensor if hasattr(p, "ds_tensor") else p.data
            if t.numel():
                t.view(-1)[:: max(1, 4096 // t.element_size())].float().sum()
    return rss_bytes()


def _weights_match(model, checkpoint: str) -> bool:
    """Compare each parameter (gathered, for ZeRO-3) with the file; one tensor at a time to stay small."""
    import deepspeed
    import torch
    import torch.distributed as dist
    from safetensors import safe_open

    files = {}
    root = Path(checkpoint)
    index = root / "model.safetensors.index.json"
    weight_map = json.loads(index.read_text())["weight_map"] if index.exists() else None
    ok = True
    rank = dist.get_rank() if dist.is_initialized() else 0
    for name, p in model.named_parameters():
        shard = weight_map[name] if weight_map else "model.safetensors"
        with deepspeed.zero.GatheredParameters([p], enabled=hasattr(p, "ds_id")):
            if rank == 0:
                if shard not in files:
                    files[shard] = safe_open(root / shard, framework="pt")
                ok &= bool(torch.equal(files[shard].get_tensor(name).to(p.dtype), p.data))
    if dist.is_initialized():
        flag = torch.tensor([int(ok)])
        dist.broadcast(flag, 0)
        ok = bool(flag.item())
    return ok


def _parameters(model, method: str) -> tuple[int, bool, int, int, list[str]]:
    """Bytes of weights touched, whether ZeRO-3 partitioned them, this rank's and the full parameter count,
    and a note where a zero3 method did not partition."""
    params = list(model.parameters())
    touched = touch_weights(params)
    partitioned = all(hasattr(p, "ds_tensor") for p in params)
    local = sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in params)
    full = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in params)
    notes = []
    if method.startswith("zero3") and not partitioned:
        notes.append("model is NOT partitioned: was the DeepSpeed config alive during from_pretrained?")
    return touched, partitioned, local, full, notes


def _require_torchrun() -> None:
    """A rank started outside torchrun has no process group to join: say how to start it instead."""
    if "LOCAL_RANK" not in os.environ:
        raise WorkshopError(
            "the worker needs torchrun's environment (LOCAL_RANK, RANK, WORLD_SIZE, "
            "MASTER_ADDR); start it with `python -m workshop load run`"
        )


def run_worker(
    method: str,
    checkpoint: str,
    out_dir: str,
    *,
    dtype: str = "bf16",
    low_cpu_mem_usage: bool | None = None,
    verify: bool = True,
) -> RankReport:
    """One rank of one method: set up, measure the load, report. Meant to run under torchrun."""
    check_choice("method", method, METHODS)
    _require_torchrun()
    import deepspeed  # noqa: F401  imported by every method, so baselines are comparable
    import torch
    import torch.distributed as dist
    import transformers  # noqa: F401

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    gc.collect()
    baseline = rss_bytes()
    dist.barrier()
    with PeakRSS() as sampler:
        t0 = time.perf_counter()
        model, keep = _load(method, checkpoint, dtype, low_cpu_mem_usage)
        load_s = time.perf_counter() - t0
    gc.collect()
    end = rss_bytes()
    maxrss = ru_maxrss_bytes()
    touched, partitioned, local, full, notes = _parameters(model, method)
    report = RankReport(
        method,
        world,
        rank,
        dtype,
        baseline / GB,
        sampler.peak / GB,
        sampler.peak_anon / GB,
        sampler.peak_file / GB,
        maxrss / GB,
        end / GB,
        touched / GB,
        load_s,
        local,
        full,
        full * _BYTES_PER[dtype],
        _weights_match(model, checkpoint) if verify else None,
        partitioned,
        notes,
    )
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(asdict(report)))
    dist.barrier()
    del keep
    dist.destroy_process_group()
    return report
