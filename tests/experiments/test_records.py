"""Typed records that copy a dataclass (its as_dict(), or its JSON read back) keep the dataclass's keys, in
its order: asdict() picked up a new field by itself, an explicit record would silently drop it."""

from dataclasses import asdict, fields

from workshop.experiments.loading.worker import RankRecord, RankReport
from workshop.experiments.measure import Stats, StatsRecord
from workshop.plan import catalog
from workshop.plan.gemm import GemmCell, GemmResult


def test_gemm_cell_is_asdict_plus_the_summaries():
    cell = GemmResult(256, "bf16", 2, [0.5, 0.3, 0.4])
    assert cell.as_dict() == {**asdict(cell), "median_tflops": 0.4, "best_tflops": 0.5, "worst_tflops": 0.3}
    assert list(cell.as_dict()) == list(GemmCell.__annotations__)
    assert cell.as_dict()["tflops"] is not cell.tflops  # a copy, as asdict() made


def test_stats_record_is_asdict():
    s = Stats.of([3.0, None, 1.0, 2.0])
    assert s.as_dict() == asdict(s) and list(s.as_dict()) == list(asdict(s)) == list(
        StatsRecord.__annotations__
    )


def test_instance_record_is_asdict_plus_the_amx_peak():
    rows, _ = catalog.list_instances(["r7i", "p4d"], sizes=["48xlarge", "24xlarge"], source="moto")
    assert rows
    for row in rows:
        assert row.as_dict() == {**asdict(row), "amx_peak_tflops": row.amx_peak_tflops()}
        assert list(row.as_dict()) == list(catalog.InstanceRecord.__annotations__)


def test_rank_record_names_every_rank_report_field():
    assert set(RankRecord.__annotations__) == {f.name for f in fields(RankReport)}  # JSON: order is free
