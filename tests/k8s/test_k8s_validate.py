"""The manifest validator: rendered pools pass, a negative corpus is rejected field by field."""

from __future__ import annotations

import copy
from collections import Counter

import pytest

from workshop.cli.manifests import validate as validate_command
from workshop.errors import WorkshopError
from workshop.k8s import cel_ext, cel_rules, crds
from workshop.k8s import validate as v
from workshop.k8s.base import to_yaml
from workshop.k8s.karpenter import cpu_amx_pool, gpu_pool
from workshop.paths import MANIFESTS_DIR

POOL = cpu_amx_pool().to_dicts()  # [NodePool, EC2NodeClass]


def _set(path, value):
    def mutate(doc):
        *head, last = path
        target = doc
        for key in head:
            target = target[key]
        target[last] = value

    return mutate


def _pop(path):
    def mutate(doc):
        *head, last = path
        target = doc
        for key in head:
            target = target[key]
        del target[last]

    return mutate


REQ = ["spec", "template", "spec", "requirements"]
# (case, document index in POOL, mutation, field path expected in the problem, rule text expected)
NEGATIVE = [
    (
        "wrong type: limits.cpu list",
        0,
        _set(["spec", "limits", "cpu"], [1]),
        "spec.limits.cpu",
        "x-kubernetes-int-or-string",
    ),
    ("wrong type: weight string", 0, _set(["spec", "weight"], "high"), "spec.weight", "type"),
    ("weight above maximum", 0, _set(["spec", "weight"], 101), "spec.weight", "maximum"),
    (
        "bad enum: consolidationPolicy",
        0,
        _set(["spec", "disruption", "consolidationPolicy"], "Sometimes"),
        "spec.disruption.consolidationPolicy",
        "enum",
    ),
    (
        "bad enum: taint effect",
        0,
        _set(["spec", "template", "spec", "taints", 0, "effect"], "NoRun"),
        "spec.template.spec.taints[0].effect",
        "enum",
    ),
    (
        "bad pattern: expireAfter 30d",
        0,
        _set(["spec", "template", "spec", "expireAfter"], "30d"),
        "spec.template.spec.expireAfter",
        "pattern",
    ),
    (
        "bad quantity in limits",
        0,
        _set(["spec", "limits", "memory"], "64 GiB"),
        "spec.limits.memory",
        "pattern",
    ),
    ("unknown field (strict)", 0, _set(["spec", "limit"], {"cpu": 1}), "spec.limit", "unknown field"),
    (
        "missing required nodeClassRef",
        0,
        _pop(["spec", "template", "spec", "nodeClassRef"]),
        "spec.template.spec.nodeClassRef",
        "required",
    ),
    ("null on non-nullable", 0, _set(["spec", "weight"], None), "spec.weight", "nullable"),
    (
        "CEL: In requirement without values",
        0,
        _set(REQ + [4, "values"], []),
        "spec.template.spec.requirements",
        "x.operator == 'In' ? x.values.size() != 0",
    ),
    (
        "CEL: In requirement with values omitted",
        0,
        _pop(REQ + [4, "values"]),
        "spec.template.spec.requirements",
        "x.operator == 'In' ? x.values.size() != 0",
    ),
    (
        "CEL: Gt with a non-integer",
        0,
        _set(REQ + [0], {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["many"]}),
        "spec.template.spec.requirements",
        "int(x.values[0]) >= 0",
    ),
    (
        "CEL: minValues above the number of values",
        0,
        _set(REQ + [4, "minValues"], 5),
        "spec.template.spec.requirements",
        "x.values.size() >= x.minValues",
    ),
    (
        "CEL: restricted requirement key",
        0,
        _set(REQ + [0, "key"], "karpenter.sh/nodepool"),
        "spec.template.spec.requirements[0].key",
        'self != "karpenter.sh/nodepool"',
    ),
    (
        "CEL: restricted label",
        0,
        _set(["spec", "template", "metadata", "labels", "kubernetes.io/hostname"], "a"),
        "spec.template.metadata.labels",
        'x != "kubernetes.io/hostname"',
    ),
    (
        "CEL: restricted label domain",
        0,
        _set(["spec", "template", "metadata", "labels", "karpenter.k8s.aws/whatever"], "a"),
        "spec.template.metadata.labels",
        'endsWith("karpenter.k8s.aws")',
    ),
    (
        "CEL: budget schedule without duration",
        0,
        _set(["spec", "disruption", "budgets"], [{"nodes": "1", "schedule": "@daily"}]),
        "spec.disruption.budgets",
        "has(x.schedule) == has(x.duration)",
    ),
    (
        "CEL: both role and instanceProfile",
        1,
        _set(["spec", "instanceProfile"], "KarpenterProfile"),
        "spec",
        "has(self.role) && !has(self.instanceProfile)",
    ),
    (
        "CEL: neither role nor instanceProfile",
        1,
        _pop(["spec", "role"]),
        "spec",
        "has(self.role) && !has(self.instanceProfile)",
    ),
    (
        "CEL: unsupported AMI family alias",
        1,
        _set(["spec", "amiSelectorTerms", 0, "alias"], "ubuntu@latest"),
        "spec.amiSelectorTerms[0].alias",
        "self.split('@')[0] in",
    ),
    (
        "CEL: alias mixed with id",
        1,
        _set(["spec", "amiSelectorTerms"], [{"alias": "al2023@latest"}, {"id": "ami-0123"}]),
        "spec.amiSelectorTerms",
        "self.size() != 1",
    ),
    (
        "CEL: restricted tag",
        1,
        _set(["spec", "tags"], {"karpenter.sh/nodepool": "x"}),
        "spec.tags",
        "k != 'karpenter.sh/nodepool'",
    ),
    (
        "CEL: empty subnet selector term",
        1,
        _set(["spec", "subnetSelectorTerms"], [{}]),
        "spec.subnetSelectorTerms",
        "has(x.tags) || has(x.id)",
    ),
    (
        "bad pattern: volume size 300GB",
        1,
        _set(["spec", "blockDeviceMappings", 0, "ebs", "volumeSize"], "300GB"),
        "spec.blockDeviceMappings[0].ebs.volumeSize",
        "pattern",
    ),
    (
        "bad enum: volume type",
        1,
        _set(["spec", "blockDeviceMappings", 0, "ebs", "volumeType"], "gp9"),
        "spec.blockDeviceMappings[0].ebs.volumeType",
        "enum",
    ),
    (
        "wrong type: encrypted as string",
        1,
        _set(["spec", "blockDeviceMappings", 0, "ebs", "encrypted"], "yes"),
        "spec.blockDeviceMappings[0].ebs.encrypted",
        "type",
    ),
    ("metadata: bad name", 0, _set(["metadata", "name"], "CPU_AMX"), "metadata.name", "DNS-1123 subdomain"),
    (
        "metadata: label value not a string",
        0,
        _set(["metadata", "labels"], {"team": 7}),
        "metadata.labels.team",
        "type",
    ),
]


