"""A newcomer's first run: a fresh clone with nothing beside it, an empty HOME, no WORKSHOP_CRDS_DIR, no
network.

The CRD schemas ship with the package, so the validation tests and chapters 02, 05 and 06 must VALIDATE there
(a bad NodePool rejected with its field named), never skip. Where this test may (root, `unshare`), the clone
runs in a network namespace of its own with only loopback up: nothing outside this machine is reachable, as
on an air-gapped lab machine or behind a proxy that refuses GitHub.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

CRD_TESTS = [
    "tests/test_crds.py",
    "tests/test_k8s_validate.py",
    "tests/test_trainjob.py",
    "tests/test_render.py",
    "tests/test_storage.py",
]


def _offline() -> tuple[list[str], str]:
    """A command prefix that cuts the network off (a new network namespace, loopback only), and what it is."""
    if os.geteuid() == 0 and shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run(
            ["unshare", "-n", "ip", "link", "set", "lo", "up"], capture_output=True, check=False
        )
        if probe.returncode == 0:
            return [
                "unshare",
                "-n",
                "sh",
                "-c",
                'ip link set lo up && exec "$@"',
                "offline",
            ], "no network at all"
    return [], "network left as it is; CRD downloads pointed at a closed port"


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if not (REPO / ".git").exists():
        pytest.skip("needs a git checkout to clone")
    base = tmp_path_factory.mktemp("newcomer")
    clone = base / "alone" / "workbook"  # its parent holds nothing else: no ../shared
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    home = base / "home"
    home.mkdir()
    from workshop.train.dsprobe import extensions_dir

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("WORKSHOP_CRDS_DIR", "XDG_CACHE_HOME", "PYTHONPATH") and not k.startswith("PYTEST")
    }
    env.update(
        HOME=str(home),
        PYTHONPATH=str(clone),
        WORKSHOP_CRDS_BASE_URL="http://127.0.0.1:9",  # belt and braces where no namespace can be made
        # the compiled-op cache is the compiler's, not data the workbook reads: keep it to save a minute
        TORCH_EXTENSIONS_DIR=str(extensions_dir()),
    )
    return clone, home, env


def test_the_crd_tests_pass_offline_in_a_fresh_clone(clone):
    path, home, env = clone
    prefix, how = _offline()
    r = subprocess.run(
        [*prefix, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CRD_TESTS],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert r.returncode == 0, f"({how})\n" + r.stdout[-4000:] + r.stderr[-2000:]
    assert " passed" in r.stdout.splitlines()[-1] and "skipped" not in r.stdout.splitlines()[-1], r.stdout[
        -500:
    ]
    assert not (home / ".cache" / "workshop" / "crds").exists()  # validated from the package, nothing fetched


def test_chapters_02_05_06_validate_offline_in_a_fresh_clone(clone, tmp_path):
    path, home, env = clone
    prefix, how = _offline()
    out = tmp_path / "out"
    r = subprocess.run(
        [*prefix, sys.executable, "-m", "workshop", "run", "--only", "02", "05", "06", "--out", str(out)],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
        check=False,
    )
    assert r.returncode == 0, f"({how})\n" + r.stdout[-3000:] + r.stderr[-3000:]
    assert "without encryption" not in r.stdout + r.stderr  # the kernel talks over Unix sockets, not TCP
    assert [x["status"] for x in json.loads((out / "index.json").read_text())] == ["ok", "ok", "ok"]
    text = {
        name: (out / "notebooks" / f"{name}.ipynb").read_text()
        for name in ("02_karpenter_setup", "05_multi_node_eks", "06_gpu_topology_comparison")
    }
    for name, body in text.items():
        assert "skipped:" not in body and "Traceback" not in body, name  # ("3 skipped (oldSelf)" is a count)
    assert "Karpenter 1.14.1: valid" in text["02_karpenter_setup"]
    # the lesson itself: the broken NodePool is rejected with its field and rule named
    assert (
        "spec.template.spec.requirements: requirements with operator 'In' must have a value"
        in text["02_karpenter_setup"]
    )
    assert "form v2.1.0 vs CRDs v2.1.0: valid" in text["05_multi_node_eks"]
    assert (
        "podTemplateOverrides" in text["05_multi_node_eks"] and "unknown field" in text["05_multi_node_eks"]
    )
    assert "problems=[]" in text["06_gpu_topology_comparison"]
    assert not (home / ".cache" / "workshop" / "crds").exists()
