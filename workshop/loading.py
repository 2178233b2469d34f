"""Sharded loading, measured: naive vs meta device vs ZeRO-3 partitioned construction.

Each loading method runs in fresh processes under torchrun (so every rank's memory is its own and a real
process group exists), samples its resident memory while it loads, and reports one JSON per rank. The
driver runs methods x world sizes and gathers a table the notebook and the benchmark print.

Methods:
  naive         build the model with real (random) weights, then read the whole state dict and copy it in:
                the pre-meta-device behaviour whose peak is about twice the model.
  meta          `from_pretrained`: transformers 5 always builds on the meta device and fills it from the
                file (its `low_cpu_mem_usage` flag is accepted and ignored). Every rank holds the full model.
  zero3         keep `HfDeepSpeedConfig` alive, then `from_pretrained`: built inside `deepspeed.zero.Init`,
                each rank keeps 1/N of every parameter; rank 0 maps every shard while it fills the model.
  zero3-stream  the same construction (`from_config` while the config is alive), then filled one shard at a
                time, so rank 0 maps one shard, not the whole checkpoint.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workshop.errors import WorkshopError, check_choice, report
from workshop.shm import release_shm_buffers

METHODS = ("naive", "meta", "zero3", "zero3-stream")
DTYPES = ("bf16", "fp32")
GB = 1e9
_MARKER = "workshop_checkpoint.json"
_BYTES_PER = {"bf16": 2, "fp32": 4}


# --------------------------------------------------------------------------------------------- checkpoint
def _torch_dtype(dtype: str):
    import torch

    check_choice("dtype", dtype, DTYPES)
    return {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def _write_tokenizer(out_dir: Path, vocab_size: int) -> None:
    """A small byte-level BPE tokenizer, saved the way hub checkpoints ship theirs (tokenizer.json + config)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    text = [f"Sharded loading keeps {n} parameters per rank instead of the whole model." for n in range(200)]
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=min(vocab_size, 1024), special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(text, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            pad_token="</s>").save_pretrained(out_dir)


def write_checkpoint(out_dir: str | Path, model: str = "medium", *, dtype: str = "bf16",
                     max_shard_size: str = "200MB", seed: int = 0, force: bool = False,
                     overrides: dict | None = None) -> Path:
    """Write a checkpoint shaped like a hub one: sharded safetensors + index + config + tokenizer.

    Random weights (no hub here), but a fixed seed, so a re-run with the same arguments is skipped.
    `overrides` change the preset's config, e.g. {"num_hidden_layers": 1, "vocab_size": 8192}: a real
    architecture's widths, head layout, rope scaling and tied embeddings at a size a 2-core test can load.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from workshop.models import build_config

    out = Path(out_dir)
    spec = {"model": model, "dtype": dtype, "max_shard_size": max_shard_size, "seed": seed,
            **({"overrides": overrides} if overrides else {})}
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
    net.save_pretrained(out, max_shard_size=max_shard_size)
    numel = sum(p.numel() for p in net.parameters())
    del net
    gc.collect()
    _write_tokenizer(out, config.vocab_size)
    marker.write_text(json.dumps({"spec": spec, "numel": numel,
                                  "bytes": numel * _BYTES_PER[dtype]}, indent=1))
    return out


@dataclass
class CheckpointInfo:
    path: str
    shards: list[str]
    numel: int
    bytes: int
    dtype: str
    model_type: str


def verify_checkpoint(path: str | Path) -> CheckpointInfo:
    """Check config, index and every shard's header before any rank starts, so a bad file fails plainly."""
    from safetensors import safe_open

    root = Path(path)
    if not root.is_dir():
        raise WorkshopError(f"checkpoint directory {str(root)!r} does not exist; write one with "
                            "`workshop load checkpoint --out DIR`")
    cfg_file = root / "config.json"
    if not cfg_file.exists():
        raise WorkshopError(f"{cfg_file} is missing: not a transformers checkpoint")
    index_file = root / "model.safetensors.index.json"
    if index_file.exists():
        try:
            weight_map = json.loads(index_file.read_text())["weight_map"]
        except (ValueError, KeyError) as exc:
            raise WorkshopError(f"{index_file} is not a valid safetensors index: {exc}") from None
        shards = sorted(set(weight_map.values()))
    elif (root / "model.safetensors").exists():
        weight_map, shards = None, ["model.safetensors"]
    else:
        raise WorkshopError(f"no model.safetensors or model.safetensors.index.json in {root}")
    numel = nbytes = 0
    dtypes, seen = set(), set()
    for shard in shards:
        f = root / shard
        shard_bytes = 0
        if not f.exists():
            raise WorkshopError(f"checkpoint shard {shard!r} listed in the index is missing from {root}")
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
            raise WorkshopError(f"checkpoint shard {shard!r} is corrupt or truncated: {exc}") from None
        nbytes += shard_bytes
        size = f.stat().st_size
        if size < shard_bytes:  # cheap extra guard; the header check above catches most truncations
            raise WorkshopError(f"checkpoint shard {shard!r} is truncated ({size} bytes)")
    if weight_map is not None and set(weight_map) != seen:
        missing = sorted(set(weight_map) - seen)[:3]
        raise WorkshopError(f"index lists tensors not found in the shards, e.g. {missing}")
    model_type = json.loads(cfg_file.read_text()).get("model_type", "?")
    dtype = "bf16" if dtypes == {"BF16"} else "fp32" if dtypes == {"F32"} else ",".join(sorted(dtypes))
    return CheckpointInfo(str(root), shards, numel, nbytes, dtype, model_type)


