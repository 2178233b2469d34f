"""`workshop bench ipex`: IPEX against stock PyTorch, in IPEX's own environment (`ipex_child.py`)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict
from pathlib import Path

from workshop.experiments.bench.config import BenchConfig
from workshop.experiments.measure import (
    paired_ratios,
)
from workshop.plan.models import PRESETS
from workshop.train.data import local_kit

IPEX_SCRIPT = Path(__file__).with_name("ipex_child.py")


def ipex_python() -> str | None:
    """The interpreter of the separate IPEX environment (environment-ipex.yml), if there is one."""
    explicit = os.environ.get("WORKSHOP_IPEX_PYTHON")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for root in ("~/miniforge3", "~/miniconda3", "~/anaconda3", "/opt/conda"):
        cand = Path(root).expanduser() / "envs" / "workshop-ipex" / "bin" / "python"
        if cand.exists():
            return str(cand)
    return None


def ipex_spec(cfg: BenchConfig, *, stock_only: bool = False) -> dict:
    """The IPEX child's input: the preset's config, pre-tokenized blocks of seq_len tokens, steps, rounds."""
    _, tok = local_kit(Path(cfg.cache_dir).expanduser())
    ids: list[int] = []
    for line in cfg.dataset_path().read_text(encoding="utf-8").splitlines():
        if line.strip():
            ids += tok(line)["input_ids"] + [tok.eos_token_id]
        if len(ids) > cfg.seq_len * 64:
            break
    blocks = [ids[i : i + cfg.seq_len] for i in range(0, len(ids) - cfg.seq_len + 1, cfg.seq_len)]
    spec = {
        "config": PRESETS[cfg.model].config,
        "blocks": blocks,
        "micro_batch": 2,
        "steps": cfg.steps,
        "rounds": cfg.rounds,
        "threads": os.cpu_count() or 1,
        "stock_only": stock_only,
    }
    return spec


def ipex(cfg: BenchConfig, python: str | None = None, *, stock_only: bool = False) -> dict:
    """IPEX vs stock PyTorch on the same model and batches, run in IPEX's own pinned environment.

    IPEX 2.8.0 needs torch 2.8.* (and its LLM path transformers <= 4.56), so it cannot share this environment;
    the child gets the model shape and pre-tokenized blocks as JSON (a transformers-5 tokenizer does not load
    in transformers 4.x).
    """
    python = python or ipex_python()
    if python is None:
        return {
            "benchmark": "ipex",
            "status": "skipped",
            "message": "no IPEX environment found: create it with `conda env create -f environment-ipex.yml` "
            "(IPEX 2.8.0 pins torch 2.8.*, transformers 4.51.3), or point WORKSHOP_IPEX_PYTHON at its "
            "python. The workbook's default path never needs IPEX (retired; stock PyTorch reaches "
            "AMX through oneDNN).",
        }

    spec = ipex_spec(cfg, stock_only=stock_only)
    Path(cfg.out_dir).mkdir(parents=True, exist_ok=True)
    spec_path = Path(cfg.out_dir) / "ipex_spec.json"
    spec_path.write_text(json.dumps(spec))
    proc = subprocess.run(
        [python, str(IPEX_SCRIPT), str(spec_path)],
        capture_output=True,
        text=True,
        timeout=cfg.timeout_s,
        check=False,
    )
    if proc.returncode != 0:
        return {
            "benchmark": "ipex",
            "status": "failed",
            "python": python,
            "message": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "no output",
            "stderr_tail": proc.stderr[-3000:],
        }
    child = json.loads(proc.stdout.strip().splitlines()[-1])
    ratio = paired_ratios(child["ipex_tokens_per_s"], child["stock_tokens_per_s"])
    return {
        "benchmark": "ipex",
        "status": "ok",
        "python": python,
        **child,
        "ratio": asdict(ratio),
        "message": f"IPEX / stock = x{ratio.median:.2f} (paired over {ratio.n} rounds)",
    }
