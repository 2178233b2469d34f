"""Turn training logs into tables: the METRIC lines of workshop.train and DeepSpeed's ZeRO memory stages."""

from __future__ import annotations

import json
import re

_STAGE_MA = re.compile(r"MA ([\d.]+) GB\s+Max_MA ([\d.]+) GB\s+CA ([\d.]+) GB\s+Max_CA ([\d.]+) GB")
_STAGE_VM = re.compile(r"CPU Virtual Memory:\s+used = ([\d.]+) GB, percent = ([\d.]+)%")
_RANK_PREFIX = re.compile(r"^\[(?:default)?\d+\]:|^\[rank\d+\]:")


METRIC_PREFIX = "METRIC "  # the entry point prints one `METRIC {json}` line per optimizer step


def _strip(line: str) -> str:
    """torchrun --tee / --log-dir prefixes lines with "[default0]:"; drop it."""
    return _RANK_PREFIX.sub("", line).strip()


def parse_metrics(text: str) -> list[dict]:
    """One dict per optimizer step, from the `METRIC {json}` lines rank 0 prints."""
    out = []
    for line in text.splitlines():
        line = _strip(line)
        if line.startswith(METRIC_PREFIX):
            try:
                out.append(json.loads(line[len(METRIC_PREFIX) :]))
            except json.JSONDecodeError:
                continue  # a line cut by a crash
    return out


def parse_zero_stages(text: str) -> list[dict]:
    """DeepSpeed's start-up memory report as rows (dicts): stage, ma_gb and max_ma_gb (GB), host_used_gb
    (GB) and host_percent (%). In the log: a stage name line, then `MA ...`, then `CPU Virtual Memory ...`.

    On CPU, DeepSpeed's "MA" (memory allocated) is the rank's resident set size; "CPU Virtual Memory used"
    is the whole host's, all ranks together.
    """
    lines = [_strip(x) for x in text.splitlines()]
    stages = []
    for i, line in enumerate(lines):
        m = _STAGE_MA.search(line)
        if not m or i == 0:
            continue
        vm = next((_STAGE_VM.search(x) for x in lines[i + 1 : i + 3] if _STAGE_VM.search(x)), None)
        stages.append(
            {
                "stage": lines[i - 1],
                "ma_gb": float(m.group(1)),
                "max_ma_gb": float(m.group(2)),
                "host_used_gb": float(vm.group(1)) if vm else None,
                "host_percent": float(vm.group(2)) if vm else None,
            }
        )
    return stages
