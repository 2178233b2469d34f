"""The real-server module's gate, checked where no kube-apiserver is (CI): KUBEBUILDER_ASSETS unset skips it
in one line; set but wrong fails the run in one line naming what is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.real_apiserver import AssetsMissing, assets
from workshop.paths import REPO


def _collect(env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "KUBEBUILDER_ASSETS"}
    if env_value is not None:
        env["KUBEBUILDER_ASSETS"] = env_value
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/k8s/test_real_apiserver.py"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )


@pytest.mark.slow  # a pytest run of its own (CI runs slow tests too)
def test_unset_skips_in_one_line():
    run = _collect(None)
    assert run.returncode == 5 and "1 skipped" in run.stdout, run.stdout  # 5: no test ran, none failed
    assert sum("KUBEBUILDER_ASSETS is not set" in line for line in run.stdout.splitlines()) == 1, run.stdout


@pytest.mark.slow
def test_set_but_wrong_fails_naming_what_is_missing(tmp_path):
    run = _collect(str(tmp_path / "nowhere"))
    assert run.returncode not in (0, 5) and "skipped" not in run.stdout, run.stdout
    said = [line for line in run.stdout.splitlines() if line.startswith("KUBEBUILDER_ASSETS=")]
    assert said == [
        f"KUBEBUILDER_ASSETS={tmp_path / 'nowhere'}: no such folder (it must hold kube-apiserver and etcd)"
    ]


@pytest.mark.parametrize("present", [(), ("etcd",), ("kube-apiserver",)])
def test_a_folder_without_both_executables_names_the_missing_one(tmp_path, monkeypatch, present):
    for name in present:
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    (tmp_path / "etcd-not-executable").write_text("")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path))
    with pytest.raises(AssetsMissing) as exc:
        assets()
    missing = [n for n in ("kube-apiserver", "etcd") if n not in present]
    assert f"no executable {' or '.join(missing)} in that folder" in str(exc.value)
