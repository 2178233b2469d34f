"""`workshop bench`: side-by-side benchmarks that write JSON results (ceiling included)."""

from __future__ import annotations

from workshop.cli.base import command


@command
def bench(argv: list[str] | None = None) -> int | None:
    from workshop.experiments.bench import main  # moved here by its owner: parse, call, print

    return main(argv)