@pytest.mark.parametrize("case,index,mutate,path,rule", NEGATIVE, ids=[c[0] for c in NEGATIVE])
def test_negative_corpus_is_rejected_with_the_field_named(case, index, mutate, path, rule):
    docs = copy.deepcopy(POOL)
    mutate(docs[index])
    problems = v.validate_documents(docs)
    assert problems, f"{case}: accepted"
    hits = [p for p in problems if p.path == path and rule in p.rule]
    assert hits, f"{case}: expected {path} / {rule!r}, got " + "; ".join(map(str, problems))
    assert hits[0].doc.startswith(f"{docs[index]['kind']}/") and f"(document {index + 1})" in hits[0].doc
    assert path in str(hits[0]) or (path == "spec" and "spec:" in str(hits[0]))


@pytest.mark.parametrize("karpenter", ["1.8.8", "1.14.1"])
def test_rendered_pools_validate_on_both_releases(karpenter):
    docs = cpu_amx_pool().to_dicts() + gpu_pool().to_dicts()
    assert v.validate_documents(docs, karpenter=karpenter) == []


def test_seed_static_yaml_passes_schema_but_is_not_our_output():
    """The original workshop's heredoc is valid Karpenter; its fault (pip install on the host) is semantic."""
    original = copy.deepcopy(POOL)
    original[1]["spec"]["userData"] = "#!/bin/bash\npip install intel-extension-for-pytorch\n"
    assert v.validate_documents(original) == []