# --------------------------------------------------------------------------------------------- measuring
class PeakRSS:
    """Samples this process's resident set every few milliseconds in a thread: the peak, as it happens.

    ru_maxrss says the same for the whole process lifetime; the sampler measures just the load, and it
    splits resident memory into anonymous (heap: tensors we own) and file-backed (mmap'd checkpoint pages
    the kernel may drop again), which is where safetensors' zero-copy loading shows up.
    """

    def __init__(self, interval_s: float = 0.005):
        self.interval_s = interval_s
        self.peak = self.peak_anon = self.peak_file = 0
        self._sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        rss, file_ = rss_split()
        self.peak = max(self.peak, rss)
        self.peak_anon = max(self.peak_anon, rss - file_)
        self.peak_file = max(self.peak_file, file_)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._sample()
            time.sleep(self.interval_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()


def rss_split() -> tuple[int, int]:
    """(resident, resident shared/file-backed) in bytes: psutil's rss and shared (Linux /proc/self/statm)."""
    import psutil

    mem = psutil.Process().memory_info()
    return mem.rss, getattr(mem, "shared", 0)  # no `shared` off Linux: no split, the total still holds


def rss_bytes() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def ru_maxrss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


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
    baseline_rss_gb: float      # after imports + process group, before loading
    peak_rss_gb: float          # sampled during the load (psutil rss, every 5 ms)
    peak_anon_gb: float         # ... of which anonymous memory (tensors the process owns)
    peak_file_gb: float         # ... of which file-backed pages (the mmap'd checkpoint)
    ru_maxrss_gb: float         # kernel's lifetime high-water mark
    end_rss_gb: float           # after the load, what the rank keeps
    used_rss_gb: float          # after every weight this rank holds was read once (mmap'd pages count now)
    load_s: float
    local_numel: int            # elements this rank holds (ds_tensor for zero3)
    full_numel: int             # elements of the whole model
    model_bytes: int            # full model in the load dtype
    weights_match: bool | None  # gathered weights equal the file (checked after the peak is taken)
    partitioned: bool
    notes: list[str] = field(default_factory=list)


def _load(method: str, checkpoint: str, dtype: str, low_cpu_mem_usage: bool | None):
    """One of the four ways; returns the model and anything that must stay alive with it."""
    from transformers import AutoConfig, AutoModelForCausalLM

    tdt = _torch_dtype(dtype)
    if method == "naive":
        from safetensors.torch import load_file

        config = AutoConfig.from_pretrained(checkpoint)
        model = AutoModelForCausalLM.from_config(config, dtype=tdt)  # 1x: real, randomly initialised
        state = {}
        for shard in verify_checkpoint(checkpoint).shards:           # 2x: the whole state dict in RAM
            state.update({k: v.clone() for k, v in load_file(Path(checkpoint) / shard).items()})
        # tied embeddings (llama-3.2-1b): the file keeps one copy, lm_head shares it once re-tied
        tied = set(getattr(model, "_tied_weights_keys", None) or ()) if config.tie_word_embeddings else set()
        missing, unexpected = model.load_state_dict(state, strict=False)
        if set(missing) - tied or unexpected:
            raise WorkshopError(f"checkpoint {checkpoint} does not fit its config: missing "
                                f"{sorted(set(missing) - tied)[:3]}, unexpected {sorted(unexpected)[:3]}")
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
    model = AutoModelForCausalLM.from_config(config, dtype=tdt)  # inside zero.Init: 1/N per rank from the start
    load_shards_zero3(model, checkpoint)
    return model, keep


def load_shards_zero3(model, checkpoint: str | Path) -> None:
    """Fill a ZeRO-3 model one shard at a time: rank 0 maps one file, each module is gathered, filled, re-split.

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
    weight_map = (json.loads(index.read_text())["weight_map"] if index.exists()
                  else {n: "model.safetensors" for n, _ in model.named_parameters()})
    params = dict(model.named_parameters())
    if missing := sorted(set(params) - set(weight_map)):
        raise WorkshopError(f"checkpoint {root} lacks {len(missing)} of the model's tensors, e.g. {missing[:3]}")
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


def run_worker(method: str, checkpoint: str, out_dir: str, *, dtype: str = "bf16",
               low_cpu_mem_usage: bool | None = None, verify: bool = True) -> RankReport:
    """One rank of one method: set up, measure the load, report. Meant to run under torchrun."""
    check_choice("method", method, METHODS)
    if "LOCAL_RANK" not in os.environ:
        raise WorkshopError("the worker needs torchrun's environment (LOCAL_RANK, RANK, WORLD_SIZE, "
                            "MASTER_ADDR); start it with `workshop load run`")
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
    params = list(model.parameters())
    touched = touch_weights(params)
    partitioned = all(hasattr(p, "ds_tensor") for p in params)
    local = sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in params)
    full = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in params)
    notes = []
    if method.startswith("zero3") and not partitioned:
        notes.append("model is NOT partitioned: was the DeepSpeed config alive during from_pretrained?")
    match = _weights_match(model, checkpoint) if verify else None
    report = RankReport(method, world, rank, dtype, baseline / GB, sampler.peak / GB, sampler.peak_anon / GB,
                        sampler.peak_file / GB, maxrss / GB, end / GB, touched / GB,
                        load_s, local, full, full * _BYTES_PER[dtype], match, partitioned, notes)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    (Path(out_dir) / f"rank{rank}.json").write_text(json.dumps(asdict(report)))
    dist.barrier()
    del keep
    dist.destroy_process_group()
    return report


# --------------------------------------------------------------------------------------------- driver
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
        raise WorkshopError(f"writing this checkpoint builds the model in memory: about {size * 1.2 / GB:.1f} GB "
                            f"needed, {have / GB:.1f} GB available; choose a smaller model or --dtype")
    probe = out if out.exists() else next(p for p in out.parents if p.exists())
    free = shutil.disk_usage(probe).free
    if size * 1.05 > free:
        raise WorkshopError(f"the checkpoint needs about {size / GB:.1f} GB on disk, {free / GB:.1f} GB free "
                            f"under {probe}; choose another --work-dir")
    for n in world_sizes:
        check_world_size(n, model_bytes=size, method=method)
    return size


def check_world_size(world_size: int, *, model_bytes: int | None = None, method: str = "naive") -> None:
    """Refuse a world size this machine cannot host: one core per rank, and the estimated peak must fit."""
    import psutil

    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise WorkshopError(f"world size must be an integer >= 1, got {world_size!r}")
    cores = os.cpu_count() or 1
    if world_size > cores:
        raise WorkshopError(f"world size {world_size} is larger than this machine allows: {cores} CPU cores "
                            f"(one rank per core at most); allowed: 1..{cores}")
    if model_bytes:
        per_rank = {"naive": 2.0}.get(method, 1.0) * model_bytes + 0.8 * GB
        need, have = world_size * per_rank, psutil.virtual_memory().available
        if need > have:
            raise WorkshopError(f"{method} loading with {world_size} ranks needs about {need / GB:.1f} GB but "
                                f"only {have / GB:.1f} GB is available; use fewer ranks or a smaller model")


def _worker_env(nproc: int, threads: int | None) -> dict:
    """The ranks' environment (workshop.launch.rank_env) plus one setting of this experiment's own."""
    from workshop.launch import rank_env

    # glibc otherwise keeps large freed buffers (ZeRO-3's gathered modules) in its heap, where RSS still
    # counts them; a fixed threshold returns them to the OS. Same for every method, so the comparison is fair.
    extra = {"MALLOC_MMAP_THRESHOLD_": os.environ.get("MALLOC_MMAP_THRESHOLD_", "65536")}
    return rank_env(threads or max(1, (os.cpu_count() or 1) // nproc), extra, nproc_per_node=nproc, cpu_only=True)


def run_method(checkpoint: str | Path, method: str, nproc: int, *, dtype: str | None = None,
               out_dir: str | Path, low_cpu_mem_usage: bool | None = None, verify: bool = True,
               threads: int | None = None, timeout: float = 1800) -> list[dict]:
    """Launch one method on `nproc` ranks with torchrun; returns each rank's report (dicts, rank order)."""
    check_choice("method", method, METHODS)
    info = verify_checkpoint(checkpoint)
    dtype = dtype or info.dtype
    check_choice("dtype", dtype, DTYPES)
    check_world_size(nproc, model_bytes=info.numel * _BYTES_PER[dtype], method=method)
    out = Path(out_dir) / f"{method}-n{nproc}"
    for old in out.glob("rank*.json"):
        old.unlink()
    from workshop.launch import torchrun_command

    cmd = torchrun_command(["worker", "--method", method, "--checkpoint", str(checkpoint), "--out-dir", str(out),
                            "--dtype", dtype], module="workshop.loading", nproc_per_node=nproc)
    if low_cpu_mem_usage is not None:
        cmd += ["--low-cpu-mem-usage", str(low_cpu_mem_usage).lower()]
    if not verify:
        cmd.append("--no-verify")
    proc = subprocess.run(cmd, check=False, env=_worker_env(nproc, threads), capture_output=True, text=True,
                          timeout=timeout)
    (out / "log.txt").parent.mkdir(parents=True, exist_ok=True)
    (out / "log.txt").write_text(proc.stdout + proc.stderr)
    reports = [json.loads((out / f"rank{r}.json").read_text()) for r in range(nproc)
               if (out / f"rank{r}.json").exists()]
    if proc.returncode != 0 or len(reports) != nproc:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{method} on {nproc} rank(s) failed (exit {proc.returncode}); log tail:\n{tail}")
    return reports




def checkpoint_preset(checkpoint: str | Path) -> str | None:
    """The preset a checkpoint was written from (None for foreign checkpoints)."""
    marker = Path(checkpoint) / _MARKER
    return json.loads(marker.read_text())["spec"]["model"] if marker.exists() else None


def run_experiment(checkpoint: str | Path, *, methods=METHODS, world_sizes=(1, 2), out_dir: str | Path,
                   verify: bool = True, progress: bool = True) -> list[dict]:
    """Every method on every world size, one torchrun each; returns one row per rank."""
    for m in methods:
        check_choice("method", m, METHODS)
    for n in world_sizes:
        check_world_size(n)
    rows = []
    for method in methods:
        for n in world_sizes:
            t0 = time.perf_counter()
            got = run_method(checkpoint, method, n, out_dir=out_dir, verify=verify)
            if progress:
                peaks = ", ".join(f"{r['peak_rss_gb']:.2f}" for r in got)
                print(f"{method:>12} N={n}: peak RSS per rank [{peaks}] GB  ({time.perf_counter() - t0:.0f} s)",
                      flush=True)
            rows.extend(got)
    return rows


def planner_prediction(model: str, world_size: int, method: str, *, dtype: str = "bf16",
                       shard_bytes: int = 0) -> dict:
    """Chapter 01's planner, applied to loading: what each rank keeps, and the peak on rank 0 and the others.

    The planner's `params` component is the weights a rank keeps (1/N under ZeRO-3); its `runtime` is the
    per-rank process overhead it assumes. Loading adds a transient: naive holds a second full copy (read
    through one mapped shard at a time); the transformers ZeRO-3 path maps every shard on rank 0; streaming
    maps one shard, and every rank gathers one module at a time (the planner's largest layer).
    """
    from workshop.memory import architecture, plan_memory

    check_choice("method", method, METHODS)
    plan = plan_memory(model, world_size=world_size, zero_stage=3 if method.startswith("zero3") else 0,
                       dtype=dtype)
    c = plan.components
    full = plan_memory(model, world_size=1, zero_stage=0, dtype=dtype).components["params"]
    layer = architecture(model).largest_layer_params * _BYTES_PER[dtype]
    extra0, extra = {"naive": (full + shard_bytes, full + shard_bytes), "meta": (0, 0),
                     "zero3": (full + layer, layer), "zero3-stream": (shard_bytes + layer, layer)}[method]
    return {"runtime_gb": c["runtime"] / GB, "keep_gb": c["params"] / GB,
            "peak_rank0_gb": (c["runtime"] + c["params"] + extra0) / GB,
            "peak_other_gb": (c["runtime"] + c["params"] + extra) / GB}


def summarize(rows: list[dict], *, model: str | None = None, shard_bytes: int = 0) -> list[dict]:
    """One line per (method, ranks, rank) with the planner's numbers beside the measured ones.

    The planner assumes a training process's overhead (its `runtime`); `plan_load_gb` swaps in the measured
    baseline of this rank, so the comparison is about the model bytes, not the interpreter.
    """
    out = []
    for r in rows:
        line = {k: r[k] for k in ("method", "world_size", "rank", "peak_rss_gb", "peak_anon_gb", "peak_file_gb",
                                  "ru_maxrss_gb", "end_rss_gb", "used_rss_gb", "load_s", "local_numel",
                                  "full_numel", "model_bytes", "weights_match", "baseline_rss_gb")}
        line["share"] = r["local_numel"] / r["full_numel"]
        if model is not None:
            pred = planner_prediction(model, r["world_size"], r["method"], dtype=r["dtype"],
                                      shard_bytes=shard_bytes)
            peak = pred["peak_rank0_gb"] if r["rank"] == 0 else pred["peak_other_gb"]
            line["plan_peak_gb"] = peak
            line["plan_load_gb"] = peak - pred["runtime_gb"] + r["baseline_rss_gb"]
            line["plan_keep_gb"] = pred["keep_gb"]
        out.append(line)
    return out


def ratios(summary: list[dict], *, world_size: int = 2, against: str = "naive") -> dict[str, list[float]]:
    """Peak RSS of each method over `against`'s, rank by rank, at one world size (the issue's 0.6 test)."""
    base = {r["rank"]: r["peak_rss_gb"] for r in summary if r["method"] == against and r["world_size"] == world_size}
    out: dict[str, list[float]] = {}
    for r in sorted(summary, key=lambda r: r["rank"]):
        if r["world_size"] == world_size and r["rank"] in base:
            out.setdefault(r["method"], []).append(r["peak_rss_gb"] / base[r["rank"]])
    return out


def format_table(summary: list[dict]) -> str:
    """A plain-text table (the notebook prints it; no pandas needed)."""
    has_plan = any("plan_peak_gb" in r for r in summary)
    head = (f"{'method':>12} {'N':>2} {'rank':>4} {'peak GB':>8} {'anon':>6} {'file':>6} {'maxrss':>7} "
            f"{'kept':>6} {'used':>6} {'load s':>7} {'share':>6} {'match':>5}")
    if has_plan:
        head += f" {'plan GB':>8} {'plan*':>6}"
    lines = [head, "-" * len(head)]
    for r in summary:
        line = (f"{r['method']:>12} {r['world_size']:>2} {r['rank']:>4} {r['peak_rss_gb']:>8.2f} "
                f"{r['peak_anon_gb']:>6.2f} {r['peak_file_gb']:>6.2f} {r['ru_maxrss_gb']:>7.2f} "
                f"{r['end_rss_gb']:>6.2f} {r['used_rss_gb']:>6.2f} {r['load_s']:>7.1f} {r['share']:>6.2f} "
                f"{r['weights_match']!s:>5}")
        if has_plan:
            line += f" {r.get('plan_peak_gb', float('nan')):>8.2f} {r.get('plan_load_gb', float('nan')):>6.2f}"
        lines.append(line)
    return "\n".join(lines)


def bench(json_out: str | Path, *, model: str = "medium", world_sizes=(1, 2), methods=METHODS,
          work_dir: str | Path | None = None, dtype: str = "bf16", max_shard_size: str = "200MB") -> dict:
    """Write the checkpoint (cached), run every method x world size, save JSON with the planner beside it."""
    import platform

    import deepspeed
    import torch
    import transformers

    work = Path(work_dir) if work_dir else Path.home() / ".cache" / "workshop" / "loading"
    from workshop.models import build_config

    work.mkdir(parents=True, exist_ok=True)  # judged before the checkpoint is written: minutes for a big model
    preflight_checkpoint(build_config(model), dtype, work, world_sizes, "naive" if "naive" in methods else methods[0])
    ckpt = write_checkpoint(work / f"ckpt-{model}-{dtype}", model, dtype=dtype, max_shard_size=max_shard_size)
    info = verify_checkpoint(ckpt)
    shard = max((ckpt / s).stat().st_size for s in info.shards)
    rows = run_experiment(ckpt, methods=methods, world_sizes=world_sizes, out_dir=work / "runs")
    summary = summarize(rows, model=model, shard_bytes=shard)
    result = {
        "model": model, "params": info.numel, "model_bytes": info.bytes, "dtype": dtype,
        "shards": len(info.shards), "largest_shard_bytes": shard,
        "env": {"torch": torch.__version__, "transformers": transformers.__version__,
                "deepspeed": deepspeed.__version__, "python": platform.python_version(),
                "cpus": os.cpu_count(), "malloc_mmap_threshold": _worker_env(1, None).get("MALLOC_MMAP_THRESHOLD_")},
        "rows": summary,
        "ratio_vs_naive": {str(n): ratios(summary, world_size=n) for n in world_sizes},
    }
    from workshop.guard import versions

    result["versions"] = versions()
    Path(json_out).parent.mkdir(parents=True, exist_ok=True)
    Path(json_out).write_text(json.dumps(result, indent=1))
    return result


# --------------------------------------------------------------------------------------------- pitfalls
PITFALLS = {
    "no-process-group": "deepspeed.zero.Init in a plain process: no torchrun environment, no process group",
    "init-wraps-from-pretrained": "the seed's `with deepspeed.zero.Init(): from_pretrained(...)`",
    "init-wraps-from-pretrained-dynamo-first": "the same, with torch._dynamo imported before the context",
    "config-not-kept": "HfDeepSpeedConfig(...) created but not kept in a variable, then from_pretrained",
    "fix": "keep HfDeepSpeedConfig alive in a variable, then from_pretrained (the fix)",
}


def _pitfall_body(name: str, checkpoint: str) -> dict:
    """Run one pitfall in this process; report what happened instead of raising."""
    import deepspeed
    import torch

    cfg = ds_config("bf16")
    if name == "no-process-group":
        with deepspeed.zero.Init(config_dict_or_path=cfg):
            layer = torch.nn.Linear(8, 8)
        return {"partitioned": hasattr(layer.weight, "ds_id")}
    import torch.distributed as dist

    dist.init_process_group("gloo")
    if name == "init-wraps-from-pretrained-dynamo-first":
        import torch._dynamo
    from transformers import AutoModelForCausalLM
    from transformers.integrations import HfDeepSpeedConfig

    if name.startswith("init-wraps-from-pretrained"):
        with deepspeed.zero.Init(config_dict_or_path=cfg):
            model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16)
    elif name == "config-not-kept":
        HfDeepSpeedConfig(cfg)  # only a weak reference survives: ZeRO-3 is off again by the next line
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16)
    else:
        keep = HfDeepSpeedConfig(cfg)  # noqa: F841  kept alive on purpose
        model = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.bfloat16)
    params = list(model.parameters())
    return {"partitioned": all(hasattr(p, "ds_id") for p in params),
            "local_numel": sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in params),
            "full_numel": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in params)}


