"""Commands for the manifests: render, crds, validate."""

from __future__ import annotations

from workshop.cli.base import command


@command
def render(argv: list[str] | None = None) -> int | None:
    from workshop.k8s.render import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def crds(argv: list[str] | None = None) -> int | None:
    from workshop.k8s.crds import main  # moved here by its owner: parse, call, print

    return main(argv)


@command
def validate(argv: list[str] | None = None) -> int | None:
    from workshop.k8s.validate import main  # moved here by its owner: parse, call, print

    return main(argv)