def test_unknown_kind_and_wrong_api_version_are_problems():
    docs = [
        {"apiVersion": "v1", "kind": "Widget", "metadata": {"name": "x"}},
        {**POOL[0], "apiVersion": "karpenter.sh/v1beta1"},
    ]
    problems = v.validate_documents(docs)
    assert [p.rule for p in problems] == ["kind", "served versions"]
    assert "unknown kind" in problems[0].message and "karpenter.sh/v1" in problems[1].message


def test_multi_document_yaml_names_each_document():
    bad = copy.deepcopy(POOL)
    bad[1]["spec"]["role"] = ""
    bad[1]["spec"]["instanceProfile"] = "p"
    text = to_yaml(POOL + bad)
    problems = v.validate_yaml(text, source="pools.yaml")
    assert problems and all(p.doc == "EC2NodeClass/cpu-amx (document 4 of pools.yaml)" for p in problems)
    assert v.validate_yaml("a: [", source="x.yaml")[0].rule == "YAML syntax"


def test_trainjob_root_cel_rule_and_secret_checks():
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama.run", "namespace": "default"},
        "spec": {"runtimeRef": {"name": "deepspeed-distributed"}},
    }
    problems = v.validate_documents([job])
    assert any(p.path == "" and "matches('^[a-z]" in p.rule for p in problems), problems
    job["metadata"]["name"] = "llama-run"
    assert v.validate_documents([job], trainer="2.1.0") == []
    assert v.validate_documents([job], trainer="2.3.0") == []
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "hf"},
        "data": {"HF_TOKEN": "not base64!"},
        "stringData": {"x": 1},
        "extra": True,
    }
    rules = {(p.path, p.rule) for p in v.validate_documents([secret])}
    assert {("data.HF_TOKEN", "format: byte"), ("stringData.x", "type"), ("extra", "unknown field")} <= rules


def test_unknown_version_is_rejected_early():
    with pytest.raises(
        WorkshopError,
        match=r"Karpenter release '0.37' is unknown here; known: 1.8.8, 1.14.1 "
        r"\(to add one: .*crds fetch --karpenter VERSION",
    ):
        v.validate_documents(POOL, karpenter="0.37")
    # the Trainer's unknown release is named as such, not a Karpenter one whose files happen to load first
    with pytest.raises(
        WorkshopError, match=r"Kubeflow Trainer release '9.9.9' is unknown here; known: 2.1.0, 2.3.0"
    ):
        v.validate_documents(POOL, trainer="9.9.9")


def test_crds_folder_override(tmp_path, monkeypatch):
    """A WORKSHOP_CRDS_DIR without the schemas is reported with the folder and the fix, never fetched over."""
    monkeypatch.setenv("WORKSHOP_CRDS_DIR", str(tmp_path))
    with pytest.raises(
        WorkshopError,
        match=r"no CRD schemas for Karpenter 1\.8\.8 in WORKSHOP_CRDS_DIR=.*"
        r"unset it to use the ones that ship with the workbook",
    ):
        v.validate_documents(POOL, karpenter="1.8.8")


@pytest.mark.parametrize(
    "content, said",
    [
        (bytes(range(256)), "is a binary file"),
        (
            b"kind: CustomResourceDefinition\nspec: {group: x}\n",
            "not a valid CustomResourceDefinition manifest (KeyError",
        ),
        (b"kind: [\n", "not a valid CustomResourceDefinition manifest"),
    ],
    ids=["binary", "no-names", "not-yaml"],
)
def test_a_broken_crd_file_is_named_not_a_traceback(content, said, tmp_path):
    """An added release's files are whatever was imported: a broken one is a WorkshopError naming it."""
    (tmp_path / "broken.yaml").write_bytes(content)
    with pytest.raises(
        WorkshopError, match=f"CRD file '{tmp_path / 'broken.yaml'}'.*{said}".replace("(", r"\(")
    ):
        v._load_folder(str(tmp_path))


def test_ensure_valid_lists_every_problem():
    bad = copy.deepcopy(POOL)
    bad[0]["spec"]["weight"] = "x"
    bad[1]["spec"].pop("role")
    with pytest.raises(WorkshopError) as err:
        v.ensure_valid(bad)
    assert "spec.weight" in str(err.value) and "exactly one of" in str(err.value)


