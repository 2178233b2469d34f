"""`workshop train` == `python -m workshop.train`: the training entry point."""

from __future__ import annotations

from workshop.cli.base import command


@command
def train(argv: list[str] | None = None) -> int | None:
    from workshop.train.loop import main  # moved here by its owner: parse, call, print

    return main(argv)
