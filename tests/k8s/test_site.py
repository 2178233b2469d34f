"""Issue 46/49 (rev-en 1, 6): the plan a learner applies next week carries their account's values (chapter
05's parameters, `workshop render --plan`'s flags of the same names), the preflight refuses the checked-in
examples naming the field, and the CPU pool, the job and the FSx subnet share one zone."""

from __future__ import annotations

import pytest
import yaml

from workshop.book.your_plan import render_picked
from workshop.cli.cluster import cluster as cluster_command
from workshop.cli.manifests import render as render_command
from workshop.k8s.render import render_plan
from workshop.k8s.site import Site
from workshop.plan.job import save_plan, stored_plan

MINE = {
    "registry": "123456789012.dkr.ecr.us-east-1.amazonaws.com/workshop",
    "zone": "us-east-1c",
    "fsx_subnet_id": "subnet-0aaaabbbbccccdddd",
    "fsx_security_group_id": "sg-0aaaabbbbccccdddd",
    "namespace": "team-a",
}


def _docs(folder) -> list[dict]:
    return [d for f in sorted(folder.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]


def _flags(values: dict[str, str]) -> list[str]:
    return [x for k, v in values.items() for x in ("--" + k.replace("_", "-"), v)]


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_flags_reach_every_rendered_file_and_one_zone_holds_pool_job_and_subnet(tmp_path, kind):
    plan = save_plan(stored_plan(kind), tmp_path / "p.json")
    assert render_command(["--plan", str(plan), "--out", str(tmp_path / "d"), *_flags(MINE)]) == 0
    docs = _docs(tmp_path / "d")
    by_kind = {d["kind"]: d for d in docs}
    assert by_kind["StorageClass"]["parameters"]["subnetId"] == MINE["fsx_subnet_id"]
    assert by_kind["StorageClass"]["parameters"]["securityGroupIds"] == MINE["fsx_security_group_id"]
    text = yaml.safe_dump(by_kind["TrainJob"])
    assert f"image: {MINE['registry']}/workshop-{kind}:" in text
    assert by_kind["TrainJob"]["metadata"]["namespace"] == "team-a"
    assert by_kind["PersistentVolumeClaim"]["metadata"]["namespace"] == "team-a"
    reqs = by_kind["NodePool"]["spec"]["template"]["spec"]["requirements"]
    assert {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1c"]} in reqs
    assert "topology.kubernetes.io/zone: us-east-1c" in text  # the pods' nodeSelector: no ring across zones


def test_the_preflight_refuses_the_examples_naming_the_field(tmp_path, capsys):
    plan = save_plan(stored_plan("cpu"), tmp_path / "p.json")
    render_plan(stored_plan("cpu"), tmp_path / "ex")  # the examples' values, as the checked-in manifests
    args = ["preflight", "--plan", str(plan), "--manifests", str(tmp_path / "ex")]
    assert cluster_command(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "fsx_subnet_id" in err[0] and "subnet-0123456789abcdef0" in err[0], err
    # only the registry left at its example: that is the field named
    render_plan(stored_plan("cpu"), tmp_path / "reg", site=Site(**{**MINE, "registry": Site().registry}))
    assert cluster_command(["preflight", "--manifests", str(tmp_path / "reg")]) == 2
    assert "registry is the example value" in capsys.readouterr().err


def test_render_names_the_flags_still_at_the_examples(tmp_path, capsys):
    plan = save_plan(stored_plan("gpu"), tmp_path / "p.json")
    assert render_command(["--plan", str(plan), "--out", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "--registry, --fsx-subnet-id, --fsx-security-group-id" in out
    assert render_command(["--plan", str(plan), "--out", str(tmp_path / "e"), *_flags(MINE)]) == 0
    assert "examples" not in capsys.readouterr().out
    assert render_command(["--out", str(tmp_path / "f"), "--zone", "us-east-1a"]) == 2
    assert "--zone goes with --plan FILE" in capsys.readouterr().err


def test_section_7b_lists_the_secret_the_preflight_and_what_is_still_an_example(tmp_path):
    path = save_plan(stored_plan("cpu"), tmp_path / "01_plan.json")
    said = render_picked(path, tmp_path / "r", site=Site(**{**MINE, "registry": Site().registry}))
    assert "kubectl create secret generic hf-token -n team-a" in said
    assert f"--manifests {tmp_path / 'r'}" in said and "registry" in said and "fsx_subnet_id" not in said
    assert said.index("create secret") < said.index("cluster preflight") < said.index("kubectl apply")
    said = render_picked(path, tmp_path / "s", site=Site(**MINE))
    assert "examples" not in said


def test_the_gpu_pod_is_guaranteed_and_fits_every_type_of_its_pool():
    """rev-en 10: a GPU node pod without cpu/memory requests runs BestEffort, the first evicted."""
    from workshop.k8s.planned_job import plan_trainjob
    from workshop.plan.catalog import allocatable, instance_info

    plan = stored_plan("gpu")
    spec = plan_trainjob(plan, "g")
    assert spec.requests["cpu"] == spec.limits["cpu"] and spec.requests["memory"] == spec.limits["memory"]
    cpu, mem = int(spec.requests["cpu"]), int(spec.requests["memory"].removesuffix("Gi"))
    fits = [allocatable(instance_info(t, source=plan.placement.catalog)) for t in plan.placement.pool_types]
    assert all(cpu <= v and mem <= m for m, v in fits)
    assert any(cpu >= v - 2 for _m, v in fits)  # the whole smallest node but the daemonsets', not a token ask
