"""Process trees: stop a launcher and every rank under it, whatever session each one is in."""

from __future__ import annotations

import subprocess


def stop_tree(pid: int, *, grace_s: float = 5.0) -> None:
    """Stop a launcher and every process under it, whatever session each one is in.

    torchrun starts each rank in a session of its own, so killing torchrun's process group leaves the ranks
    behind (a hung rank then lives on, holding its memory). The tree is read first; the launcher gets SIGTERM
    (torchrun then stops its ranks and cleans up), and whatever is still alive after `grace_s` gets
    SIGKILL."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    try:
        root.terminate()
    except psutil.NoSuchProcess:
        pass
    _, alive = psutil.wait_procs(tree, timeout=grace_s)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=grace_s)


def run_captured(
    cmd: list[str], *, env: dict | None = None, timeout: float | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True, timeout=...)` for launchers: on a timeout or an
    interrupt it stops the launcher and all its ranks (stop_tree) before raising, so nothing is left
    running."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop_tree(proc.pid)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