def run_pitfall_here(name: str, checkpoint: str, out_file: str) -> dict:
    check_choice("pitfall", name, PITFALLS)
    result = {"name": name, "what": PITFALLS[name], "ok": True, "error": None}
    try:
        result.update(_pitfall_body(name, checkpoint))
    except Exception as exc:  # noqa: BLE001  the point is to show the error
        result.update(ok=False, error=f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}")
    Path(out_file).write_text(json.dumps(result))
    return result


def show_pitfall(name: str, checkpoint: str | Path, *, nproc: int = 2, timeout: float = 600) -> dict:
    """Run a pitfall in fresh processes (torchrun, except "no-process-group") and return rank 0's outcome."""
    import tempfile

    check_choice("pitfall", name, PITFALLS)
    verify_checkpoint(checkpoint)
    check_world_size(nproc)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        args = ["-m", "workshop.loading", "pitfall", "--name", name, "--checkpoint", str(checkpoint),
                "--out-file", str(out)]
        env = _worker_env(nproc, None)
        if name == "no-process-group":
            for var in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
                env.pop(var, None)
            cmd = [sys.executable, *args]
        else:
            from workshop.launch import torchrun_command

            cmd = torchrun_command(args[2:] + ["--rank0-only"], module="workshop.loading", nproc_per_node=nproc)
        proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=timeout)
        if not out.exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
            return {"name": name, "what": PITFALLS[name], "ok": False,
                    "error": f"process died (exit {proc.returncode}): {tail[-600:]}"}
        return json.loads(out.read_text())


