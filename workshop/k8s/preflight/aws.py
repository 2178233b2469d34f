"""The account's side of the preflight (boto3): the EC2 On-Demand vCPU quota the plan needs, and the instance
type offered where it runs.

EC2 On-Demand quotas count vCPUs of running instances per instance class and region (Service Quotas, service
code `ec2`; docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html): L-1216C47A "Running
On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances" (c7i, m7i, r7i), L-417A185B "Running On-Demand P
instances" (p4d, p5), L-DB2E81BA "Running On-Demand G and VT instances" (g5, g6e). What the job may still
start is the quota less the vCPUs of that class's pending and running instances (DescribeInstances); the job
needs nodes x the type's vCPUs (DescribeInstanceTypes).

Offline, moto answers EC2 (offerings, instances, types) but its Service Quotas serves only `vpc` quotas (moto
5.2: NoSuchResourceException for ec2), so there the quota reads "not checked" with the service's answer."""

from __future__ import annotations

import re
from typing import Any

from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, PASS, Check, Requirements
from workshop.lang import N_, _

QUOTA = N_("EC2 On-Demand vCPU quota")
OFFERED = N_("instance type offered in the region")
NAMES = (QUOTA, OFFERED)

# quota class -> (quota code, quota name as Service Quotas names it)
QUOTAS = {
    "standard": ("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
    "p": ("L-417A185B", "Running On-Demand P instances"),
    "g": ("L-DB2E81BA", "Running On-Demand G and VT instances"),
}
# families whose first letter looks standard but which have quotas of their own (DL, Trn, HPC, Mac, ...)
_OWN_QUOTA = ("dl", "trn", "hpc", "mac", "inf", "f", "x", "u")
NO_PLAN = N_("no plan: --plan FILE (from `workshop plan --json`) names the instance type and node count")


def quota_class(instance_type: str) -> str | None:
    """'c7i.48xlarge' -> 'standard', 'p4d.24xlarge' -> 'p', 'g6e.12xlarge' -> 'g'; None for a class with a
    quota of its own that this check does not know (x, u, inf, trn, dl, hpc, mac, f)."""
    prefix = re.match(r"[a-z]+", instance_type.split(".")[0])
    letters = prefix[0] if prefix else ""
    if letters == "p":
        return "p"
    if letters.startswith("g") or letters == "vt":
        return "g"
    if not letters or letters.startswith(_OWN_QUOTA):
        return None
    return "standard" if letters[0] in "acdhimrtz" else None


def _error(exc) -> str:
    """A botocore error as one sentence (its code and message), never a traceback."""
    response = getattr(exc, "response", None) or {}
    err = response.get("Error") or {}
    if err:
        return f"{err.get('Code', type(exc).__name__)}: {err.get('Message', '')}".rstrip(": ")
    return f"{type(exc).__name__}: {exc}"


def _vcpus(ec2, types: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for i in range(0, len(types), 100):
        answer = ec2.describe_instance_types(InstanceTypes=types[i : i + 100])
        for item in answer.get("InstanceTypes") or []:
            out[item["InstanceType"]] = int((item.get("VCpuInfo") or {}).get("DefaultVCpus") or 0)
    return out


def vcpus_in_use(ec2, klass: str) -> tuple[int, int]:
    """(vCPUs, instances) of the class's pending and running instances in the client's region."""
    types: list[str] = []
    for page in ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    ):
        for reservation in page.get("Reservations") or []:
            types += [
                i["InstanceType"]
                for i in reservation.get("Instances") or []
                if quota_class(i["InstanceType"]) == klass
            ]
    sizes = _vcpus(ec2, sorted(set(types))) if types else {}
    return sum(sizes.get(t, 0) for t in types), len(types)


def quota_check(req: Requirements, region: str, *, ec2, quotas) -> Check:
    from botocore.exceptions import BotoCoreError, ClientError

    if not req.instance_type or not req.nodes:
        return Check(QUOTA, NOT_CHECKED, _(NO_PLAN))
    klass = quota_class(req.instance_type)
    if klass is None:
        return Check(
            QUOTA,
            NOT_CHECKED,
            _("{type}'s class has a quota this check does not know; see the Service Quotas console").format(
                type=req.instance_type
            ),
        )
    code, quota_name = QUOTAS[klass]
    try:
        per_node = _vcpus(ec2, [req.instance_type]).get(req.instance_type)
        if not per_node:
            return Check(
                QUOTA,
                NOT_CHECKED,
                _("{region} does not describe {type}").format(region=region, type=req.instance_type),
            )
        value = float(quotas.get_service_quota(ServiceCode="ec2", QuotaCode=code)["Quota"]["Value"])
        used, count = vcpus_in_use(ec2, klass)
    except (ClientError, BotoCoreError) as exc:
        return Check(
            QUOTA,
            NOT_CHECKED,
            _("could not read ec2/{code} ({quota}) in {region}: {error}").format(
                code=code, quota=quota_name, region=region, error=_error(exc)
            ),
        )
    need = req.nodes * per_node
    free = int(value) - used
    said = _(
        "{nodes} x {type} need {need} vCPUs; {code} ({quota}) is {value} in {region}, {used} in use by "
        "{count} instance(s): {free} free"
    ).format(
        nodes=req.nodes,
        type=req.instance_type,
        need=need,
        code=code,
        quota=quota_name,
        value=int(value),
        region=region,
        used=used,
        count=count,
        free=free,
    )
    if need > free:
        return Check(
            QUOTA,
            FAIL,
            said,
            f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
            f"--desired-value {used + need} --region {region} "
            f"(https://console.aws.amazon.com/servicequotas/home/services/ec2/quotas/{code})",
        )
    return Check(QUOTA, PASS, said)


def offered_check(req: Requirements, region: str, *, ec2) -> Check:
    from botocore.exceptions import BotoCoreError, ClientError

    if not req.instance_type:
        return Check(OFFERED, NOT_CHECKED, _(NO_PLAN))
    try:
        zones = sorted(
            o["Location"]
            for page in ec2.get_paginator("describe_instance_type_offerings").paginate(
                LocationType="availability-zone",
                Filters=[{"Name": "instance-type", "Values": [req.instance_type]}],
            )
            for o in page.get("InstanceTypeOfferings") or []
        )
    except (ClientError, BotoCoreError) as exc:
        return Check(
            OFFERED,
            NOT_CHECKED,
            _("could not list offerings in {region}: {error}").format(region=region, error=_error(exc)),
        )
    where = (
        f"aws ec2 describe-instance-type-offerings --location-type region --filters "
        f"Name=instance-type,Values={req.instance_type} --region REGION; or another type: "
        "python -m workshop plan ... --family FAMILY"
    )
    if not zones:
        return Check(
            OFFERED,
            FAIL,
            _("{type} is offered in no zone of {region}").format(type=req.instance_type, region=region),
            where,
        )
    missing = [z for z in req.zones if z not in zones]
    if missing:
        return Check(
            OFFERED,
            FAIL,
            _("{type} is not offered in {missing} (it is in {zones})").format(
                type=req.instance_type, missing=", ".join(missing), zones=", ".join(zones)
            ),
            _("let the NodePool use the zones that offer it (topology.kubernetes.io/zone)"),
        )
    return Check(
        OFFERED,
        PASS,
        _("{type} is offered in {zones}").format(type=req.instance_type, zones=", ".join(zones)),
    )


def credentials_and_region(region: str | None) -> tuple[Any, str | None, str]:
    """(boto3 session, region, '') when both are found; else (None, None, why not)."""
    try:
        import boto3

        session = boto3.Session(region_name=region) if region else boto3.Session()
        creds = session.get_credentials()
    except Exception as exc:  # noqa: BLE001 - any failure to find credentials means "none"
        return None, None, _("no AWS credentials ({error})").format(error=type(exc).__name__)
    if creds is None:
        return None, None, _("no AWS credentials found (`aws configure`, `aws sso login`, or AWS_PROFILE)")
    if not session.region_name:
        return None, None, _("no AWS region: --region, or AWS_REGION")
    return session, session.region_name, ""


def aws_checks(req: Requirements, region: str | None = None, *, ec2=None, quotas=None) -> list[Check]:
    """The quota and the offering; given clients (moto, a Stubber) are used as they are, else the credential
    chain's, and without credentials or a region both are 'not checked' saying which is missing."""
    if ec2 is None or quotas is None:
        session, region, why = credentials_and_region(region)
        if session is None:
            return [Check(name, NOT_CHECKED, why) for name in NAMES]
        from botocore.config import Config

        cfg = Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=5, read_timeout=20)
        ec2 = ec2 or session.client("ec2", config=cfg)
        quotas = quotas or session.client("service-quotas", config=cfg)
    region = region or ec2.meta.region_name
    return [quota_check(req, region, ec2=ec2, quotas=quotas), offered_check(req, region, ec2=ec2)]
