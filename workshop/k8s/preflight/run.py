"""All the preflight checks for one job: the cluster's (with a kubeconfig that reaches it), the account's
(with AWS credentials) and the Hub's (with HF_TOKEN); a part whose input is missing is 'not checked', each
check saying why."""

from __future__ import annotations

from workshop.k8s.cluster import NoCluster, connect
from workshop.k8s.preflight.aws import aws_checks
from workshop.k8s.preflight.cluster import cluster_checks, unchecked
from workshop.k8s.preflight.hub import hub_check
from workshop.k8s.preflight.model import Report, Requirements


def run(
    req: Requirements,
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    region: str | None = None,
    cluster=None,
    ec2=None,
    quotas=None,
    hub_endpoint: str | None = None,
    hf_token: str | None = None,
) -> Report:
    """A Report with one verdict per check. `cluster`, `ec2`/`quotas` and `hub_endpoint` are for tests and
    notebooks that hold them already; otherwise the kubeconfig, boto3's credential chain and the Hub."""
    report = Report(req)
    if cluster is None:
        try:
            cluster = connect(kubeconfig=kubeconfig, context=context, quiet=True, required=True)
        except NoCluster as exc:
            report.checks += unchecked(req, exc.reason)
    if cluster is not None:
        report.checks += cluster_checks(cluster, req)
    report.checks += aws_checks(req, region, ec2=ec2, quotas=quotas)
    report.checks.append(hub_check(req.model, token=hf_token, endpoint=hub_endpoint))
    return report
