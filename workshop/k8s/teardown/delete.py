"""`workshop cluster teardown [--yes]`: list the workbook's objects and, with `yes`, delete them in dependency
order, wait until Karpenter has drained the nodes, and say what is left and what still costs."""

from __future__ import annotations

import time
from collections.abc import Callable

from workshop.errors import WorkshopError, check_positive
from workshop.k8s.api_errors import ClusterError
from workshop.k8s.storage import MODEL_ANNOTATION
from workshop.k8s.teardown.inventory import inventory
from workshop.k8s.teardown.listing import COMMAND, listing
from workshop.k8s.teardown.model import Found, Inventory
from workshop.k8s.teardown.reading import meta_of, why_held
from workshop.k8s.waits import current

Echo = Callable[[str], None]
POLL_S = 10.0  # how often the drain wait looks at the NodeClaims
PROGRESS_S = 60.0  # and prints a line even when nothing changed
EXIT_MODEL = 3
EXIT_TERMINATING = 4


def teardown(
    cluster,
    *,
    yes: bool = False,
    keep_model: bool = False,
    delete_model: bool = False,
    timeout: float = 900,
    namespace: str | None = None,
    echo: Echo = print,
    interval: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """List (and with `yes` delete) the workbook's objects, echoing each line; returns the exit code of
    `workshop cluster teardown` (0 done, 1 a problem, 3 a claim holds a model, 4 still Terminating).
    `timeout` and `interval` are in seconds."""
    if keep_model and delete_model:
        raise WorkshopError(
            "--keep-model and --delete-model are exclusive: keep the trained model, or delete it"
        )
    check_positive("--timeout", timeout)
    interval = POLL_S if interval is None else interval
    inv = inventory(cluster, namespace=namespace)
    for line in listing(inv):
        echo(line)
    holding = inv.with_model
    if holding and yes and not (keep_model or delete_model):
        echo(_stopped(holding))
        return EXIT_MODEL
    kept = holding if keep_model else []
    kept_classes = {f.storage_class for f in kept}
    plan = [
        f for f in inv.found if f not in kept and not (f.kind == "StorageClass" and f.name in kept_classes)
    ]
    if not yes:
        for line in _dry_run(inv, kept, plan, keep_model, delete_model):
            echo(line)
        return 1 if inv.problems else 0

    failures = list(inv.problems)
    plan = _record_models(cluster, kept, plan, failures, echo)
    deadline = clock() + timeout
    deleted, held = _delete_all(cluster, plan, failures, echo)
    _delete_orphan_claims(cluster, inv.orphan_claims, failures, echo)
    pools = sorted({f.name for f in deleted + held if f.kind == "NodePool"} | {n.pool for n in inv.orphans})
    if pools and not _wait_drained(cluster, pools, timeout, interval, echo, clock, sleep):
        failures.append(f"NodeClaims of {', '.join(pools)} still there after {timeout:g} s")
    held = _wait_terminated(cluster, held, deadline, interval, echo, clock, sleep)
    deleted = [f for f in deleted + [f for f in plan if f.terminating] if f not in held]
    _left_behind(deleted, kept, echo)
    return _verdict(deleted, held, pools, failures, timeout, echo)


def _verdict(
    deleted: list[Found], held: list[Found], pools: list[str], failures: list[str], timeout: float, echo: Echo
) -> int:
    """The last line of a `--yes` run, and its exit code: 1 a problem, 4 still Terminating, 0 done."""
    if failures:
        echo(f"Not everything was removed ({len(failures)} problem(s)): " + "; ".join(failures))
        return 1
    if held:
        echo(
            f"Not done: {len(held)} object(s) still Terminating after {timeout:g} s (deletion asked for; "
            "they go when their finalizer is removed): "
            + "; ".join(f"{f.kind} {f.ref}: {f.terminating}" for f in held)
            + f". Exit code {EXIT_TERMINATING}; run `{COMMAND}` again later to see them gone."
        )
        return EXIT_TERMINATING
    echo(
        f"Done: {len(deleted)} object(s) deleted"
        + (", no NodeClaim of the deleted pools left." if pools else ".")
    )
    return 0


def _what(holding: list[Found]) -> str:
    return "; ".join(f"{f.kind} {f.ref}: {', '.join(f.models)}" for f in holding)


def _stopped(holding: list[Found]) -> str:
    """Why `--yes` deleted nothing: a claim holds a model and neither --keep-model nor --delete-model."""
    return (
        f"Stopped, nothing deleted: {_what(holding)}. Deleting the claim would lose the model "
        "(under reclaimPolicy Retain: leave it on a file system no claim mounts). "
        f"Run `{COMMAND} --yes --keep-model` to keep it (and the claim), or "
        f"`{COMMAND} --yes --delete-model` to delete it with everything else."
    )


def _dry_run(
    inv: Inventory, kept: list[Found], plan: list[Found], keep_model: bool, delete_model: bool
) -> list[str]:
    """What `--yes` (with the model flags given) would delete, said after the listing of a dry run."""
    holding = inv.with_model
    if holding and not (keep_model or delete_model):
        held_classes = {h.storage_class for h in holding}
        keeping = [
            f
            for f in inv.found
            if f not in holding and not (f.kind == "StorageClass" and f.name in held_classes)
        ]
        return [
            (
                f"Note: {_what(holding)}. --yes will stop here unless --keep-model (keep the claim and its "
                "file system) or --delete-model (delete them with the rest) is given."
            ),
            (
                f"Dry run: nothing was deleted. `{COMMAND} --yes --keep-model` deletes {len(keeping)} of the "
                f"object(s) above, `{COMMAND} --yes --delete-model` all {len(inv.found)}; either waits until "
                "Karpenter has drained the nodes."
            ),
        ]
    if not inv.found:
        return []
    skip = f" (keeping {', '.join(f.kind + ' ' + f.ref for f in kept)})" if kept else ""
    flag = " --keep-model" if keep_model else " --delete-model" if delete_model else ""
    return [
        (
            f"Dry run: nothing was deleted. `{COMMAND} --yes{flag}` deletes the {len(plan)} object(s) "
            f"above{skip} and waits until Karpenter has drained the nodes."
        )
    ]


def _record_models(
    cluster, kept: list[Found], plan: list[Found], failures: list[str], echo: Echo
) -> list[Found]:
    """Annotate each kept claim with the models only a Complete TrainJob records, before that job goes; a
    job whose claim could not be annotated is kept. Returns the plan without such jobs."""
    for f in kept:
        if not f.unmarked:
            continue
        try:
            patch = {"metadata": {"annotations": f.unmarked}}
            cluster.patch(f.kind, f.name, f.namespace, patch, api_version=f.api_version)
            echo(f"recorded on {f.kind} {f.ref}: " + ", ".join(f"{k}={v}" for k, v in f.unmarked.items()))
        except ClusterError as exc:
            jobs = {(f.namespace, key[len(MODEL_ANNOTATION) :]) for key in f.unmarked}
            plan = [p for p in plan if not (p.kind == "TrainJob" and (p.namespace, p.name) in jobs)]
            failures.append(f"could not record the model on {f.kind} {f.ref}: {exc}")
            echo(
                f"could not annotate {f.kind} {f.ref} ({exc}); TrainJob(s) "
                f"{', '.join(j for _, j in sorted(jobs))} kept: "
                "they are the only record that the claim holds a model"
            )
    return plan


def _delete_orphan_claims(cluster, names: list[str], failures: list[str], echo: Echo) -> None:
    """Delete the NodeClaims of pools that are gone: Karpenter then terminates their instances."""
    for name in names:
        try:
            cluster.delete("NodeClaim", name, api_version="karpenter.sh/v1")
            echo(f"asked Karpenter to terminate NodeClaim {name} (its NodePool is gone)")
        except ClusterError as exc:
            failures.append(f"NodeClaim {name}: {exc}")
            echo(f"could not delete NodeClaim {name}: {exc}")


def _later(items: list[Found]) -> list[str]:
    """The commands that remove kept claims, their StorageClass and what is behind them, later."""
    out = []
    for f in items:
        out.append(f"kubectl delete pvc {f.name} -n {f.namespace}")
        if f.volume is not None:
            out += f.volume.removal()
    out += [
        f"kubectl delete storageclass {sc}"
        for sc in sorted({f.storage_class for f in items if f.storage_class})
    ]
    return out


def _left_behind(deleted: list[Found], kept: list[Found], echo: Echo) -> None:
    """The file systems deleted claims left (Retain: still billed), the claims kept for a model, and the
    commands that end their cost."""
    for f in deleted:
        if f.volume is not None and f.volume.reclaim == "Retain":
            echo(
                f"Left behind by {f.kind} {f.ref} (reclaimPolicy Retain, still billed): PersistentVolume "
                f"{f.volume.name}, {f.volume.describe()}. When you no longer need it: "
                + " && ".join(f.volume.removal())
            )
    if kept:
        echo(
            "Kept for the trained model: "
            + "; ".join(f"{f.kind} {f.ref}, holding {', '.join(f.models)}" for f in kept)
            + ". Remove them later with:"
        )
        for cmd in [f"{COMMAND} --yes --delete-model", "or, by hand:", *_later(kept)]:
            echo(f"  {cmd}")


def _reread(cluster, f: Found) -> dict | None:
    """The object as the server has it now; None when it is gone."""
    return current(cluster, f.kind, f.name, f.namespace, f.api_version)


def _delete_all(cluster, plan: list[Found], failures: list[str], echo) -> tuple[list[Found], list[Found]]:
    """Ask for each deletion, then re-read: (gone, still there because a finalizer holds it). An object that
    was already Terminating is not deleted again: it waits with the others."""
    gone: list[Found] = []
    held: list[Found] = []
    for f in plan:
        if f.terminating:
            echo(f"{f.kind} {f.ref} is already Terminating: {f.terminating}")
            held.append(f)
            continue
        try:
            existed = cluster.delete(f.kind, f.name, f.namespace, api_version=f.api_version)
            now = _reread(cluster, f) if existed else None
        except ClusterError as exc:
            failures.append(f"{f.kind} {f.ref}: {exc}")
            echo(f"could not delete {f.kind} {f.ref}: {exc}")
            continue
        if now is None:
            gone.append(f)
            echo(f"deleted {f.kind} {f.ref}" if existed else f"{f.kind} {f.ref} was already gone")
        else:
            f.terminating = why_held(cluster, f.kind, now)
            held.append(f)
            echo(f"{f.kind} {f.ref}: deletion asked for, Terminating: {f.terminating}")
    return gone, held


def _wait_terminated(cluster, held: list[Found], deadline: float, interval: float, echo, clock, sleep):
    """Poll until every Terminating object is gone or the deadline passes; those still there (their
    finalizers re-read)."""
    while held:
        left = []
        for f in held:
            try:
                now = _reread(cluster, f)
            except ClusterError as exc:
                echo(f"cannot re-read {f.kind} {f.ref}: {exc}")
                left.append(f)
                continue
            if now is None:
                echo(f"deleted {f.kind} {f.ref} (its finalizer was removed)")
            else:
                f.terminating = why_held(cluster, f.kind, now)
                left.append(f)
        held = left
        if not held or clock() + interval > deadline:
            return held
        sleep(interval)
    return held


def _wait_drained(cluster, pools: list[str], timeout: float, interval: float, echo, clock, sleep) -> bool:
    """Poll until no NodeClaim of the deleted pools is left (Karpenter drained and terminated the nodes)."""
    selector = f"karpenter.sh/nodepool in ({','.join(sorted(pools))})"
    deadline = clock() + timeout
    last, last_said = None, -1e18
    while True:
        try:
            left = (
                cluster.get("NodeClaim", api_version="karpenter.sh/v1", label_selector=selector).get("items")
                or []
            )
        except ClusterError as exc:
            if exc.status != 404:
                echo(f"cannot list NodeClaims: {exc}")
                return False
            left = []
        names = sorted(meta_of(c).get("name", "?") for c in left)
        now = clock()
        if not names:
            if last:  # only said when there was something to wait for
                echo("Karpenter has drained the nodes: no NodeClaim of " + ", ".join(pools) + " left")
            return True
        if names != last or now - last_said >= PROGRESS_S:
            echo(
                f"waiting for Karpenter to drain {len(names)} node(s) of {', '.join(pools)}: "
                f"{', '.join(names)} ({max(0.0, deadline - now):.0f} s left)"
            )
            last, last_said = names, now
        if now + interval > deadline:
            echo(
                f"timed out after {timeout:g} s: {len(names)} NodeClaim(s) left ({', '.join(names)}); "
                "Karpenter may still be draining them: "
                "`kubectl get nodeclaims`, `kubectl describe nodeclaim <name>`"
            )
            return False
        sleep(interval)
