"""Commands that run and keep the notebooks: run, images, i18n, lab, nbval."""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from workshop.cli.args import summary
from workshop.cli.base import command
from workshop.errors import WorkshopError
from workshop.lang import LANGUAGES, _
from workshop.paths import REPO


@command
def run(argv: list[str] | None = None) -> int:
    from workshop.launch import notebooks

    p = argparse.ArgumentParser(prog="workshop run", description=summary(notebooks.__doc__))
    p.add_argument("--out", default="out", help="folder for executed notebooks, figures and the index")
    p.add_argument("--only", nargs="*", help="notebook numbers or names, e.g. --only 01 04")
    p.add_argument(
        "-p",
        "--parameter",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="override a notebook parameter (given to every notebook that declares it)",
    )
    p.add_argument(
        "--lang",
        choices=LANGUAGES,
        default="en",
        help="ko: the Korean notebooks (notebooks-ko/), Korean output",
    )
    p.add_argument("--stop-on-failure", action="store_true", help="stop at the first failing notebook")
    a = p.parse_args(argv)
    with notebooks.language(a.lang):  # what this command prints is in the chapters' language too
        runs = notebooks.run_workbook(
            a.out,
            a.only,
            {k: notebooks.parse_value(v) for k, v in a.parameter},
            stop_on_failure=a.stop_on_failure,
            lang=a.lang,
        )
        total = sum(r.seconds for r in runs)
        failed = [r for r in runs if r.status == "failed"]
        print(
            _("{ok}/{n} notebooks ran in {total:.0f} s; index: {index}").format(
                ok=len([r for r in runs if r.status == "ok"]),
                n=len(runs),
                total=total,
                index=Path(a.out) / "index.md",
            )
        )
        for r in failed:
            print(_("failed: {error}").format(error=r.error))
        if a.lang == "en":  # the read is of English sentences
            _truth_check(runs, Path(a.out))
        else:
            _korean_check(runs, Path(a.out))
    return 1 if failed else 0


def _korean_check(runs, out: Path) -> None:
    """Read every executed Korean notebook for English prose outside the kinds that stay English
    (book.i18n_prose); list it on the console and in index.md."""
    import nbformat

    from workshop.book import i18n_prose

    found = []
    for r in runs:
        if r.output and Path(r.output).is_file():
            found += [f"{r.notebook}: {p}" for p in i18n_prose.problems(nbformat.read(r.output, 4))]
    with (out / "index.md").open("a") as f:
        f.write("\n## 영어 문장 검사\n\n" + ("\n".join(f"- {p}" for p in found) or "없음") + "\n")
    print(
        _("English prose check: {n} line(s) to translate").format(n=len(found))
        if found
        else _("English prose check: nothing found")
    )
    for p in found:
        print(f"  {p}")


def _truth_check(runs, out: Path) -> None:
    """Read every executed notebook for the sentence kinds a learner must never see (nbcheck.truth_problems);
    list them on the console and in index.md."""
    import nbformat

    from workshop.book import nbcheck

    found = []
    for r in runs:
        if r.output and Path(r.output).is_file():
            found += [f"{r.notebook}: {p}" for p in nbcheck.truth_problems(nbformat.read(r.output, 4))]
    with (out / "index.md").open("a") as f:
        f.write("\n## Truth check\n\n" + ("\n".join(f"- {p}" for p in found) or "nothing found") + "\n")
    print(f"truth check: {len(found)} sentence(s) to fix" if found else "truth check: nothing found")
    for p in found:
        print(f"  {p}")


@command
def images(argv: list[str] | None = None) -> int:
    from workshop.book import images

    p = argparse.ArgumentParser(prog="workshop images", description=summary(images.__doc__))
    p.add_argument(
        "--check", action="store_true", help="fail on drift (names both ways, pixel sizes); write nothing"
    )
    p.add_argument(
        "--from",
        dest="source",
        metavar="DIR",
        help="use the figures already in DIR (e.g. out/images) instead of executing the notebooks",
    )
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="workshop-images-") as tmp:
        made = images.figures_in(Path(a.source)) if a.source else images.make(Path(tmp))
        if a.check:
            problems = images.drift(
                images.pixel_sizes(made), images.pixel_sizes(images.TRACKED.glob("*.png"))
            )
            for line in problems:
                print(line)
            print(
                f"images/: {len(made)} figures made, "
                + (f"{len(problems)} differences" if problems else "no drift (names and pixel sizes)")
            )
            return 1 if problems else 0
        written, removed = images.replace_tracked(made)
        print(
            f"images/: wrote {len(written)} figures" + (f", removed {', '.join(removed)}" if removed else "")
        )
    return 0


@command
def i18n(argv: list[str] | None = None) -> int:
    from workshop.book import i18n

    p = argparse.ArgumentParser(prog="workshop i18n", description=summary(i18n.__doc__))
    p.add_argument("action", choices=["update", "generate", "check", "sync"])
    a = p.parse_args(argv)
    try:
        if a.action in ("update", "sync"):
            for path in i18n.update():
                print(f"catalog: {path.relative_to(REPO)}")
        if a.action in ("generate", "sync"):
            for path in i18n.generate():
                print(f"wrote {path.relative_to(REPO)}")
        if a.action in ("check", "sync"):
            found = i18n.problems()
            for line in found:
                print(line)
            if found:
                print(
                    f"{len(found)} problem(s); translate in "
                    f"workshop/locale/ko/LC_MESSAGES/*.po, then `{i18n.HINT}`"
                )
                return 1
            print("Korean catalogs and notebooks-ko/ match the English")
    except (OSError, ValueError) as e:  # a malformed catalog or notebook: its message, no traceback
        raise WorkshopError(f"{type(e).__name__}: {e}") from None
    return 0


@command
def lab(argv: list[str] | None = None) -> int:
    from workshop.book import lab

    p = argparse.ArgumentParser(prog="workshop lab", description=summary(lab.__doc__))
    p.add_argument("--lang", default="en", help=f"the chapters' language: {', '.join(LANGUAGES)}")
    p.add_argument("--reset", nargs="*", default=[], metavar="NN", help="take a fresh copy of these chapters")
    p.add_argument("--dir", type=Path, default=None, help="the working copy (default: lab/ or lab-ko/)")
    p.add_argument(
        "--print", action="store_true", help="prepare the copy and print the command; start nothing"
    )
    args, extra = p.parse_known_args(argv)
    root, copied = lab.working_copy(args.lang, args.dir, tuple(args.reset))
    print(f"working copy: {root} ({len(copied)} chapter(s) copied; git ignores it)", flush=True)
    cmd = lab.command(root, extra)
    if args.print:
        print(" ".join(cmd))
        return 0
    return subprocess.call(cmd, env=dict(os.environ, WORKSHOP_LANG=args.lang))


@command
def nbval(argv: list[str] | None = None) -> int:
    from workshop.book import nbcheck
    from workshop.launch.notebooks import notebooks

    p = argparse.ArgumentParser(prog="workshop nbval", description=summary(nbcheck.__doc__))
    sub = p.add_subparsers(dest="action", required=True)
    r = sub.add_parser("refresh", help="execute notebooks and re-record their # NBVAL_CHECK_OUTPUT cells")
    r.add_argument("--only", nargs="*", help="notebook numbers or names, e.g. --only 01 05 (default: all)")
    a = p.parse_args(argv)
    for path in notebooks(a.only):
        nbcheck.refresh(path, echo=print)
    return 0
