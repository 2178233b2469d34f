"""The account's side of the preflight: moto answers EC2 (offerings, instances, types) offline; its Service
Quotas serves only vpc quotas, so the quota arithmetic is tested with botocore's Stubber answering
GetServiceQuota while moto runs the instances that use the quota."""

from __future__ import annotations

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from workshop.k8s import preflight
from workshop.k8s.preflight import aws
from workshop.k8s.preflight.model import FAIL, NOT_CHECKED, PASS

REGION = "us-east-1"


@pytest.fixture()
def clients(monkeypatch):
    for var, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        monkeypatch.setenv(var, value)
    with mock_aws():
        yield boto3.client("ec2", region_name=REGION), boto3.client("service-quotas", region_name=REGION)


def _req(instance_type="c7i.48xlarge", nodes=4, device="cpu", zones=()):
    plan = {"instance_type": instance_type, "nodes": nodes, "device": device}
    return preflight.requirements_from_plan(plan, zones=zones)


def _quota(quotas, code, value):
    stub = Stubber(quotas)
    stub.add_response(
        "get_service_quota",
        {"Quota": {"ServiceCode": "ec2", "QuotaCode": code, "Value": float(value)}},
        {"ServiceCode": "ec2", "QuotaCode": code},
    )
    stub.activate()
    return stub


def _run_instances(ec2, instance_type, count):
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.run_instances(ImageId=image, InstanceType=instance_type, MinCount=count, MaxCount=count)


@pytest.mark.parametrize(
    ("instance_type", "klass"),
    [
        ("c7i.48xlarge", "standard"),
        ("m7i-flex.large", "standard"),
        ("r7iz.metal-16xl", "standard"),
        ("i4i.large", "standard"),
        ("z1d.large", "standard"),
        ("p4d.24xlarge", "p"),
        ("p5.48xlarge", "p"),
        ("g6e.12xlarge", "g"),
        ("g5g.xlarge", "g"),
        ("vt1.3xlarge", "g"),
        ("trn1.32xlarge", None),
        ("inf2.xlarge", None),
        ("dl1.24xlarge", None),
        ("hpc7a.96xlarge", None),
        ("x2idn.16xlarge", None),
        ("u-6tb1.metal", None),
        ("mac1.metal", None),
    ],
)
def test_each_type_counts_against_its_quota_class(instance_type, klass):
    assert aws.quota_class(instance_type) == klass


def test_under_moto_ec2_quotas_are_not_checked_and_the_offering_is(clients):
    ec2, quotas = clients
    quota, offered = aws.aws_checks(_req(), REGION, ec2=ec2, quotas=quotas)
    assert quota.verdict == NOT_CHECKED
    assert "ec2/L-1216C47A" in quota.detail and "NoSuchResourceException" in quota.detail
    assert offered.verdict == PASS and "us-east-1a" in offered.detail


def test_a_type_offered_in_no_zone_of_the_region_fails_with_how_to_find_one(clients, monkeypatch):
    ec2 = boto3.client("ec2", region_name="af-south-1")
    check = aws.offered_check(_req("p5.48xlarge", 2, "gpu"), "af-south-1", ec2=ec2)
    assert check.verdict == FAIL and "p5.48xlarge is offered in no zone of af-south-1" == check.detail
    assert "describe-instance-type-offerings" in check.fix


def test_a_zone_the_plan_needs_that_lacks_the_type_fails_naming_it(clients):
    ec2 = boto3.client("ec2", region_name="sa-east-1")
    check = aws.offered_check(_req("p5.48xlarge", 2, "gpu", zones=("sa-east-1a",)), "sa-east-1", ec2=ec2)
    assert check.verdict == FAIL and "not offered in sa-east-1a (it is in sa-east-1c)" in check.detail


def test_the_quota_counts_the_plan_against_what_is_free(clients):
    ec2, quotas = clients
    _run_instances(ec2, "c7i.48xlarge", 1)  # 192 vCPUs of the standard class already running
    _run_instances(ec2, "p4d.24xlarge", 1)  # another class: not counted against the standard quota
    with _quota(quotas, "L-1216C47A", 1000):
        check = aws.quota_check(_req(nodes=4), REGION, ec2=ec2, quotas=quotas)
    assert check.verdict == PASS, check
    assert "4 x c7i.48xlarge need 768 vCPUs" in check.detail
    assert "is 1000 in us-east-1, 192 in use by 1 instance(s): 808 free" in check.detail
    with _quota(quotas, "L-1216C47A", 900):
        check = aws.quota_check(_req(nodes=4), REGION, ec2=ec2, quotas=quotas)
    assert check.verdict == FAIL and "708 free" in check.detail
    assert "--quota-code L-1216C47A --desired-value 960 --region us-east-1" in check.fix
    assert "servicequotas/home/services/ec2/quotas/L-1216C47A" in check.fix


def test_a_gpu_plan_reads_the_p_quota(clients):
    ec2, quotas = clients
    with _quota(quotas, "L-417A185B", 96) as stub:
        check = aws.quota_check(_req("p4d.24xlarge", 2, "gpu"), REGION, ec2=ec2, quotas=quotas)
        stub.assert_no_pending_responses()
    assert check.verdict == FAIL and "2 x p4d.24xlarge need 192 vCPUs" in check.detail
    assert "Running On-Demand P instances" in check.detail


def test_a_refused_quota_read_is_not_checked_with_the_services_words(clients):
    ec2, quotas = clients
    stub = Stubber(quotas)
    stub.add_client_error("get_service_quota", "AccessDeniedException", "not authorized to GetServiceQuota")
    with stub:
        check = aws.quota_check(_req(), REGION, ec2=ec2, quotas=quotas)
    assert check.verdict == NOT_CHECKED and "AccessDeniedException: not authorized" in check.detail


def test_without_a_plan_there_is_nothing_to_compare(clients):
    ec2, quotas = clients
    checks = aws.aws_checks(preflight.requirements_from_plan(None), REGION, ec2=ec2, quotas=quotas)
    assert [c.verdict for c in checks] == [NOT_CHECKED, NOT_CHECKED]
    assert all("--plan FILE" in c.detail for c in checks)


def test_with_credentials_but_no_region_both_say_so(monkeypatch, tmp_path):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    for var in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    checks = aws.aws_checks(_req())
    assert [c.verdict for c in checks] == [NOT_CHECKED, NOT_CHECKED]
    assert all("no AWS region" in c.detail for c in checks)
