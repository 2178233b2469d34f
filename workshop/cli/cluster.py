"""`python -m workshop cluster status|apply|delete|watch|logs|teardown|preflight`: parse, judge every input
before any connection, call the cluster layer (or the teardown), print."""

from __future__ import annotations

import argparse
from pathlib import Path

from workshop.cli.args import summary
from workshop.cli.base import command
from workshop.errors import WorkshopError, check_choice, check_positive
from workshop.k8s.base import check_dns_label, read_yaml_docs
from workshop.k8s.cluster import Cluster, connect
from workshop.k8s.kubeconfig import check_kubeconfig
from workshop.k8s.logs import follow_logs, pod_waiting
from workshop.k8s.teardown.delete import EXIT_TERMINATING, teardown
from workshop.k8s.teardown.reading import why_held
from workshop.k8s.trainer_admission import missing_on_cluster
from workshop.k8s.validate import ensure_valid
from workshop.k8s.waits import settle
from workshop.lang import _

TEARDOWN_DESCRIPTION = (
    "List every object the workbook created (label app.kubernetes.io/part-of=workshop or field manager "
    "workshop) with what it costs; --yes deletes them in dependency order and waits until Karpenter has "
    "drained the nodes."
)
PREFLIGHT_DESCRIPTION = (
    "Check what a job needs before it is submitted, one verdict per check: pass, FAIL (with the command or "
    "page that fixes it), not checked (and why) or not needed. With a kubeconfig: the server, Karpenter, "
    "Kubeflow Trainer + JobSet and the torch-distributed runtime, the FSx CSI driver, the GPU device "
    "plugins; with AWS credentials: the EC2 vCPU quota and the type's offering; with HF_TOKEN: access to "
    "gated weights."
)
TEARDOWN_EPILOG = (
    "exit codes: 0 done, 1 something could not be listed or removed, 2 bad flags or no cluster, "
    "3 stopped (nothing deleted): a claim holds a trained model, 4 deletion asked for but objects are still "
    "Terminating at the timeout (a finalizer holds them; each is named)"
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="workshop cluster", description=summary(__doc__))
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
    _teardown_parser(sub)
    _preflight_parser(sub)
    return parser


def _preflight_parser(sub) -> None:
    p = sub.add_parser(
        "preflight",
        help="before a job: check the cluster, the AWS account and the Hub token (reads only)",
        description=PREFLIGHT_DESCRIPTION,
        epilog="exit codes: 0 nothing failed (some checks may be 'not checked'), 1 a check failed, "
        "2 bad input",
    )
    p.add_argument(
        "--plan", metavar="FILE", help="a plan file (`workshop plan --json > FILE`; its first plan)"
    )
    p.add_argument("--kubeconfig", dest="preflight_kubeconfig", metavar="KUBECONFIG")
    p.add_argument("--context", dest="preflight_context", metavar="CONTEXT")
    p.add_argument("--region", help="AWS region of the quota and offering checks (default: boto3's)")
    p.add_argument("--storage", help="where the outputs go: fsx or s3 (default: the plan file's, else none)")
    p.add_argument("--trainer-version", help="the Kubeflow Trainer release the job is rendered for")
    p.add_argument("--model", help="the model (a hub id is checked for gated access with HF_TOKEN)")
    p.add_argument("--zone", action="append", default=[], help="an availability zone the nodes must use")
    p.add_argument(
        "--manifests",
        metavar="DIR",
        help="the folder `workshop render --plan` wrote: its subnet, security group, registry and S3 prefix "
        "must be yours, not the examples (and its pool's zone is checked)",
    )


