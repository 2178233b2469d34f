"""A newcomer's first run: a fresh clone with nothing beside it, an empty HOME, no WORKSHOP_CRDS_DIR, no
network.

The CRD schemas ship with the package, so the validation tests and chapters 02, 05 and 06 must VALIDATE there
(a bad NodePool rejected with its field named), never skip. Where this test may (root, `unshare`), the clone
runs in a network namespace of its own with only loopback up: nothing outside this machine is reachable, as
on an air-gapped lab machine or behind a proxy that refuses GitHub.
"""

import os
import shutil
import subprocess

import pytest

from workshop.paths import REPO

pytestmark = pytest.mark.slow


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


# What a newcomer's clone must do with no network and an empty HOME: every CRD release read from the package,
# the committed manifests matching the typed specs and accepted, and the lessons' refusals (a broken NodePool,
# the v2.1 TrainJob against the v2.2+ CRDs) given with their fields named. The suite's own CRD tests and the
# chapters already ran in this session against the same package files; here only the clone's side is new, so
# the commands that chapters 02, 05 and 06 rely on run once each, in seconds.
OFFLINE_SCRIPT = r"""
set -e
python -m workshop crds status
python -m workshop render --check
python -m workshop validate manifests/*.yaml
python - <<'PY'
import yaml
docs = list(yaml.safe_load_all(open("manifests/karpenter-cpu-amx.yaml")))
pool = next(d for d in docs if d and d["kind"] == "NodePool")
pool["spec"]["template"]["spec"]["requirements"][0]["values"] = []
open("broken-nodepool.yaml", "w").write(yaml.safe_dump(pool))
PY
if python -m workshop validate broken-nodepool.yaml; then echo "BROKEN NODEPOOL ACCEPTED"; exit 1; fi
old=manifests/trainjob-cpu-v2.1.yaml
if python -m workshop validate --trainer 2.3.0 "$old"; then echo "V2.1 ACCEPTED"; exit 1; fi
echo NEWCOMER-OK
"""


def test_a_fresh_clone_validates_offline_from_the_package(clone):
    path, home, env = clone
    prefix, how = _offline()
    r = subprocess.run(
        [*prefix, "bash", "-c", OFFLINE_SCRIPT],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "NEWCOMER-OK" in r.stdout, f"({how})\n" + out[-4000:]
    status = [line for line in r.stdout.splitlines() if line.startswith(("  Karpenter", "  Kubeflow"))]
    assert len(status) >= 4 and all(" package " in line for line in status), r.stdout[:2000]
    assert "all valid:" in r.stdout and "trainjob-cpu-v2.2.yaml" in r.stdout
    # the lesson itself: the broken NodePool is rejected with its field and rule named
    assert "spec.template.spec.requirements" in out and "must have a value" in out, out[-3000:]
    assert "podTemplateOverrides" in out and "unknown field" in out, out[-3000:]
    assert "Traceback" not in out
    assert not (home / ".cache" / "workshop" / "crds").exists()  # validated from the package, nothing fetched