def _int_list(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise WorkshopError(f"ranks must be comma-separated integers, got {text!r}") from None


def _bool(text: str) -> bool:
    return text.lower() in ("1", "true", "yes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="workshop load", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("checkpoint", help="write a sharded safetensors checkpoint of a preset (random weights)")
    c.add_argument("--model", default="tiny", help="preset name (tiny, small, medium, ...)")
    c.add_argument("--out", required=True, help="directory to write")
    c.add_argument("--dtype", default="bf16", choices=DTYPES)
    c.add_argument("--max-shard-size", default="200MB")
    r = sub.add_parser("run", help="load a checkpoint every way on 1..N ranks and print the table")
    r.add_argument("--checkpoint", required=True)
    r.add_argument("--methods", default=",".join(METHODS))
    r.add_argument("--ranks", default="1,2", help="world sizes, comma separated")
    r.add_argument("--out-dir", default="out/loading")
    r.add_argument("--json-out", help="also write the rows here")
    b = sub.add_parser("bench", help="the benchmark: write the checkpoint, run everything, write JSON")
    b.add_argument("--json-out", required=True)
    b.add_argument("--model", default="medium")
    b.add_argument("--ranks", default="1,2")
    b.add_argument("--methods", default=",".join(METHODS))
    b.add_argument("--work-dir", help="checkpoint + run logs (default ~/.cache/workshop/loading)")
    b.add_argument("--dtype", default="bf16", choices=DTYPES)
    b.add_argument("--max-shard-size", default="200MB")
    v = sub.add_parser("verify", help="check a checkpoint's config, index and shards")
    v.add_argument("--checkpoint", required=True)
    w = sub.add_parser("worker", help="(internal) one rank of one method; run under torchrun")
    w.add_argument("--method", required=True)
    w.add_argument("--checkpoint", required=True)
    w.add_argument("--out-dir", required=True)
    w.add_argument("--dtype", default="bf16")
    w.add_argument("--low-cpu-mem-usage", type=_bool, default=None)
    w.add_argument("--no-verify", action="store_true")
    pf = sub.add_parser("pitfall", help="(internal) one pitfall in this process; prints what happened")
    pf.add_argument("--name", required=True)
    pf.add_argument("--checkpoint", required=True)
    pf.add_argument("--out-file", required=True)
    pf.add_argument("--rank0-only", action="store_true", help="only rank 0 writes the result")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "checkpoint":
            path = write_checkpoint(args.out, args.model, dtype=args.dtype, max_shard_size=args.max_shard_size)
            print(json.dumps(asdict(verify_checkpoint(path))))
        elif args.cmd == "verify":
            print(json.dumps(asdict(verify_checkpoint(args.checkpoint))))
        elif args.cmd in ("run", "bench"):
            methods = [m.strip() for m in args.methods.split(",") if m.strip()]
            ranks = _int_list(args.ranks)
            if args.cmd == "bench":
                res = bench(args.json_out, model=args.model, world_sizes=ranks, methods=methods,
                            work_dir=args.work_dir, dtype=args.dtype, max_shard_size=args.max_shard_size)
                print(format_table(res["rows"]))
                print(json.dumps(res["ratio_vs_naive"]))
            else:
                rows = run_experiment(args.checkpoint, methods=methods, world_sizes=ranks, out_dir=args.out_dir)
                summary = summarize(rows, model=checkpoint_preset(args.checkpoint))
                print(format_table(summary))
                if args.json_out:
                    Path(args.json_out).write_text(json.dumps(summary, indent=1))
        elif args.cmd == "worker":
            try:
                run_worker(args.method, args.checkpoint, args.out_dir, dtype=args.dtype,
                           low_cpu_mem_usage=args.low_cpu_mem_usage, verify=not args.no_verify)
            finally:  # os._exit below skips atexit: release DeepSpeed's /dev/shm buffers here, however it went
                release_shm_buffers()
            # The report is on disk and the process group is gone. Skip interpreter teardown: a DeepSpeed/gloo
            # C++ thread left joinable after zero.Init can abort the exit ("terminate called without an active
            # exception", SIGABRT, seen once in CI), which would fail a measurement that already succeeded.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
        elif args.cmd == "pitfall":
            if not args.rank0_only or os.environ.get("RANK", "0") == "0":
                out_file = args.out_file
            else:
                out_file = os.devnull
            try:  # the pitfalls fail on purpose; their DeepSpeed buffers must not outlive them
                print(json.dumps(run_pitfall_here(args.name, args.checkpoint, out_file)))
            finally:
                release_shm_buffers()
    except WorkshopError as exc:
        return report(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
