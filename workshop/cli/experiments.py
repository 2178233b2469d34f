"""Commands that run the experiments: load, netsim, comms."""

from __future__ import annotations

from workshop.cli.base import command


@command
def load(argv: list[str] | None = None) -> int | None:
    from workshop.experiments.loading.cli import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def netsim(argv: list[str] | None = None) -> int | None:
    from workshop.launch.netsim import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def comms(argv: list[str] | None = None) -> int | None:
    from workshop.experiments.comms.cli import main  # moved here by its owner: parse, call, print

    return main(argv)
