"""Commands that run and keep the notebooks: run, images, i18n, lab, nbval."""

from __future__ import annotations

from workshop.cli.base import command


@command
def run(argv: list[str] | None = None) -> int | None:
    from workshop.launch.notebooks import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def images(argv: list[str] | None = None) -> int | None:
    from workshop.book.images import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def i18n(argv: list[str] | None = None) -> int | None:
    from workshop.book.i18n import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def lab(argv: list[str] | None = None) -> int | None:
    from workshop.book.lab import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def nbval(argv: list[str] | None = None) -> int | None:
    from workshop.book.nbcheck import main  # moved here by its owner: parse, call, print

    return main(argv)
