"""`workshop lab`: JupyterLab on a working copy of the chapters, so a learner's session leaves git clean.

JupyterLab autosaves outputs into the notebook it has open; on the tracked `notebooks/*.ipynb` that marks
every chapter modified after one session (and mixes a learner's outputs into the committed ones nbval
checks). This command copies the chapters once into `lab/` (`lab-ko/` for `--lang ko`), beside `notebooks/`
so every `../` path in them still resolves, ignored by git, and never overwritten: a learner's edits stay
(`--reset NN` takes a fresh copy of one chapter). It adds `--allow-root` when run as root (a container, a
cloud VM), where Jupyter otherwise refuses to start. Any other option goes to `jupyter lab` as it is.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.lang import LANGUAGES
from workshop.paths import NOTEBOOKS_DIR, NOTEBOOKS_KO_DIR, REPO


def working_copy(
    lang: str = "en", dest: Path | None = None, reset: tuple[str, ...] = ()
) -> tuple[Path, list[str]]:
    """Copy the chapters `dest` lacks (and those named in `reset`); returns `dest` and what was copied."""
    if lang not in LANGUAGES:
        raise WorkshopError(f"unknown language {lang!r}; allowed: {', '.join(LANGUAGES)}")
    src = NOTEBOOKS_KO_DIR if lang == "ko" else NOTEBOOKS_DIR
    dest = dest or REPO / ("lab-ko" if lang == "ko" else "lab")
    chapters = sorted(src.glob("[0-9][0-9]_*.ipynb"))
    unknown = [r for r in reset if not any(p.name.startswith(f"{r}_") for p in chapters)]
    if unknown:
        raise WorkshopError(
            f"no chapter {', '.join(unknown)}; allowed: {', '.join(p.name[:2] for p in chapters)}"
        )
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for nb in chapters:
        target = dest / nb.name
        if not target.exists() or nb.name[:2] in reset:
            shutil.copyfile(nb, target)
            copied.append(nb.name)
    return dest, copied


def command(root: Path, extra: list[str]) -> list[str]:
    """The `jupyter lab` command line: rooted at the working copy, `--allow-root` when uid 0."""
    cmd = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={root}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in extra:
        cmd.append("--allow-root")
    return cmd + extra
