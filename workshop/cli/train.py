"""`workshop train` == `python -m workshop.train`: the training entry point.

Its parser is derived from TrainArgs' fields (type, default, `metadata["help"]`): one declaration in
workshop/train/args.py drives this parser, `TrainArgs.to_argv` and every TrainJob.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import typing

from workshop.cli.base import command
from workshop.errors import WorkshopError
from workshop.train import args as train_args
from workshop.train.args import (
    DESCRIPTION,
    PROG,
    TrainArgs,
    command_line_fields,
    field_default,
    field_kind,
    flag_of,
    json_object,
)
from workshop.train.loop import record_rank_errors
from workshop.train.loop import train as run_training


def _json_object(text: str) -> dict:
    try:
        return json_object(text)
    except WorkshopError as e:  # argparse adds the flag's name and exits 2 with the usage line
        raise argparse.ArgumentTypeError(str(e)) from None


def _argument(f: dataclasses.Field, hint) -> dict:
    """argparse's keywords for one field: booleans are switches (`--x` when off by default, `--x/--no-x` when
    on), dicts JSON objects, numbers their type; strings need none."""
    kind, default = field_kind(hint), field_default(f)
    kw = {"default": default, "help": f.metadata.get("help")}
    if kind is bool:
        kw["action"] = argparse.BooleanOptionalAction if default else "store_true"
    elif kind is dict:
        kw["type"] = _json_object
    elif kind is not str:
        kw["type"] = kind
    return kw


def build_parser() -> argparse.ArgumentParser:
    """`python -m workshop.train`'s parser: one flag per TrainArgs field, in declaration order."""
    p = argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    hints = typing.get_type_hints(TrainArgs)
    for f in command_line_fields():
        p.add_argument(flag_of(f.name), **_argument(f, hints[f.name]))
    return p


def parse_args(argv: list[str] | None = None) -> TrainArgs:
    """The validated TrainArgs of a command line: one grammar, train.args.from_argv (what launchers and
    TrainJobs use too); the parser above only prints --help. A malformed line is one `error:` line, exit 2."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if any(a in ("-h", "--help") for a in argv):
        build_parser().print_help()
        raise SystemExit(0)
    return train_args.parse_args(argv)


@record_rank_errors  # outermost: only a crash (not bad input, exit 2) reaches torchrun's error file
@command
def train(argv: list[str] | None = None) -> int:
    run_training(parse_args(argv))
    return 0