def _teardown_parser(sub) -> None:
    p_down = sub.add_parser(
        "teardown",
        help="list what the workbook created and what it costs; --yes removes it",
        description=TEARDOWN_DESCRIPTION,
        epilog=TEARDOWN_EPILOG,
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


def _manifests(files: list[str]) -> list[dict]:
    """Every document of the files, each with a kind and a metadata.name."""
    docs = []
    for f in files:
        for i, doc in enumerate(read_yaml_docs(f), 1):
            if (
                not doc.get("kind")
                or not isinstance(doc.get("metadata"), dict)
                or not doc["metadata"].get("name")
            ):
                raise WorkshopError(f"manifest file {f!r}: document {i} has no kind or no metadata.name")
            docs.append(doc)
    return docs


def _check(args: argparse.Namespace, docs: list[dict]) -> None:
    """Every input judged before any connection: a bad file or value never reaches a cluster."""
    if args.action == "apply":
        ensure_valid(docs)
        if not args.field_manager or len(args.field_manager) > 128:
            raise WorkshopError(f"--field-manager {args.field_manager!r} must be 1-128 characters")
    if args.action in ("watch", "teardown"):
        check_positive("--timeout", args.timeout)
    if args.action == "logs":
        check_positive("--wait", args.wait)
    if args.action == "teardown" and args.namespace is not None:
        check_dns_label("--namespace", args.namespace)


@command
def cluster(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.kubeconfig is not None:
        check_kubeconfig(args.kubeconfig, "--kubeconfig")
    if args.action == "preflight":
        return _preflight(args)
    docs = _manifests(getattr(args, "files", None) or [])
    _check(args, docs)
    if args.action == "teardown":
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
    reached = connect(kubeconfig=args.kubeconfig, context=args.context)
    if reached is None:
        return 1
    if args.action == "apply":
        for line in missing_on_cluster(reached, docs):  # what no admission checks, said before sending
            print(f"warning: {line}")
        for result in reached.apply(
            docs, dry_run=args.dry_run, field_manager=args.field_manager, force=args.force_conflicts
        ):
            print(result)
    elif args.action == "delete":
        return _delete(reached, docs)
    elif args.action == "watch":
        check_choice("watch target", args.what, ("nodeclaims", "nodes"))
        watcher = reached.watch_nodeclaims if args.what == "nodeclaims" else reached.watch_nodes
        for line in watcher(timeout=args.timeout):
            print(line, flush=True)
    elif args.action == "logs":
        _logs(reached, args.pod, args.namespace, follow=args.follow, wait_s=args.wait)
    return 0


def _delete(reached: Cluster, docs: list[dict]) -> int:
    """Delete each manifest's object and say which went; 4 when a finalizer keeps one Terminating."""
    asked = []
    for doc in docs:
        meta = doc.get("metadata") or {}
        if reached.delete(
            doc["kind"], meta["name"], meta.get("namespace"), api_version=doc.get("apiVersion")
        ):
            asked.append(doc)
        else:
            print(f"{doc['kind']}/{meta['name']} was not there")
    left = settle(reached, asked)
    for doc in asked:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if id(doc) in left:  # a finalizer holds it: not deleted yet, and said so
            print(f"{name}: deletion asked for, Terminating: {why_held(reached, doc['kind'], left[id(doc)])}")
        else:
            print(f"{name} deleted")
    return EXIT_TERMINATING if left else 0


def _logs(reached: Cluster, pod: str, namespace: str, *, follow: bool, wait_s: float) -> None:
    if follow:
        for line in follow_logs(reached, pod, namespace, wait_s=wait_s):
            print(line, flush=True)
        return
    text = reached.logs(pod, namespace)
    if not text:
        why = pod_waiting(reached, pod, namespace)
        print(f"no log yet: pod {namespace}/{pod} " + (f"is {why}" if why else "printed nothing"))
    for line in text.splitlines():
        print(line, flush=True)


def _rendered_site(folder: str) -> list[str]:
    """The zones a rendered folder's pools pin, after refusing its example values (one error naming the
    field)."""
    from workshop.k8s.site import refuse_examples, values_in

    files = sorted(Path(folder).glob("*.yaml")) if Path(folder).is_dir() else []
    if not files:
        raise WorkshopError(
            _("--manifests {dir}: no YAML files there (render them with `workshop render --plan`)").format(
                dir=folder
            )
        )
    docs = _manifests([str(f) for f in files])
    refuse_examples(values_in(docs))
    return sorted(
        {
            zone
            for doc in docs
            if doc.get("kind") == "NodePool"
            for req in doc["spec"]["template"]["spec"].get("requirements", [])
            if req.get("key") == "topology.kubernetes.io/zone"
            for zone in req.get("values", [])
        }
    )


def _preflight(args: argparse.Namespace) -> int:
    """Every input judged first (one `error:` line, exit 2); then the report, exit 1 when a check failed."""
    from workshop.k8s import preflight
    from workshop.k8s.preflight.model import read_plan_file
    from workshop.plan.catalog import known_regions

    kubeconfig = args.preflight_kubeconfig or args.kubeconfig
    if kubeconfig is not None:
        check_kubeconfig(kubeconfig, "--kubeconfig")
    if args.region is not None:
        check_choice("--region", args.region, known_regions("aws"))
    zones = list(args.zone)
    if args.manifests is not None:
        zones += _rendered_site(args.manifests)
    plan: object = read_plan_file(args.plan) if args.plan else None
    if isinstance(plan, dict) and str(plan.get("format", "")).startswith("workshop-plan/"):
        from workshop.plan.job import load_plan

        plan = load_plan(args.plan)  # a plan file is checked whole (each bad field named) before it is used
    needs = preflight.requirements_from_plan(
        plan,
        storage=args.storage,
        trainer_version=args.trainer_version,
        model=args.model,
        zones=zones,
        source=_("plan file {path}").format(path=args.plan) if args.plan else None,
    )
    report = preflight.run(
        needs, kubeconfig=kubeconfig, context=args.preflight_context or args.context, region=args.region
    )
    print(report)
    return report.exit_code
