"""`python -m workshop cluster status|apply|delete|watch|logs|teardown`: parse, judge every input before any
connection, call the cluster layer (or the teardown), print."""

from __future__ import annotations

import argparse
import sys
import time

from workshop.errors import WorkshopError, check_choice, check_positive, report
from workshop.k8s.base import check_dns_label, read_yaml_docs
from workshop.k8s.cluster import ClusterError, check_kubeconfig, connect, follow_logs, pod_waiting
from workshop.k8s.teardown import EXIT_TERMINATING, finalizer_text, teardown
from workshop.k8s.validate import ensure_valid

# `cluster delete`: how long a deleted object may take to go before it is called Terminating
SETTLE_S = 10.0


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(prog="workshop cluster", description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--context")
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("status", help="connect and print the server version")
    p_apply = sub.add_parser("apply", help="validate, then server-side apply YAML files")
    p_apply.add_argument("files", nargs="+")
    p_apply.add_argument("--dry-run", action="store_true", help="server-side dry run (nothing stored)")
    p_apply.add_argument("--field-manager", default="workshop")
    p_apply.add_argument(
        "--force-conflicts", action="store_true", help="take over fields another manager owns"
    )
    p_watch = sub.add_parser("watch", help="print NodeClaim or Node changes until the timeout")
    p_watch.add_argument("what", choices=["nodeclaims", "nodes"])
    p_watch.add_argument("--timeout", type=float, default=600)
    p_logs = sub.add_parser("logs", help="print (or follow) a pod's log")
    p_logs.add_argument("pod")
    p_logs.add_argument("-n", "--namespace", default="default")
    p_logs.add_argument("-f", "--follow", action="store_true")
    p_logs.add_argument(
        "--wait",
        type=float,
        default=900,
        help="with -f: seconds to wait for a pod not yet scheduled or started (default 900)",
    )
    p_del = sub.add_parser(
        "delete",
        help="delete the objects of YAML files (exit 4 when a finalizer keeps one Terminating: named)",
    )
    p_del.add_argument("files", nargs="+")
    p_down = sub.add_parser(
        "teardown",
        help="list what the workbook created and what it costs; --yes removes it",
        description="List every object the workbook created (label app.kubernetes.io/part-of="
        "workshop or field manager workshop) with what it costs; --yes deletes them "
        "in dependency order and waits until Karpenter has drained the nodes.",
        epilog="exit codes: 0 done, 1 something could not be listed or removed, 2 bad flags or "
        "no cluster, 3 stopped (nothing deleted): a claim holds a trained model, 4 deletion asked for but "
        "objects are still Terminating at the timeout (a finalizer holds them; each is named)",
    )
    p_down.add_argument("--yes", action="store_true", help="delete (without it: a dry run that only lists)")
    model = p_down.add_mutually_exclusive_group()
    model.add_argument(
        "--keep-model",
        action="store_true",
        help="keep claims that hold a trained model (and their FSx file system); delete the rest",
    )
    model.add_argument(
        "--delete-model", action="store_true", help="delete claims that hold a trained model too"
    )
    p_down.add_argument(
        "--timeout",
        type=float,
        default=900,
        help="seconds to wait for Karpenter to drain the deleted pools' nodes and for Terminating objects "
        "to go (default 900)",
    )
    p_down.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="only this namespace's TrainJobs, claims and Secrets (default: every namespace)",
    )
    args = parser.parse_args(argv)
    try:
        # every input is judged before any connection: a bad file or value never reaches a cluster
        if args.kubeconfig is not None:
            check_kubeconfig(args.kubeconfig, "--kubeconfig")
        docs = []
        for f in getattr(args, "files", None) or []:
            for i, doc in enumerate(read_yaml_docs(f), 1):
                if (
                    not doc.get("kind")
                    or not isinstance(doc.get("metadata"), dict)
                    or not doc["metadata"].get("name")
                ):
                    raise WorkshopError(f"manifest file {f!r}: document {i} has no kind or no metadata.name")
                docs.append(doc)
        if args.action == "apply":
            ensure_valid(docs)
            if not args.field_manager or len(args.field_manager) > 128:
                raise WorkshopError(f"--field-manager {args.field_manager!r} must be 1-128 characters")
        if args.action in ("watch", "teardown"):
            check_positive("--timeout", args.timeout)
        if args.action == "logs":
            check_positive("--wait", args.wait)
        if args.action == "teardown":
            if args.namespace is not None:
                check_dns_label("--namespace", args.namespace)
            # no cluster is an error here (exit 2), not an offline fallback: there is nothing to list
            found = connect(kubeconfig=args.kubeconfig, context=args.context, required=True)
            return teardown(
                found,
                yes=args.yes,
                keep_model=args.keep_model,
                delete_model=args.delete_model,
                timeout=args.timeout,
                namespace=args.namespace,
            )
        cluster = connect(kubeconfig=args.kubeconfig, context=args.context)
        if cluster is None:
            return 1
        if args.action == "apply":
            for result in cluster.apply(
                docs, dry_run=args.dry_run, field_manager=args.field_manager, force=args.force_conflicts
            ):
                print(result)
        elif args.action == "delete":
            asked = []
            for doc in docs:
                meta = doc.get("metadata") or {}
                if cluster.delete(
                    doc["kind"], meta["name"], meta.get("namespace"), api_version=doc.get("apiVersion")
                ):
                    asked.append(doc)
                else:
                    print(f"{doc['kind']}/{meta['name']} was not there")
            left = _settle(cluster, asked)
            for doc in asked:
                name = f"{doc['kind']}/{doc['metadata']['name']}"
                if id(doc) in left:  # a finalizer holds it: not deleted yet, and said so
                    print(f"{name}: deletion asked for, Terminating: {finalizer_text(left[id(doc)])}")
                else:
                    print(f"{name} deleted")
            if left:
                return EXIT_TERMINATING
        elif args.action == "watch":
            check_choice("watch target", args.what, ("nodeclaims", "nodes"))
            watcher = cluster.watch_nodeclaims if args.what == "nodeclaims" else cluster.watch_nodes
            for line in watcher(timeout=args.timeout):
                print(line, flush=True)
        elif args.action == "logs":
            if args.follow:
                for line in follow_logs(cluster, args.pod, args.namespace, wait_s=args.wait):
                    print(line, flush=True)
            else:
                text = cluster.logs(args.pod, args.namespace)
                if not text:
                    why = pod_waiting(cluster, args.pod, args.namespace)
                    print(
                        f"no log yet: pod {args.namespace}/{args.pod} "
                        + (f"is {why}" if why else "printed nothing")
                    )
                for line in text.splitlines():
                    print(line, flush=True)
    except WorkshopError as exc:
        return report(exc)
    return 0


def _still_there(cluster, doc: dict) -> dict | None:
    """The object as the server has it after a delete; None once it is gone."""
    meta = doc.get("metadata") or {}
    try:
        return cluster.get(
            doc["kind"], meta["name"], meta.get("namespace"), api_version=doc.get("apiVersion")
        )
    except ClusterError as exc:
        if exc.status == 404:
            return None
        raise


def _settle(cluster, docs: list[dict], interval: float = 0.5) -> dict[int, dict]:
    """id(doc) -> the object, for those still there after up to SETTLE_S seconds: a controller often
    removes a finalizer within a second of the DELETE (kube-controller-manager's pvc-protection for a claim
    no pod mounts), so an immediate re-read would call Terminating what is gone a moment later."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        left = {id(d): obj for d in docs if (obj := _still_there(cluster, d)) is not None}
        if not left or time.monotonic() + interval > deadline:
            return left
        docs = [d for d in docs if id(d) in left]
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
