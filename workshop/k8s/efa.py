"""EFA's network prerequisites, as checks: the security group's self-referencing rule and `fi_info -p efa`.

EFA (and gloo/NCCL over it, and FSx for Lustre) needs every node to reach every other node on all protocols
and ports: one inbound and one outbound rule on the nodes' security group whose source/destination is the
group itself. Without it the job hangs at the first collective, not with an error. The original workshop said
so in a sentence; here it is checked, and added when missing (boto3; tested against moto).
"""

from __future__ import annotations

import re

from workshop.errors import WorkshopError

_SG = re.compile(r"^sg-[0-9a-f]{8,17}$")


def _ec2(ec2=None, region: str | None = None):
    if ec2 is not None:
        return ec2
    import boto3

    return boto3.client("ec2", region_name=region)


def _self_all(perms: list[dict], sg_id: str) -> bool:
    return any(
        p.get("IpProtocol") == "-1" and any(g.get("GroupId") == sg_id for g in p.get("UserIdGroupPairs", []))
        for p in perms
    )


def self_rule_status(sg_id: str, *, ec2=None) -> dict[str, bool]:
    """{'ingress': bool, 'egress': bool}: does the group allow all traffic from/to itself?"""
    if not _SG.match(str(sg_id)):
        raise WorkshopError(f"security group {sg_id!r} is not an id such as sg-0abc12345def67890")
    groups = _ec2(ec2).describe_security_groups(GroupIds=[sg_id])["SecurityGroups"]
    if not groups:
        raise WorkshopError(f"security group {sg_id} not found in this account/region")
    sg = groups[0]
    return {
        "ingress": _self_all(sg.get("IpPermissions", []), sg_id),
        "egress": _self_all(sg.get("IpPermissionsEgress", []), sg_id),
    }


def ensure_self_rule(sg_id: str, *, ec2=None, dry_run: bool = False) -> list[str]:
    """Add the missing self-referencing all-traffic rule(s); returns which were added ([] = already there)."""
    client = _ec2(ec2)
    status = self_rule_status(sg_id, ec2=client)
    perm = [
        {
            "IpProtocol": "-1",
            "UserIdGroupPairs": [{"GroupId": sg_id, "Description": "EFA: all traffic within the group"}],
        }
    ]
    added = []
    if not status["ingress"]:
        if not dry_run:
            client.authorize_security_group_ingress(GroupId=sg_id, IpPermissions=perm)
        added.append("ingress")
    if not status["egress"]:
        if not dry_run:
            client.authorize_security_group_egress(GroupId=sg_id, IpPermissions=perm)
        added.append("egress")
    return added


def node_security_groups(cluster_name: str, *, ec2=None) -> list[str]:
    """The groups Karpenter gives the nodes: those tagged karpenter.sh/discovery=<cluster> (the EC2NodeClass's
    selector)."""
    resp = _ec2(ec2).describe_security_groups(
        Filters=[{"Name": "tag:karpenter.sh/discovery", "Values": [cluster_name]}]
    )
    return sorted(g["GroupId"] for g in resp["SecurityGroups"])


def fi_info_command(pod: str, namespace: str = "default", container: str = "node") -> list[str]:
    """Run inside a GPU node pod: `fi_info -p efa` lists one provider entry per EFA device the pod got. An
    empty answer ("fi_getinfo: -61") means the pod has no EFA device: check its `vpc.amazonaws.com/efa`
    limit.

    Returns the argv (a list of strings, for subprocess) of that `kubectl exec`; runs nothing."""
    return [
        "kubectl",
        "exec",
        "-n",
        namespace,
        pod,
        "-c",
        container,
        "--",
        "fi_info",
        "-p",
        "efa",
        "-t",
        "FI_EP_RDM",
    ]


def count_efa_devices(fi_info_output: str) -> int:
    """Distinct EFA domains in `fi_info -p efa` output (one per device: rdmap16s27-rdm, ...)."""
    return len(set(re.findall(r"domain:\s*(\S+)", fi_info_output)))
