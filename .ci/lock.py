"""Refresh constraints.txt on purpose: resolve pyproject.toml's ranges (test, lab, dev extras) to their
newest versions with uv, torch held at the version CI tests (its CPU wheel), and write or compare the lock.

    python .ci/lock.py            # rewrite constraints.txt (then run the whole suite before committing it)
    python .ci/lock.py --check    # report what is newer than the lock; exit 0 either way (CI prints it)
"""

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "constraints.txt"
HEADER = [line for line in LOCK.read_text().splitlines() if line.startswith("#")] if LOCK.exists() else []


def pins(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2).split("+")[0]
    return out


def resolve() -> str:
    torch = pins(LOCK.read_text()).get("torch", "2.13.0")
    with tempfile.TemporaryDirectory() as tmp:
        override = Path(tmp) / "override.txt"
        override.write_text(f"torch=={torch}\n")
        out = Path(tmp) / "lock.txt"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "uv",
                "pip",
                "compile",
                str(REPO / "pyproject.toml"),
                "--extra",
                "test",
                "--extra",
                "lab",
                "--extra",
                "dev",
                "--python-version",
                "3.11",
                "--python-platform",
                "x86_64-unknown-linux-gnu",
                "--override",
                str(override),
                "--no-header",
                "--no-annotate",
                "-q",
                "-o",
                str(out),
            ],
            check=True,
            cwd=REPO,
        )
        return "\n".join(
            line.split("+")[0] if line.startswith("torch==") else line
            for line in out.read_text().splitlines()
            if not line.startswith(("-e", "workshop"))
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true")
    a = p.parse_args()
    new = resolve()
    if a.check:
        old, fresh = pins(LOCK.read_text()), pins(new)
        behind = sorted(f"{n} {old[n]} -> {v}" for n, v in fresh.items() if n in old and old[n] != v)
        print(
            f"constraints.txt: {len(behind)} package(s) have newer releases"
            + (": " + ", ".join(behind) if behind else "")
            + " (refresh on purpose: python .ci/lock.py)"
        )
        return 0
    LOCK.write_text("\n".join(HEADER + [new]) + "\n")
    print(f"wrote {LOCK} ({len(pins(new))} pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
