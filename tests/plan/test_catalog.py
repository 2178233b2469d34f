"""EC2 catalog: the original workshop's query and the broader ones answered from moto's real offline
catalog."""

import json

import pytest

from workshop.cli import plan as plan_cli
from workshop.errors import WorkshopError
from workshop.plan import catalog


def test_seed_query_returns_the_seeds_instances():
    rows, source = catalog.describe_instance_types(catalog.ORIGINAL_FILTERS, source="moto")
    assert source.startswith("moto")
    names = {r.instance_type for r in rows}
    # every row the original workshop printed is still in the catalog (newer catalogs add u7i/u7in sizes)
    original = {
        "u7i-6tb.112xlarge",
        "r7iz.32xlarge",
        "r7i.metal-48xl",
        "i7ie.metal-48xl",
        "m7i.48xlarge",
        "i7ie.48xlarge",
        "c7i.metal-48xl",
        "i7i.metal-48xl",
        "r7iz.metal-32xl",
        "r7i.48xlarge",
        "i7i.48xlarge",
        "i7i.24xlarge",
        "c7i.48xlarge",
        "m7i.metal-48xl",
    }
    assert original <= names
    assert all(r.efa and "7i" in r.instance_type for r in rows)
    r7i = next(r for r in rows if r.instance_type == "r7i.48xlarge")
    assert (r7i.vcpus, r7i.cores, r7i.memory_gib) == (192, 96, 1536)
    assert r7i.amx and r7i.hourly_usd == pytest.approx(12.7008)


def test_broad_families_gpu_and_amx_marks():
    rows, _ = catalog.list_instances(["c7i", "m8i", "p4d", "p5", "g6e", "m7g", "m7a"], source="moto")
    by = {r.instance_type: r for r in rows}
    p5 = by["p5.48xlarge"]
    assert (p5.gpus, p5.gpu_name, p5.gpu_memory_gib) == (8, "H100", 80) and p5.efa and not p5.amx
    p4d = by["p4d.24xlarge"]
    assert (
        (p4d.gpus, p4d.gpu_memory_gib) == (8, 40) and not p4d.amx and p4d.hourly_usd == pytest.approx(21.96)
    )
    assert (
        by["g6e.8xlarge"].network_performance == "25 Gigabit" and by["g6e.8xlarge"].efa
    )  # the original workshop's spec
    assert all(r.amx for r in rows if r.family in ("c7i", "m8i"))
    assert not any(r.amx for r in rows if r.family in ("m7g", "m7a"))
    assert "Graviton" in by["m7g.large"].amx_reason and "AMD" in by["m7a.large"].amx_reason
    assert by["m7g.large"].hourly_usd is None  # unknown prices stay unknown
    assert by["m8i.large"].hourly_usd == pytest.approx(0.1058, abs=1e-4)  # the published figure


def test_every_type_the_default_ranking_considers_is_priced_or_named_unpriced():
    rows, _ = catalog.list_instances(catalog.DEFAULT_FAMILIES, source="moto")
    ranked = [r for r in rows if not r.bare_metal]  # cost.rank's candidates
    eighth = [r for r in ranked if r.family in ("c8i", "m8i", "r8i")]
    assert len(eighth) >= 27 and all(r.hourly_usd for r in eighth)
    assert all(r.hourly_usd for r in ranked), [r.instance_type for r in ranked if r.hourly_usd is None]
    # c8i.48xlarge is the AWS Price List figure itself; 8th gen is 1.05x the 7th per vCPU, as published
    by = {r.instance_type: r for r in rows}
    assert by["c8i.48xlarge"].hourly_usd == pytest.approx(8.99616)
    for gen7, gen8 in (("c7i", "c8i"), ("m7i", "m8i"), ("r7i", "r8i")):
        ratio = by[f"{gen8}.24xlarge"].hourly_usd / by[f"{gen7}.24xlarge"].hourly_usd
        assert ratio == pytest.approx(1.05, abs=0.002)
    unpriced = [r for r in rows if r.hourly_usd is None]
    assert unpriced and all(r.bare_metal for r in unpriced)  # no guess for a metal size
    table = catalog.format_table(rows)
    for r in unpriced:
        assert catalog.unpriced_reason(r.instance_type, r.vcpus)
        assert any(line.startswith("? ") and r.instance_type in line for line in table.splitlines())


def test_sizes_and_efa_filters():
    rows, _ = catalog.list_instances(
        ["c7i", "m7i", "r7i"], sizes=["8xlarge", "48xlarge"], efa=True, source="moto"
    )
    assert {r.instance_type for r in rows} == {"c7i.48xlarge", "m7i.48xlarge", "r7i.48xlarge"}


def test_amx_rule():
    assert catalog.amx_capability("c6i", "Intel", "x86_64")[0] is False  # Ice Lake
    assert catalog.amx_capability("r7iz", "Intel", "x86_64")[0] is True
    assert catalog.amx_capability("m7i-flex", "Intel", "x86_64")[0] is True
    assert catalog.amx_capability("c7g", "AWS", "arm64")[0] is False


def test_unknown_family_and_instance_are_clear_errors():
    with pytest.raises(WorkshopError, match="did you mean.*r7i"):
        catalog.list_instances(["r7x"], source="moto")
    with pytest.raises(WorkshopError, match="check the size"):
        catalog.instance_info("r7i.49xlarge", source="moto")
    with pytest.raises(WorkshopError, match="should look like"):
        catalog.instance_info("r7i")
    with pytest.raises(WorkshopError, match="catalog source"):
        catalog.describe_instance_types(source="azure")
    assert catalog.instance_info("g6e.8xlarge", source="moto").gpus == 1


def test_cli_json_and_errors(capsys):
    assert plan_cli.instances(["--family", "r7i", "--efa", "--json", "--source", "moto"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert isinstance(out, list) and out
    for key in ("instance_type", "vcpus", "cores", "memory_gib", "efa"):
        assert key in out[0]
    assert all(o["efa"] for o in out)
