"""S3 as the durable output store (moto): upload with the marker last, restore the newest complete checkpoint,
prune; and the EFA security group's self-referencing rule."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from workshop.errors import WorkshopError
from workshop.k8s import efa
from workshop.train import outputs


@pytest.fixture
def s3(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(k, "testing")
    with mock_aws():
        client = boto3.client("s3")
        client.create_bucket(Bucket="ckpts", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        yield client


def _ckpt(root, step, complete=True):
    d = root / f"checkpoint-{step}"
    (d / f"global_step{step}").mkdir(parents=True)
    (d / f"global_step{step}" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").write_bytes(b"x" * step)
    (d / "model.safetensors").write_bytes(b"w")
    if complete:
        (d / "trainer_state.json").write_text(f'{{"global_step": {step}}}')
    return d


def test_upload_restore_prune(s3, tmp_path):
    uri = "s3://ckpts/runs/job-a"
    for step in (2, 4):
        assert outputs.upload_dir(_ckpt(tmp_path / "node", step), uri, client=s3) == 3
    outputs.upload_dir(_ckpt(tmp_path / "node", 6, complete=False), uri, client=s3)  # killed mid-save
    assert sorted(outputs.remote_checkpoints(uri, client=s3)) == [2, 4, 6]
    fresh = tmp_path / "restarted"
    got = outputs.restore_latest(uri, fresh, client=s3)
    assert got == fresh / "checkpoint-4"  # the newest COMPLETE one, not the half-written 6
    assert (got / "global_step4" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").read_bytes() == b"xxxx"
    assert (got / "trainer_state.json").is_file()
    from transformers.trainer_utils import get_last_checkpoint

    assert get_last_checkpoint(str(fresh)) == str(got)  # what --resume then finds
    assert outputs.prune(uri, 1, client=s3) == [2, 4]
    assert sorted(outputs.remote_checkpoints(uri, client=s3)) == [6]
    assert outputs.restore_latest("s3://ckpts/other", tmp_path / "none", client=s3) is None


def test_marker_is_uploaded_last_or_not_at_all(s3, tmp_path):
    uri = "s3://ckpts/r"
    calls = []
    real = s3.upload_file
    s3.upload_file = lambda f, b, k: (calls.append(k), real(f, b, k))
    outputs.upload_dir(_ckpt(tmp_path, 3), uri, client=s3)
    assert calls[-1].endswith("checkpoint-3/trainer_state.json")
    calls.clear()
    outputs.upload_dir(tmp_path / "checkpoint-3", "s3://ckpts/r2", client=s3, marker=False)
    assert not any(k.endswith("trainer_state.json") for k in calls)


@pytest.mark.parametrize("bad", ["/fsx/out", "s3://", "s3://A_B/x", "gs://b/x"])
def test_bad_s3_uri_is_named(bad):
    with pytest.raises(WorkshopError, match="not an S3 URI"):
        outputs.parse_s3_uri(bad)


def test_efa_self_rule_is_found_added_once(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-west-2")
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
        sg = ec2.create_security_group(
            GroupName="nodes",
            Description="n",
            VpcId=vpc,
            TagSpecifications=[
                {
                    "ResourceType": "security-group",
                    "Tags": [{"Key": "karpenter.sh/discovery", "Value": "training-on-eks"}],
                }
            ],
        )["GroupId"]
        assert efa.node_security_groups("training-on-eks", ec2=ec2) == [sg]
        assert efa.self_rule_status(sg, ec2=ec2) == {"ingress": False, "egress": False}
        assert efa.ensure_self_rule(sg, ec2=ec2, dry_run=True) == ["ingress", "egress"]
        assert efa.self_rule_status(sg, ec2=ec2)["ingress"] is False  # a dry run changes nothing
        assert efa.ensure_self_rule(sg, ec2=ec2) == ["ingress", "egress"]
        assert efa.self_rule_status(sg, ec2=ec2) == {"ingress": True, "egress": True}
        assert efa.ensure_self_rule(sg, ec2=ec2) == []  # idempotent
    with pytest.raises(WorkshopError, match="not an id"):
        efa.self_rule_status("nodes")


def test_fi_info_command_and_parse():
    cmd = efa.fi_info_command("gpu-llama3-node-0-0-abc")
    assert cmd[:2] == ["kubectl", "exec"] and cmd[cmd.index("--") + 1 :] == [
        "fi_info",
        "-p",
        "efa",
        "-t",
        "FI_EP_RDM",
    ]
    out = (
        "provider: efa\n    fabric: efa\n    domain: rdmap16s27-rdm\n"
        "provider: efa\n    domain: rdmap32s27-rdm\n"
    )
    assert efa.count_efa_devices(out) == 2
