"""Typed Karpenter specs: what they render, and the bad input they refuse before any YAML exists."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from workshop.errors import WorkshopError
from workshop.k8s import karpenter as kp


def _req(pool_dict, key):
    return next(r for r in pool_dict["spec"]["template"]["spec"]["requirements"] if r["key"] == key)


def test_cpu_amx_pool_defaults_match_the_seed_facts():
    nodepool, nodeclass = kp.cpu_amx_pool().to_dicts()
    assert nodepool["kind"] == "NodePool" and nodeclass["kind"] == "EC2NodeClass"
    assert _req(nodepool, "karpenter.k8s.aws/instance-family")["values"] == ["c7i", "m7i", "r7i"]
    assert _req(nodepool, "karpenter.k8s.aws/instance-size")["values"] == [
        "8xlarge",
        "16xlarge",
        "24xlarge",
        "48xlarge",
    ]
    assert _req(nodepool, "karpenter.k8s.aws/instance-cpu-manufacturer")["values"] == ["intel"]
    assert nodepool["spec"]["template"]["spec"]["taints"] == [
        {"key": "intel.com/amx", "value": "present", "effect": "NoSchedule"}
    ]
    assert nodepool["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert nodepool["spec"]["limits"] == {"cpu": 1000}
    # rev-en 5: drift never replaces a node under a job: 0 nodes for Drifted, on a pinned AMI release
    assert nodepool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmpty",
        "consolidateAfter": "20m",
        "budgets": [{"nodes": "0", "reasons": ["Drifted"]}],
    }
    spec = nodeclass["spec"]
    assert spec["role"] == "eksctl-KarpenterNodeRole-training-on-eks" and "instanceProfile" not in spec
    assert spec["amiSelectorTerms"] == [{"alias": kp.AMI_ALIAS}]
    assert re.fullmatch(r"al2023@v20\d{6}", kp.AMI_ALIAS)  # a release, never @latest
    assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "training-on-eks"}}]
    assert spec["blockDeviceMappings"][0]["ebs"]["volumeSize"] == "300Gi"
    kp.check_user_data(spec["userData"])  # no host-side Python installs
    assert "pip install" not in spec["userData"] and "intel-extension" not in spec["userData"]


def test_gpu_pool_is_one_zone_efa_types_and_tainted():
    nodepool, nodeclass = kp.gpu_pool(["p5.48xlarge", "g6e.12xlarge"], zone="us-east-1c").to_dicts()
    assert _req(nodepool, "topology.kubernetes.io/zone")["values"] == ["us-east-1c"]
    assert _req(nodepool, "node.kubernetes.io/instance-type")["values"] == ["p5.48xlarge", "g6e.12xlarge"]
    assert nodepool["spec"]["template"]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
    ]
    assert nodepool["spec"]["limits"] == {"nvidia.com/gpu": 32}
    assert nodeclass["metadata"]["name"] == "gpu" and "userData" not in nodeclass["spec"]


@pytest.mark.parametrize(
    "rec,families,sizes,cpu",
    [
        ("r7i.8xlarge", ["r7i"], ["8xlarge"], 1000),
        ({"instance_type": "m7i.16xlarge", "nodes": 4}, ["m7i"], ["16xlarge"], 256),
        (SimpleNamespace(instance_type="r7i.8xlarge", nodes=4), ["r7i"], ["8xlarge"], 128),
        (
            SimpleNamespace(instance_types=["c7i.48xlarge", "r7i.metal-48xl"]),
            ["c7i", "r7i"],
            ["48xlarge", "metal-48xl"],
            1000,
        ),
        (["m7i.24xlarge"], ["m7i"], ["24xlarge"], 1000),
    ],
)
def test_pool_from_recommendation(rec, families, sizes, cpu):
    nodepool, _ = kp.pool_from_recommendation(rec).to_dicts()
    assert _req(nodepool, "karpenter.k8s.aws/instance-family")["values"] == families
    assert _req(nodepool, "karpenter.k8s.aws/instance-size")["values"] == sizes
    assert nodepool["spec"]["limits"]["cpu"] == cpu


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: kp.cpu_amx_pool(families=["m7a"]), "unknown AMX instance family 'm7a'"),
        (lambda: kp.cpu_amx_pool(families=["m7g"]), "allowed: c7i"),
        (lambda: kp.cpu_amx_pool(sizes=["huge"]), "instance size 'huge'"),
        (lambda: kp.cpu_amx_pool(capacity_types=["cheap"]), "unknown capacity type 'cheap'"),
        (lambda: kp.cpu_amx_pool(arch="arm64"), "unknown arch 'arm64'"),
        (lambda: kp.cpu_amx_pool(cpu_limit=0), "cpu_limit must be a number > 0"),
        (lambda: kp.cpu_amx_pool(expire_after="30d"), "expireAfter '30d'"),
        (lambda: kp.cpu_amx_pool(role=None), "exactly one of role and instance_profile"),
        (lambda: kp.cpu_amx_pool(instance_profile="p"), "exactly one of role and instance_profile"),
        (lambda: kp.cpu_amx_pool(user_data="#!/bin/bash\npip install intel-extension-for-pytorch"), "host"),
        (lambda: kp.gpu_pool(["g5.xlarge"]), "EFA-capable GPU instance type 'g5.xlarge'"),
        (lambda: kp.gpu_pool(zone="west"), "zone 'west'"),
        (lambda: kp.pool_from_recommendation({"nodes": 2}), "names no instance_type"),
        (lambda: kp.pool_from_recommendation("r7i"), "family.size"),
        (lambda: kp.NodePoolSpec("x", "x", [kp.Requirement("a", "Maybe")]), "requirement operator 'Maybe'"),
        (lambda: kp.Taint("k", effect="Never"), "taint effect 'Never'"),
    ],
)
def test_bad_input_is_refused_early(call, match):
    with pytest.raises(WorkshopError, match=match):
        call()


def test_vcpus_of_sizes():
    assert [kp.vcpus_of(s) for s in ("large", "xlarge", "8xlarge", "48xlarge", "metal-48xl")] == [
        2,
        4,
        32,
        192,
        192,
    ]


def test_admission_follows_the_requirements():
    """admits() applies In/NotIn/Gt to a type's labels: the original pool takes smaller sizes, the plan's pool
    only 48xl."""
    from workshop.k8s import karpenter as k
    from workshop.plan.catalog import list_instances

    rows, _ = list_instances(["c7i", "m7i", "r7i"], source="moto")
    by_name = {r.instance_type: r for r in rows}
    original = k.original_static_pool()[0]
    ours = k.cpu_amx_pool(["r7i"], ["48xlarge"]).to_dicts()[0]
    assert k.admits(original, by_name["c7i.8xlarge"]) and not k.admits(original, by_name["c7i.4xlarge"])
    assert k.admits(ours, by_name["r7i.48xlarge"]) and not k.admits(ours, by_name["m7i.48xlarge"])
    gt = {
        "spec": {
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["64"]}
                    ]
                }
            }
        }
    }
    assert k.admits(gt, by_name["r7i.48xlarge"]) and not k.admits(gt, by_name["r7i.16xlarge"])
    table = k.admission_table(rows, {"original": original, "ours": ours})
    assert sum(r["original"] for r in table) == 12 and [r["instance_type"] for r in table if r["ours"]] == [
        "r7i.48xlarge"
    ]


def test_the_pool_admits_exactly_the_types_that_host_the_planned_pod():
    """Chapter 02: every admitted type can host the pod chapter 05 renders, and the CPU limit launches the
    chosen plan's nodes."""
    from workshop.k8s import karpenter
    from workshop.plan import cost
    from workshop.plan.catalog import instance_info
    from workshop.plan.fit import allocatable
    from workshop.plan.options import Options

    plans = cost.rank(Options(source="moto", families=("c7i", "m7i", "r7i"), nodes=(4,)))
    admitted = cost.within_margin(plans, 0.25)
    rec = cost.recommendation(plans[0], "llama-3-8b", source="moto")
    choice = cost.pool_choice(admitted, rec, source="moto")
    assert plans[0].instance_type in choice["instance_types"]
    for t in choice["instance_types"]:
        gib, vcpus = allocatable(instance_info(t, source="moto"))
        assert gib >= float(rec.memory_request.removesuffix("Gi")) and vcpus >= float(rec.cpu_request)
    pool = karpenter.pool_from_recommendation(choice, cluster="c", role="r").to_dicts()[0]
    req = {r["key"]: r["values"] for r in pool["spec"]["template"]["spec"]["requirements"]}
    assert req["node.kubernetes.io/instance-type"] == choice["instance_types"]
    first = instance_info(plans[0].instance_type, source="moto")
    assert int(pool["spec"]["limits"]["cpu"]) >= plans[0].nodes * first.vcpus