def test_rule_inventory_counts_and_only_transition_rules_skipped():
    inv = v.rule_inventory(karpenter="1.8.8", trainer="2.1.0")
    per_kind = Counter(r.kind for r in inv)
    assert per_kind["NodePool"] == 24 and per_kind["EC2NodeClass"] == 48 and per_kind["TrainJob"] == 5
    skipped = [r for r in inv if r.status != "evaluated"]
    assert skipped and all("oldSelf" in r.rule for r in skipped)
    assert all("transition rule" in r.status for r in skipped)
    assert cel_rules.rule_status("self.ip(x)").startswith("skipped")


def test_cel_extensions_behave_like_kubernetes():
    assert cel_ext.find("karpenter.sh/nodepool", "^([^/]+)") == "karpenter.sh"
    assert cel_ext.find("abc", "z") == ""
    assert list(cel_ext.split("al2023@latest", "@")) == ["al2023", "latest"]
    assert cel_ext.parse_quantity("64Gi") == 64 * 2**30 and cel_ext.parse_quantity("500m") == cel_ext.Decimal(
        "0.5"
    )
    with pytest.raises(ValueError):
        cel_ext.parse_quantity("64 GiB")
    ok, _ = cel_rules.run_rule(
        "quantity(self.a).isGreaterThan(quantity('1Gi')) && self.b.lowerAscii() == 'x'",
        {"a": "2Gi", "b": "X"},
    )
    assert ok
    ok, _ = cel_rules.run_rule(
        "self.all(x, x.indexOf('a') == 0) && 'a,b'.split(',').size() == 2", ["ab", "ac"]
    )
    assert ok


def test_cli_exit_codes(tmp_path, capsys):
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(to_yaml(POOL))
    broken = copy.deepcopy(POOL)
    broken[0]["spec"]["template"]["spec"]["requirements"][4]["values"] = []
    bad.write_text(to_yaml(broken))
    assert validate_command([str(good), "--karpenter", "1.14.1"]) == 0
    assert validate_command([str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert "NodePool/cpu-amx (document 1 of" in out and "spec.template.spec.requirements" in out


def test_upstream_trainer_runtimes_pass_their_release_and_fail_the_next():
    """Real-world positive corpus: Kubeflow's own v2.1.0 runtimes; v2.3.0 moved torch.numProcPerNode."""
    runtimes = sorted((crds.folder("trainer", "2.1.0") / "runtimes").glob("*.yaml"))
    assert runtimes
    assert v.validate_files(runtimes, trainer="2.1.0") == []
    newer = v.validate_files(runtimes, trainer="2.3.0")
    assert newer and {p.path for p in newer} == {"spec.mlPolicy.torch.numProcPerNode"}
    assert {p.rule for p in newer} == {"unknown field"}


def test_list_map_keys_and_int_or_string_in_trainjob():
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "deepspeed-distributed"},
            "initializer": {"dataset": {"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}},
            "trainer": {"numNodes": "four", "resourcesPerNode": {"limits": {"cpu": "31.5"}}},
        },
    }
    rules = {(p.path, p.rule) for p in v.validate_documents([job], trainer="2.1.0")}
    assert ("spec.initializer.dataset.env[1]", "x-kubernetes-list-map-keys") in rules
    assert ("spec.trainer.numNodes", "type") in rules
    assert not any(path.startswith("spec.trainer.resourcesPerNode") for path, _ in rules)


# ------------------------------------------------------------------- which release a manifest targets
MANIFESTS = sorted(MANIFESTS_DIR.glob("*.yaml"))


def test_checked_in_manifests_pass_with_no_flags(capsys):
    assert MANIFESTS and validate_command([str(p) for p in MANIFESTS]) == 0
    out = capsys.readouterr().out
    assert (
        "trainjob-cpu-v2.2.yaml): accepted by Trainer 2.3.0 (its shape targets 2.3.0: spec.runtimePatches"
        in out
    )
    assert (
        "trainjob-cpu-v2.1.yaml): accepted by Trainer 2.1.0 (its shape targets 2.1.0: "
        "spec.podTemplateOverrides" in out
    )
    assert "accepted by Karpenter 1.8.8, 1.14.1" in out  # no clue: every known release, each accepts
    v22 = [str(p) for p in MANIFESTS if p.name == "trainjob-cpu-v2.2.yaml"]
    assert (
        validate_command([*v22, "--trainer", "2.1.0"]) == 1
    )  # forcing a release still judges against that one only
    assert 'unknown field "runtimePatches"' in capsys.readouterr().out


def test_no_clue_is_judged_against_every_release_and_says_which_accept():
    runtimes = sorted((crds.folder("trainer", "2.1.0") / "runtimes").glob("*.yaml"))
    verdicts = {x.label: x for x in v.judge_files(runtimes)}
    torch = [x for label, x in verdicts.items() if "numProcPerNode" in x.reason]  # moved in 2.3: a clue
    assert torch and all(x.judged == ("2.1.0",) and x.accepted == ("2.1.0",) for x in torch)
    other = [x for x in verdicts.values() if x not in torch]  # no clue: both releases judged, both accept
    assert other and all(x.judged == x.accepted == ("2.1.0", "2.3.0") for x in other)
    assert "accepted by Trainer 2.1.0, 2.3.0" in str(other[0])
    pool = v.judge(POOL[0])
    assert pool.judged == ("1.8.8", "1.14.1") and pool.accepted == pool.judged and pool.reason == ""
    bad = copy.deepcopy(POOL[0])
    bad["spec"]["weight"] = 101
    verdict = v.judge(bad)
    assert verdict.accepted == () and [p.release for p in verdict.problems] == ["Karpenter 1.8.8, 1.14.1"]
    assert "rejected by Karpenter 1.8.8, 1.14.1" in str(verdict)


def test_a_newer_karpenter_field_targets_the_newer_release():
    ec2 = copy.deepcopy(POOL[1])
    ec2["spec"]["placementGroupSelector"] = {"name": "training"}
    verdict = v.judge(ec2)
    assert verdict.judged == ("1.14.1",) and verdict.ok, verdict.problems
    assert "spec.placementGroupSelector is not declared in 1.8.8" in verdict.reason
    assert v.validate_documents([ec2], karpenter="1.8.8")[0].rule == "unknown field"


def test_unknown_field_suggests_the_near_name_and_metadata_is_checked():
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llama", "namespace": "Default", "labelz": {}},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainr": {}},
    }
    problems = {(p.path, p.rule): p.message for p in v.validate_documents([job], trainer="2.3.0")}
    assert 'did you mean "trainer"' in problems[("spec.trainr", "unknown field")]
    assert ("metadata.namespace", "DNS-1123 label") in problems
    assert ("metadata.labelz", "unknown field") in problems


