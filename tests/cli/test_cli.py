"""The console entry points answer, and bad input fails early with the value and the allowed ones."""

import subprocess
import sys

from workshop.cli import COMMANDS, main


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120, check=False)


def test_module_help_works():
    r = run("-m", "workshop", "--help")
    assert r.returncode == 0 and all(name in r.stdout for name in COMMANDS)
    r = run("-m", "workshop.train", "--help")
    assert r.returncode == 0 and "--zero-stage" in r.stdout and "--offload-optimizer" in r.stdout


def test_unknown_command_names_the_allowed_ones(capsys):
    assert main(["trian"]) == 2
    err = capsys.readouterr().err
    assert "'trian'" in err and "train" in err


def test_train_cli_reports_error_without_traceback():
    r = run("-m", "workshop.train", "--model", "nope")
    assert (
        r.returncode == 2
        and r.stderr.startswith("error: unknown model 'nope'")
        and "Traceback" not in r.stderr
    )
