"""Hostile input to `workshop plan`, flag by flag (issue 52): malformed numbers, zero, negative, nan, inf,
huge, denormal, empty, unknown names, text where numbers go. Every one ends in exactly one `error:` line
naming the bad value and exit 2: never a traceback, never a plan. In-process, and each is refused before any
plan is ranked, so the table takes seconds."""

from __future__ import annotations

import pytest

from workshop.cli import main

FLOATS = {  # flag: (values refused as numbers, values refused by range)
    "--tokens": ("1e-308", "0", "1e14"),
    "--startup-s": ("-1", "1e9"),
    "--download-gbps": ("0", "1e-308", "-2"),
    "--init-s": ("-5", "1e308"),
    "--checkpoint-minutes": ("-1", "1e-308"),
    "--storage-gbps": ("0", "1e-308"),
    "--headroom": ("-0.1", "1.5"),
    "--max-hours": ("0", "-3", "1e-308"),
    "--budget": ("0", "-10", "1e-308"),
    "--cpu-efficiency": ("0", "1.5", "1e-308", "-0.2"),
    "--gpu-efficiency": ("0", "2", "1e-308"),
    "--checkpoint-share": ("0", "1", "1.5", "-0.1"),
    "--eval-share": ("-0.1", "2", "1.5"),
}
NOT_NUMBERS = ("abc", "nan", "inf", "-inf", "1e400", "", "1,5", "0x10")
INTS = {
    "--nodes": ("0", "-1", "1001", "1.5", "two"),
    "--procs-per-node": ("0", "-8", "100000"),
    "--zero": ("4", "-1", "three"),
    "--micro-batch": ("0", "-2", "1e3", "2000"),
    "--seq-len": ("0", "-512", "1000000", "5e2"),
    "--global-batch": ("0", "-8192", "1.5", "nan", "inf"),
    "--top": ("0", "-1", "ten"),
    "--pick": ("0", "-1", "9999", "x"),
}
CHOICES = {
    "--model": ("gpt5", "", "llama-9b"),
    "--method": ("qlora", "", "LORA"),
    "--stack": ("tuned-fp4", ""),
    "--cpu-engine": ("fsdp",),
    "--storage": ("ebs",),
    "--source": ("gcp", ""),
    "--family": ("", "nosuchfamily", "p5.48xlarge", "c7g"),
    "--instance": ("p5", "nosuch.48xlarge", "c7i.99xlarge", "c7g.16xlarge"),
    "--price": (
        "",
        "p5.48xlarge",
        "p5.48xlarge=",
        "p5.48xlarge=abc",
        "p5.48xlarge=nan",
        "p5.48xlarge=inf",
        "p5.48xlarge=-1",
        "p5.48xlarge=0",
        "p5.48xlarge=1e-308",
        "p5.48xlarge=1e9",
        "nosuch.type=3",
        "=3",
    ),
    "--ceiling": ("/nonexistent/ceiling.json",),
    "--calibration": ("/nonexistent/slice.json",),
    "--weights": ("pretrained", ""),
    "--out": ("/dev/null/plan.json",),
}
MEMORY = {  # `workshop plan --memory` has its own flags
    "--nodes": ("0", "-2", "nan"),
    "--procs-per-node": ("0",),
    "--zero": ("5",),
    "--micro-batch": ("0", "x"),
    "--seq-len": ("0", "abc"),
    "--headroom": ("nan", "-1", "inf", "2"),
    "--family": ("nosuchfamily",),
    "--model": ("gpt5",),
    "--method": ("qlora",),
}
COMBINED = [  # each flag fine alone, the combination not
    (["--instance", "c7i.48xlarge", "--procs-per-node", "500"], "500"),
    (["--global-batch", "1000"], "1,000"),
    (["--global-batch", "8193"], "8,193"),
    (["--tokens", "100"], "100"),
    (["--seq-len", "100000"], "100000"),
    (["--model", "tiny", "--seq-len", "4096"], "4096"),
    (["--instance", "p5.48xlarge", "--nodes", "3", "--global-batch", "8192"], "3"),
]


def _cases() -> list[tuple[list[str], str]]:
    out = [([flag, v], v) for flag, values in FLOATS.items() for v in values]
    # "--flag=value": argparse would read a bare -inf as a flag of its own
    out += [([f"{flag}={v}"], v) for flag in FLOATS for v in NOT_NUMBERS]
    out += [([flag, v], v) for flag, values in INTS.items() for v in values]
    out += [([flag, v], v) for flag, values in CHOICES.items() for v in values]
    out += [(["--memory", flag, v], v) for flag, values in MEMORY.items() for v in values]
    return out + COMBINED


CASES = _cases()


@pytest.mark.parametrize("argv, value", CASES, ids=[" ".join(a) or "-" for a, _ in CASES])
def test_hostile_plan_input_is_one_error_line_and_exit_2(argv, value, capsys):
    try:
        code = main(["plan", "--source", "moto", *argv])
    except SystemExit as exit_:  # argparse's own: usage line + one error line, exit 2
        code = exit_.code
    out = capsys.readouterr()
    assert code == 2, f"exit {code}: {(out.err + out.out)[-600:]}"
    assert "Traceback" not in out.err + out.out
    assert not out.out.strip(), f"printed a plan: {out.out[:300]}"
    errors = [line for line in out.err.splitlines() if "error:" in line]
    assert len(errors) == 1, out.err[-600:]
    assert repr(value) in errors[0] or value in errors[0], f"{value!r} not named in: {errors[0]}"


def test_at_least_65_distinct_hostile_inputs_over_every_flag():
    assert len(CASES) >= 65 and len({tuple(a) for a, _ in CASES}) == len(CASES)
    from workshop.cli.plan import _memory_parser, _plan_parser

    flags = {f.split("=")[0] for a, _ in CASES for f in a if f.startswith("--")}
    numeric = {
        o
        for p in (_plan_parser(), _memory_parser())
        for a in p._actions
        for o in a.option_strings
        if a.nargs is None and a.option_strings and o.startswith("--") and o not in ("--help",)
    }
    assert numeric <= flags | {"--memory", "--json", "--source"}, sorted(numeric - flags)
