"""`workshop images [--check]`: the tracked figures in images/ are refreshed only by this explicit command.

Notebooks write their figures to an untracked folder (parameter `images_dir`, default `../out/images`), so
opening and running a notebook never touches git. `workshop images` executes the workbook (papermill, small
defaults, as `workshop run` does) into a scratch folder and replaces images/ with what the notebooks made.

`--check` is a drift check, not a perceptual comparison (timings and measured values differ on every run):
it fails when a notebook makes a figure images/ lacks, when images/ holds a figure no notebook makes, or
when a figure's pixel size differs. `--from DIR` checks a folder of figures already made (e.g. `out/images`
after `workshop run --out out`) instead of executing the notebooks again.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from workshop.errors import WorkshopError
from workshop.launch.notebooks import run_workbook
from workshop.paths import IMAGES_DIR

TRACKED = IMAGES_DIR


def default_images_dir(notebook: Path) -> Path:
    """Where a notebook writes figures when nobody overrides `images_dir` (its parameters cell's default)."""
    import papermill as pm

    params = pm.inspect_notebook(str(notebook))
    if "images_dir" not in params:
        raise WorkshopError(f"{notebook.name} declares no images_dir parameter")
    return (notebook.parent / ast.literal_eval(params["images_dir"]["default"])).resolve()


def pixel_sizes(paths) -> dict[str, tuple[int, int]]:
    """{file name: (width, height)} of PNG files, read from their headers."""
    from PIL import Image, UnidentifiedImageError

    sizes = {}
    for path in paths:
        try:
            with Image.open(path) as im:
                sizes[Path(path).name] = im.size
        except (UnidentifiedImageError, OSError) as e:
            raise WorkshopError(f"{str(path)!r} is not a readable PNG image ({e})") from None
    return sizes


def drift(made: dict[str, tuple[int, int]], tracked: dict[str, tuple[int, int]]) -> list[str]:
    """What differs between the figures the notebooks made and images/: names both ways, then pixel sizes."""
    problems = [
        f"{name}: made by a notebook, missing from images/" for name in sorted(set(made) - set(tracked))
    ]
    problems += [f"{name}: in images/, made by no notebook" for name in sorted(set(tracked) - set(made))]
    problems += [
        f"{name}: {made[name][0]}x{made[name][1]} px made, {tracked[name][0]}x{tracked[name][1]} px "
        f"in images/"
        for name in sorted(set(made) & set(tracked))
        if made[name] != tracked[name]
    ]
    return problems


def make(out: Path, echo=print) -> list[Path]:
    """Execute the whole workbook into `out`; the figures it made (fails if any notebook fails)."""

    runs = run_workbook(out, echo=echo)
    failed = [r for r in runs if r.status != "ok"]
    if failed:
        raise WorkshopError(
            "images/ left as it is: "
            + "; ".join(f"{r.notebook} {r.status}" + (f" ({r.error})" if r.error else "") for r in failed)
        )
    return sorted((out / "images").glob("*.png"))


def replace_tracked(made: list[Path], tracked: Path = TRACKED) -> tuple[list[str], list[str]]:
    """Copy the made figures into images/ and remove the ones no notebook makes any more."""
    tracked.mkdir(exist_ok=True)
    names = {p.name for p in made}
    removed = sorted(p.name for p in tracked.glob("*.png") if p.name not in names)
    for name in removed:
        (tracked / name).unlink()
    for p in made:
        shutil.copyfile(p, tracked / p.name)
    return sorted(names), removed


def figures_in(folder: Path) -> list[Path]:
    """The PNG figures already made in `folder` (e.g. out/images), sorted by name."""
    if not folder.is_dir():
        raise WorkshopError(f"--from {folder}: no such folder")
    return sorted(folder.glob("*.png"))
