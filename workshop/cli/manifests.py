"""Commands for the manifests: render (write manifests/), crds (the CRD releases known here), validate (schema
and CEL). Each parses its flags, judges them, calls workshop.k8s and prints."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workshop.cli.args import summary
from workshop.cli.base import command
from workshop.errors import WorkshopError, check_output
from workshop.lang import _
from workshop.paths import MANIFESTS_DIR

SITE_FLAGS = (
    "registry",
    "namespace",
    "zone",
    "fsx_subnet_id",
    "fsx_security_group_id",
    "fsx_size",
    "s3_uri",
    "service_account",
)


@command
def render(argv: list[str] | None = None) -> int:
    from workshop.k8s import render as rendering

    parser = argparse.ArgumentParser(prog="workshop render", description=summary(rendering.__doc__))
    parser.add_argument(
        "--out", default=None, help="output folder (default: the repo's manifests/; with --plan: required)"
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if any file differs")
    parser.add_argument(
        "--plan",
        metavar="FILE",
        help="render exactly this plan file (workshop plan --out FILE): NodePool, EC2NodeClass, storage "
        "and TrainJob",
    )
    parser.add_argument(
        "--trainer-version",
        default=None,
        help="with --plan: your Kubeflow Trainer release (default: the plan's)",
    )
    site = parser.add_argument_group(
        "with --plan: your account's values (chapter 05's parameters of the same names; the preflight "
        "refuses the examples)"
    )
    for field in SITE_FLAGS:
        site.add_argument("--" + field.replace("_", "-"), dest=field, metavar=field.upper(), default=None)
    args = parser.parse_args(argv)
    given = {f: getattr(args, f) for f in SITE_FLAGS if getattr(args, f) is not None}
    if args.plan is not None and args.out is None:
        raise WorkshopError("--plan FILE needs --out DIR (manifests/ holds the workbook's own plans)")
    args.out = args.out or str(MANIFESTS_DIR)
    check_output(args.out, "--out", folder=True)
    if args.plan is not None:
        from workshop.plan.job import load_plan

        if args.check:
            raise WorkshopError("--check compares manifests/ with the code; it takes no --plan")
        _render_plan(load_plan(args.plan), args, given)
        return 0
    if args.trainer_version is not None or given:
        flag = (
            "--trainer-version"
            if args.trainer_version is not None
            else "--" + next(iter(given)).replace("_", "-")
        )
        raise WorkshopError(f"{flag} goes with --plan FILE")
    if not args.check:
        for path in rendering.render_all(args.out):
            print(_("wrote {path}").format(path=path))
        return 0
    stale = rendering.drift(args.out)
    for name in stale:
        print(f"drift: {Path(args.out) / name} differs from the code; run `python -m workshop render`")
    if stale:
        return 1
    print(f"{len(rendering.DEFAULT_MANIFESTS)} manifests in {args.out} match the code")
    return 0


def _render_plan(plan, args: argparse.Namespace, given: dict) -> None:
    """`workshop render --plan`: the plan's files with the account's values, then the values still at the
    examples."""
    from workshop.k8s import render as rendering
    from workshop.k8s.site import Site
    from workshop.report.predictions import plan_line

    where = Site(**given)
    written = rendering.render_plan(plan, args.out, trainer=args.trainer_version, site=where)
    print(plan_line(plan))  # once every file is rendered: a refused plan prints only its error line
    for path in written:
        print(_("wrote {path}").format(path=path))
    examples = where.example_fields(plan.placement.storage)
    if examples:
        print(
            _(
                "still the examples' values, which cannot start in your account: {flags}; render again "
                "with yours (`workshop cluster preflight --manifests {out}` refuses them)"
            ).format(flags=", ".join("--" + f.replace("_", "-") for f in examples), out=args.out)
        )


@command
def crds(argv: list[str] | None = None) -> int:
    from workshop.k8s import crds as schemas

    p = argparse.ArgumentParser(prog="workshop crds", description=summary(schemas.__doc__))
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser(
        "fetch", help="add another release: download its CRDs into the cache, digests recorded"
    )
    f.add_argument("--karpenter", metavar="VERSION", help="a karpenter-provider-aws release, e.g. 1.9.0")
    f.add_argument("--trainer", metavar="VERSION", help="a Kubeflow Trainer release, e.g. 2.2.0")
    imp = sub.add_parser("import", help="add releases from a folder of release folders (pinned ones checked)")
    imp.add_argument("dir")
    sub.add_parser("status", help="every known release and where it is read from")
    sub.add_parser("sources", help="print schemas/SOURCES.md (where each shipped file came from)")
    a = p.parse_args(argv)
    if a.cmd == "fetch":
        wanted = [
            schemas.new_release(fam, v)
            for fam, v in (("karpenter", a.karpenter), ("trainer", a.trainer))
            if v
        ]
        if not wanted:
            raise WorkshopError(
                "name a release to add: --karpenter VERSION and/or --trainer VERSION (the "
                f"pinned ones ship with the workbook: {schemas.pinned_list()})"
            )
        written = schemas.fetch(wanted, echo=print)
        print(f"{len(written)} file(s) downloaded into {schemas.cache_dir()}")
    elif a.cmd == "import":
        print(f"{len(schemas.import_dir(a.dir))} file(s) imported into {schemas.cache_dir()}")
    elif a.cmd == "sources":
        print(schemas.sources_markdown(), end="")
    else:
        override = schemas.override_dir()
        print(
            f"CRD schemas: the package ({schemas.SHIPPED}), then the cache ({schemas.cache_dir()})"
            + (f"; WORKSHOP_CRDS_DIR={override} replaces both" if override else "")
        )
        for rel, where in schemas.status():
            print(f"  {rel.label:24} {where:8}  {_(rel.note)}")
    return 0


def _validate_parser(doc: str | None, known: dict[str, str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workshop validate", description=summary(doc))
    parser.add_argument("files", nargs="*", metavar="FILE", help="YAML files (multi-document allowed)")
    parser.add_argument(
        "--karpenter",
        help="force one Karpenter CRD release (default: the one each manifest "
        f"targets, else all of {known['karpenter']})",
    )
    parser.add_argument(
        "--trainer",
        help="force one Kubeflow Trainer CRD release (default: the one each manifest "
        f"targets, else all of {known['trainer']})",
    )
    parser.add_argument(
        "--rules", action="store_true", help="list every CEL rule and whether it is evaluated"
    )
    return parser


@command
def validate(argv: list[str] | None = None) -> int:
    from workshop.k8s import crds as schemas
    from workshop.k8s import validate as validation

    known = {family: ", ".join(validation.known_releases(family)) for family in ("karpenter", "trainer")}
    args = _validate_parser(validation.__doc__, known).parse_args(argv)
    for family, version in (("karpenter", args.karpenter), ("trainer", args.trainer)):
        if version is not None:  # '' is falsy below: it would silently mean "every release"
            schemas.release(family, version)
    if args.rules:
        for info in validation.rule_inventory(
            karpenter=args.karpenter or validation.DEFAULT_KARPENTER,
            trainer=args.trainer or validation.DEFAULT_TRAINER,
        ):
            print(f"{info.kind:24} {info.path:50} {info.status:12.60} {info.rule}")
        if not args.files:
            return 0
    if not args.files:
        raise WorkshopError("give at least one manifest FILE (or --rules)")
    verdicts = validation.judge_files(args.files, karpenter=args.karpenter, trainer=args.trainer)
    problems = [p for v in verdicts for p in v.problems]
    for verdict in verdicts:
        print(verdict)
    for problem in problems:
        print(f"  {problem}")
    if problems:
        print(f"{len(problems)} problem(s)", file=sys.stderr)
        return 1
    print(f"all valid: {', '.join(args.files)}")
    return 0
