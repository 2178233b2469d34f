"""How long the workbook and the test suite take, per chapter and per test file, on each kind of CPU seen.

`workshop bench workbook` and `workshop bench suite` append a run to benchmarks/results/timings.json (the
machine, the date, seconds per part); `workshop run` reads it back before it starts and prints what to expect
on this machine: the newest run on the same kind of CPU (AMX, AVX512_BF16, or neither) with the same number of
cores, else the nearest one, said to be from another kind. A change that slows a chapter or a test file shows
as a new row beside the old ones, machine and date on each.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.lang import _
from workshop.paths import RESULTS_DIR

TIMINGS = RESULTS_DIR / "timings.json"
KINDS = ("workbook", "suite")
BUSY_CPUS = 0.5  # CPUs in use by other processes from which the estimate says this run will take longer


@dataclass(frozen=True)
class Machine:
    """What decides how fast the workbook runs: the CPU's bf16 path and its core count."""

    cpu_model: str
    cpu_kind: str  # amx | avx512_bf16 | other: the path bf16 matmuls take
    cpus: int  # logical CPUs (vCPUs): what the workbook's ranks and threads are sized by

    def describe(self) -> str:
        return f"{self.cpu_model} ({self.cpu_kind}, {self.cpus} vCPUs)"


@dataclass(frozen=True)
class Timing:
    """One timed run of the workbook (parts: chapters) or the suite (parts: test files), in seconds."""

    kind: str
    machine: Machine
    date: str
    total_s: float
    parts: dict[str, float]
    note: str = ""
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping) -> Timing:
        try:
            return cls(
                kind=d["kind"],
                machine=Machine(**d["machine"]),
                date=d["date"],
                total_s=float(d["total_s"]),
                parts={k: float(v) for k, v in d["parts"].items()},
                note=d.get("note", ""),
                extra=dict(d.get("extra") or {}),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise WorkshopError(
                f"a timing record in {TIMINGS.name} is damaged ({e!r}): {dict(d)!r:.200}"
            ) from e


def this_machine() -> Machine:
    """This machine, as a timing record names it: from /proc/cpuinfo, without importing torch (`workshop run`
    prints the estimate before anything heavy is loaded)."""
    from workshop.plan.hardware import _read_proc_cpuinfo

    proc = _read_proc_cpuinfo()
    flags = set(proc.get("flags", "").split())
    kind = (
        "amx" if {"amx_bf16", "amx_tile"} <= flags else "avx512_bf16" if "avx512_bf16" in flags else "other"
    )
    return Machine(proc.get("model name") or "unknown CPU", kind, os.cpu_count() or 1)


def load(path: Path = TIMINGS) -> list[Timing]:
    if not path.exists():
        return []
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise WorkshopError(f"{path} is not valid JSON: {e}") from e
    return [Timing.from_dict(r) for r in raw.get("runs", [])]


def record(timing: Timing, path: Path = TIMINGS) -> Path:
    """Append one run (history is kept: the rows side by side show a change that slowed a part)."""
    runs = [asdict(t) for t in load(path)] + [asdict(timing)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": runs}, indent=1, ensure_ascii=False) + "\n")
    return path


def new_timing(kind: str, parts: Mapping[str, float], note: str = "", **extra) -> Timing:
    """A run measured now, on this machine."""
    return Timing(
        kind,
        this_machine(),
        time.strftime("%Y-%m-%d"),
        round(sum(parts.values()), 1),
        {k: round(v, 1) for k, v in parts.items()},
        note,
        extra,
    )


def nearest(runs: Sequence[Timing], kind: str, here: Machine) -> tuple[Timing, bool] | None:
    """The newest `kind` run on a machine like this one, and whether it has the same CPU kind and vCPUs."""
    mine = [r for r in runs if r.kind == kind]
    if not mine:
        return None
    same = [r for r in mine if (r.machine.cpu_kind, r.machine.cpus) == (here.cpu_kind, here.cpus)]
    pool = same or [r for r in mine if r.machine.cpus == here.cpus] or mine
    # runs are appended as they are measured: of several on the newest date, the last recorded is the newest
    newest = max(enumerate(pool), key=lambda ir: (ir[1].date, ir[0]))[1]
    return newest, bool(same)


def busy_cpus(interval: float = 0.5) -> float:
    """How many of this machine's CPUs other processes keep busy now: the whole machine's CPU use over
    `interval` seconds while this process waits (so it counts only the others)."""
    import psutil

    return psutil.cpu_percent(interval=interval) / 100 * (psutil.cpu_count() or 1)


def chapter_of(part: str) -> str:
    """'04_single_node_gloo.ipynb' -> '04': chapters are named the same in both languages by number."""
    return part[:2]


def expectation(
    chapters: Sequence[str], here: Machine | None = None, path: Path = TIMINGS, busy: float | None = None
) -> str | None:
    """One line: the seconds each chapter took on the stored run nearest this machine, and where it ran;
    None when no workbook run is stored. `busy` (busy_cpus()): CPUs other processes use now; from half a
    CPU on, the line says this run will take longer than the stored one."""
    here = here or this_machine()
    found = nearest(load(path), "workbook", here)
    if found is None:
        return None
    run, same = found
    by_chapter = {chapter_of(k): v for k, v in run.parts.items()}
    known = [(c, by_chapter[c]) for c in chapters if c in by_chapter]
    if not known:
        return None
    total = sum(s for _c, s in known)
    parts = ", ".join(f"{c}: {s:.0f} s" for c, s in known)
    where = _("stored run on {machine}, {date}").format(machine=run.machine.describe(), date=run.date)
    line = _("Expect about {minutes:.1f} min ({parts}; {where})").format(
        minutes=total / 60, parts=parts, where=where
    )
    if not same:
        line += _(
            "; that run was on another kind of CPU than this one ({here}), so yours will differ"
        ).format(here=here.describe())
    if busy is not None and busy >= BUSY_CPUS:
        line += _(
            "; other processes are using about {busy:.1f} of this machine's {cpus} CPUs right now, so this "
            "run will take longer"
        ).format(busy=busy, cpus=here.cpus)
    return line


def from_index(out: Path, note: str = "") -> Timing | None:
    """The timing of a finished `workshop run --out OUT` (its index.json), when every notebook ran."""
    runs = json.loads((Path(out) / "index.json").read_text())
    if not runs or any(r["status"] != "ok" for r in runs):
        return None
    return new_timing("workbook", {r["notebook"]: r["seconds"] for r in runs}, note)
