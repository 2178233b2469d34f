"""The ways zero.Init goes wrong in the original workshop's code, each run in fresh processes so its failure
is shown, not suffered.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import TypedDict

from workshop.errors import check_choice
from workshop.experiments.loading.checkpoint import check_world_size, verify_checkpoint
from workshop.experiments.loading.experiment import _worker_env
from workshop.experiments.loading.worker import ds_config
from workshop.launch.procs import run_captured
from workshop.launch.torchrun import torchrun_command

PITFALLS = {
    "no-process-group": "deepspeed.zero.Init in a plain process: no torchrun environment, no process group",
    "init-wraps-from-pretrained": (
        "the original workshop's `with deepspeed.zero.Init(): from_pretrained(...)`"
    ),
    "init-wraps-from-pretrained-dynamo-first": "the same, with torch._dynamo imported before the context",
    "config-not-kept": "HfDeepSpeedConfig(...) created but not kept in a variable, then from_pretrained",
    "fix": "keep HfDeepSpeedConfig alive in a variable, then from_pretrained (the fix)",
}


class PitfallBody(TypedDict, total=False):
    """What a pitfall that got as far as building something reports (no-process-group: only `partitioned`)."""

    partitioned: bool  # every parameter is a ZeRO-3 one
    local_numel: int  # elements rank 0 holds
    full_numel: int


class PitfallOutcome(PitfallBody):
    """`show_pitfall()`'s record (chapter 03 prints ok, error, partitioned and the element counts)."""

    name: str
    what: str
    ok: bool  # False: it raised, and `error` says what
    error: str | None


def _pitfall_body(name: str, checkpoint: str) -> PitfallBody:
    """Run one pitfall in this process; report what happened instead of raising."""
    import deepspeed
    import torch

    cfg = ds_config("bf16")
    if name == "no-process-group":
        with deepspeed.zero.Init(config_dict_or_path=cfg):
            layer = torch.nn.Linear(8, 8)
        return {"partitioned": hasattr(layer.weight, "ds_id")}
    import torch.distributed as dist

    if not dist.is_initialized():  # a launch that shows several pitfalls starts its group once
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
    return {
        "partitioned": all(hasattr(p, "ds_id") for p in params),
        "local_numel": sum(p.ds_tensor.numel() if hasattr(p, "ds_tensor") else p.numel() for p in params),
        "full_numel": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in params),
    }


# Pitfalls that may follow one another in one process: they differ in one line of the loading code, not in
# what the process imported before it (the init-wraps pair is about import order: each needs a fresh one).
SHARE_A_LAUNCH = ("config-not-kept", "fix")


def _outcome(name: str, checkpoint: str) -> PitfallOutcome:
    check_choice("pitfall", name, PITFALLS)
    result: PitfallOutcome = {"name": name, "what": PITFALLS[name], "ok": True, "error": None}
    try:
        result.update(_pitfall_body(name, checkpoint))
    except Exception as exc:  # noqa: BLE001  the point is to show the error
        result.update(
            {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"}
        )
    return result


def run_pitfall_here(name: str, checkpoint: str, out_file: str) -> PitfallOutcome:
    result = _outcome(name, checkpoint)
    Path(out_file).write_text(json.dumps(result))
    return result


def run_pitfalls_here(names: list[str], checkpoint: str, out_file: str) -> list[PitfallOutcome]:
    """Several of SHARE_A_LAUNCH in this process, in order; their outcomes as one JSON list."""
    results = [_outcome(name, checkpoint) for name in names]
    Path(out_file).write_text(json.dumps(results))
    return results


def show_pitfalls(
    names: tuple[str, ...] | list[str], checkpoint: str | Path, *, nproc: int = 2, timeout: float = 600
) -> list[PitfallOutcome]:
    """Pitfalls of SHARE_A_LAUNCH in one torchrun launch, in the order given (the ranks' start-up, seconds
    of imports, paid once); returns rank 0's outcome of each, as show_pitfall does for one."""
    for name in names:
        check_choice("pitfall that can share a launch", name, SHARE_A_LAUNCH)
    verify_checkpoint(checkpoint)
    check_world_size(nproc)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        spec = {"names": list(names), "checkpoint": str(checkpoint), "out_file": str(out), "rank0_only": True}
        cmd = torchrun_command(
            ["pitfall", json.dumps(spec)], module="workshop.experiments.loading", nproc_per_node=nproc
        )
        proc = run_captured(cmd, env=_worker_env(nproc, None), timeout=timeout)
        if not out.exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
            died = f"process died (exit {proc.returncode}): {tail[-600:]}"
            return [{"name": n, "what": PITFALLS[n], "ok": False, "error": died} for n in names]
        outcomes: list[PitfallOutcome] = json.loads(out.read_text())  # run_pitfalls_here's, on rank 0
        return outcomes


def show_pitfall(
    name: str, checkpoint: str | Path, *, nproc: int = 2, timeout: float = 600
) -> PitfallOutcome:
    """Run a pitfall in fresh processes (torchrun, except "no-process-group"); returns rank 0's outcome:
    name, what it shows, ok, and the error it raised (None when it loaded)."""
    check_choice("pitfall", name, PITFALLS)
    verify_checkpoint(checkpoint)
    check_world_size(nproc)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        spec = {"name": name, "checkpoint": str(checkpoint), "out_file": str(out)}
        args = ["-m", "workshop.experiments.loading", "pitfall", json.dumps(spec)]
        env = _worker_env(nproc, None)
        if name == "no-process-group":
            for var in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
                env.pop(var, None)
            cmd = [sys.executable, *args]
        else:
            cmd = torchrun_command(
                ["pitfall", json.dumps({**spec, "rank0_only": True})],
                module="workshop.experiments.loading",
                nproc_per_node=nproc,
            )
        proc = run_captured(cmd, env=env, timeout=timeout)
        if not out.exists():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
            return {
                "name": name,
                "what": PITFALLS[name],
                "ok": False,
                "error": f"process died (exit {proc.returncode}): {tail[-600:]}",
            }
        outcome: PitfallOutcome = json.loads(out.read_text())  # run_pitfall_here's, in the rank-0 process
        return outcome
