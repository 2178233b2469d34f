"""Smoke test of the built CPU image (docker/build.sh), network off: the plain tiny job and the TrainJob's
torchrun shape (2 ranks, ZeRO-3, gloo) train in it, with the shared-memory op prebuilt; the same torchrun job
again with an empty TORCH_EXTENSIONS_DIR shows what a pod start paid before. Writes the measured sizes and
start-to-first-step times to benchmarks/results/image.json (the planner's per-node start-up cost reads
`compressed_bytes` and `first_step_s`). Exits non-zero, with the reason, when a job fails or its loss does not
fall.

    python .ci/image_smoke.py [--image workshop-cpu:0.1.0] [--engine podman|docker] [--json-out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TINY = ["-m", "workshop.train", "--model", "tiny", "--max-steps", "5"]
TRAINJOB = ["torchrun", "--nproc-per-node", "2", *TINY, "--zero-stage", "3", "--backend", "gloo"]
# The job runs under this wrapper, which then counts the C++ ops (.so) the job itself compiled.
COUNT_BUILT = (
    'touch /tmp/t0 && "$@" && '
    'echo "BUILT_OPS $(find "$TORCH_EXTENSIONS_DIR" -name "*.so" -newer /tmp/t0 | wc -l)"'
)


def run_flags(engine: str) -> list[str]:
    """Network off; /dev/shm large enough for DeepSpeed's ~66 MB buffer per rank. podman here: runc (crun
    fails on this host's hybrid cgroups) and explicit ulimits (its defaults are too low for torch)."""
    flags = ["run", "--rm", "--network", "none", "--shm-size", "1g"]
    if engine == "podman":
        limits = ["--ulimit", "nofile=16384:16384", "--ulimit", "nproc=16384:16384"]
        flags += ["--runtime", "runc", *limits]
    return flags


def train(engine: str, image: str, cmd: list[str], env: dict[str, str] | None = None) -> dict:
    """Run one job in a fresh container; seconds from `run` to the first METRIC line, the losses, the log."""
    envs = [f for k, v in (env or {}).items() for f in ("-e", f"{k}={v}")]
    argv = [engine, *run_flags(engine), *envs, image, "sh", "-c", COUNT_BUILT, "sh", *cmd]
    t0, first, losses, log = time.monotonic(), None, [], []
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.append(line)
            if line.startswith("METRIC "):
                first = first if first is not None else time.monotonic() - t0
                losses.append(json.loads(line[len("METRIC ") :])["loss"])
    wall = time.monotonic() - t0
    text = "".join(log)
    if proc.returncode or len(losses) < 2 or not losses[-1] < losses[0]:
        sys.exit(f"FAILED: {' '.join(cmd)} (rc {proc.returncode}, losses {losses})\n{text[-3000:]}")
    return {
        "command": " ".join(cmd),
        "first_step_s": round(first or wall, 1),
        "wall_s": round(wall, 1),
        "losses": losses,
        "compiled_shm_op": "BUILT_OPS 0" not in text,
        "op_log": [line.strip()[:160] for line in log if "shm_comm" in line or "BUILT_OPS" in line][:8],
    }


def sizes(engine: str, image: str) -> dict:
    """Uncompressed size, size per layer, and the compressed (gzip) size a registry holds and a node pulls."""
    inspect = subprocess.run([engine, "image", "inspect", image], check=True, capture_output=True, text=True)
    name = json.loads(inspect.stdout)[0]["RepoTags"][0]  # podman: localhost/NAME:TAG, as skopeo needs it
    if engine == "podman":
        hist = subprocess.run(
            [engine, "history", "--format", "json", "--no-trunc", image], check=True, capture_output=True
        )
        rows = [(x["size"], x["CreatedBy"]) for x in json.loads(hist.stdout)]
    else:  # docker: bytes with --human=false
        fmt = ["--format", "{{.Size}}\t{{.CreatedBy}}", "--human=false", "--no-trunc"]
        out = subprocess.run(
            [engine, "history", *fmt, image], check=True, capture_output=True, text=True
        ).stdout
        rows = [(int(size), by) for size, by in (line.split("\t", 1) for line in out.splitlines())]
    layers = [{"bytes": size, "created_by": " ".join(by.split())[:200]} for size, by in rows if size > 0]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        if engine == "podman":
            subprocess.run(
                ["skopeo", "copy", "-q", f"containers-storage:{name}", f"oci:{tmp}/oci"], check=True
            )
            index = json.loads(Path(f"{tmp}/oci/index.json").read_text())
            digest = index["manifests"][0]["digest"].split(":")[1]
            manifest = json.loads(Path(f"{tmp}/oci/blobs/sha256/{digest}").read_text())
            compressed = sum(layer["size"] for layer in manifest["layers"])
        else:  # docker: the saved archive, gzipped as a registry would store its layers
            save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
            gz = subprocess.run(["gzip", "-c"], stdin=save.stdout, capture_output=True, check=True)
            compressed = len(gz.stdout)
    return {
        "uncompressed_bytes": int(json.loads(inspect.stdout)[0]["Size"]),
        "compressed_bytes": compressed,
        "layers": layers,
    }


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--image", default="workshop-cpu:0.1.0")
    p.add_argument(
        "--engine", choices=("podman", "docker"), default="podman" if shutil.which("podman") else "docker"
    )
    p.add_argument("--json-out", type=Path, default=ROOT / "benchmarks/results/image.json")
    a = p.parse_args()
    size = sizes(a.engine, a.image)
    plain = train(a.engine, a.image, ["python", *TINY])
    trainjob = train(a.engine, a.image, TRAINJOB)
    cold = train(a.engine, a.image, TRAINJOB, {"TORCH_EXTENSIONS_DIR": "/tmp/empty-extensions"})
    if trainjob["compiled_shm_op"] or plain["compiled_shm_op"] or not cold["compiled_shm_op"]:
        sys.exit(
            f"FAILED: the prebuilt shared-memory op was not used (or the cold run did not build it): "
            f"{plain['compiled_shm_op']=}, {trainjob['compiled_shm_op']=}, {cold['compiled_shm_op']=}\n"
            + json.dumps({"plain": plain["op_log"], "trainjob": trainjob["op_log"], "cold": cold["op_log"]})
        )
    result = {
        **size,
        "first_step_s": trainjob["first_step_s"],
        "first_step_s_without_prebuilt_op": cold["first_step_s"],
        "what": "seconds from `run` (network off) to the first METRIC line of the TrainJob's shape: "
        "torchrun, 2 ranks, ZeRO-3, gloo, tiny model, 5 steps; without_prebuilt_op: an empty "
        "TORCH_EXTENSIONS_DIR",
        "runs": {"plain": plain, "trainjob": trainjob, "trainjob_without_prebuilt_op": cold},
        "image": a.image,
        "engine": a.engine,
        "measured_on": f"{cpu_model()}, {os.cpu_count()} cores",
        "date": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
    }
    a.json_out.parent.mkdir(parents=True, exist_ok=True)
    a.json_out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("layers", "runs")}, indent=1))
    for name, r in result["runs"].items():
        losses = f"{r['losses'][0]} -> {r['losses'][-1]}"
        print(f"{name}: first step {r['first_step_s']} s, wall {r['wall_s']} s, loss {losses}")


if __name__ == "__main__":
    main()
