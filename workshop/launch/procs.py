"""Process trees: stop a launcher and every rank under it, whatever session each one is in."""

from __future__ import annotations

import subprocess
import time


def stop_tree(pid: int, *, grace_s: float = 5.0) -> None:
    """Stop a launcher and every process under it, whatever session each one is in.

    torchrun starts each rank in a session of its own, so killing torchrun's process group leaves the ranks
    behind (a hung rank then lives on, holding its memory). The tree is read first; the launcher gets SIGTERM
    (torchrun then stops its ranks and cleans up). If the launcher is still alive `grace_s` later, the whole
    tree gets SIGKILL; if it has gone, what outlived it gets SIGTERM of its own (nobody else will send one),
    then SIGKILL after another `grace_s`."""
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    _signal(tree[:1], "terminate")
    _, alive = psutil.wait_procs(tree[:1], timeout=grace_s)
    rest = [p for p in tree[1:] if p.is_running()]
    if not alive:
        _signal(rest, "terminate")
        _, rest = psutil.wait_procs(rest, timeout=grace_s)
    _signal(alive + rest, "kill")
    psutil.wait_procs(alive + rest, timeout=grace_s)


def _signal(procs: list, how: str) -> None:
    """p.terminate() or p.kill() for each process, skipping those already gone."""
    import psutil

    for p in procs:
        try:
            getattr(p, how)()
        except psutil.NoSuchProcess:
            pass


def run_captured(
    cmd: list[str], *, env: dict | None = None, timeout: float | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess:
    """`subprocess.run(cmd, capture_output=True, text=True, timeout=...)` for launchers: on a timeout or an
    interrupt it stops the launcher and all its ranks (stop_tree) before raising, so nothing is left
    running. Each launch is a line of the launch ledger (workshop.launch.ledger) when one is kept."""
    from workshop.launch import ledger

    cpu0, t0 = ledger.children_cpu_s(), time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        stop_tree(proc.pid)
        proc.communicate()
        raise
    ledger.record(cmd, time.monotonic() - t0, ledger.children_cpu_s() - cpu0, exit=proc.returncode)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