def test_storage_manifests_are_checked_not_waved_through():
    """The FSx StorageClass and claim have no CRD: typed schemas of the built-in kinds judge them."""
    import yaml

    docs = [d for d in yaml.safe_load_all((MANIFESTS_DIR / "storage-fsx.yaml").read_text()) if d]
    assert [d["kind"] for d in docs] == ["StorageClass", "PersistentVolumeClaim"]
    assert v.validate_documents(docs) == []
    bad = copy.deepcopy(docs)
    bad[0]["reclaimPolicy"] = "Keep"
    bad[1]["spec"]["accessModes"] = ["ReadWriteSometimes"]
    del bad[1]["spec"]["resources"]["requests"]["storage"]
    text = "\n".join(map(str, v.validate_documents(bad)))
    assert 'reclaimPolicy: unsupported value "Keep"' in text
    assert 'spec.accessModes[0]: unsupported value "ReadWriteSometimes"' in text
    assert "spec.resources.requests.storage" in text


@pytest.mark.parametrize(
    ("plain", "go"), [(".inf", "+Inf"), ("-.Inf", "-Inf"), (".nan", "NaN")], ids=["inf", "-inf", "nan"]
)
def test_a_plain_inf_or_nan_is_refused_as_kubectl_refuses_it(plain, go):
    """kubectl reads a plain .inf/.nan as a float and cannot write it as JSON: it refuses the file on the
    client ("json: unsupported value: +Inf") and sends nothing, in a string field or a number field alike."""
    text = (MANIFESTS_DIR / "trainjob-cpu-v2.2.yaml").read_text()
    as_arg = text.replace("- '2e-05'", f"- {plain}", 1)
    as_number = text.replace("numNodes: ", f"numNodes: {plain} #", 1)
    for bad, path in ((as_arg, "spec.trainer.args["), (as_number, "spec.trainer.numNodes")):
        problems = v.validate_yaml(bad, trainer="2.3.0")
        said = [p for p in problems if p.path.startswith(path)]
        assert len(said) == 1, problems
        assert f'"json: unsupported value: {go}"' in said[0].message and "sends nothing" in said[0].message
        assert "reads as a number" not in said[0].message
