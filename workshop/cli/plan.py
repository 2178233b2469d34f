"""Commands that plan: hw (this CPU), instances (the EC2 catalog), plan (time, cost, memory)."""

from __future__ import annotations

from workshop.cli.base import command


@command
def hw(argv: list[str] | None = None) -> int | None:
    from workshop.plan.hardware import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def instances(argv: list[str] | None = None) -> int | None:
    from workshop.plan.catalog import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def plan(argv: list[str] | None = None) -> int | None:
    from workshop.plan.cost import main  # moved here by its owner: parse, call, print

    return main(argv)
