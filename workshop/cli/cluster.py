"""`workshop cluster status|apply|delete|watch|logs|teardown`."""

from __future__ import annotations

from workshop.cli.base import command


@command
def cluster(argv: list[str] | None = None) -> int | None:
    from workshop.k8s.cluster_cli import main  # moved here by its owner: parse, call, print

    return main(argv)
