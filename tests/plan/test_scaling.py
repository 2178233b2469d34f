"""The thread-scaling curve: linear measurements give 1.0 at any size, a flat curve (two vCPUs sharing one
core's matmul unit) gives 1/N, the range brackets the value, and the planner's factor for a 96-core host
comes from the stored AMX curve, not a constant."""

import pytest

from workshop.errors import WorkshopError
from workshop.plan import calibration
from workshop.plan.scaling import curve_from_gemm_cells, per_core, scaling_at


def _curve(points):
    return {"dtype": "bf16", "shape": [8, 8, 8], "threads": list(points), "tflops": points}


def test_linear_curve_extrapolates_to_linear():
    c = _curve({"1": [1.0, 1.0], "2": [2.0, 2.0], "4": [4.0, 4.0]})
    s = scaling_at(c, 96)
    assert s.value == pytest.approx(1.0) and s.exponent == pytest.approx(1.0)
    assert per_core(c) == pytest.approx({1: 1.0, 2: 1.0, 4: 1.0})


def test_flat_curve_is_one_core_shared():
    """The AMX VM of issue 52: 1.105 TFLOPS at 1 thread and 1.105 at 2."""
    s = scaling_at(_curve({"1": [1.105], "2": [1.105]}), 96)
    assert s.value == pytest.approx(1 / 96) and "extrapolated 48x" in s.describe()


def test_range_brackets_the_value():
    s = scaling_at(_curve({"1": [0.9, 1.0, 1.1], "2": [1.4, 1.6, 1.8], "4": [2.2, 2.6, 3.0]}), 96)
    assert s.low < s.value < s.high <= 1.0


@pytest.mark.parametrize("bad", [{}, {"tflops": {"2": [1.0]}}, {"tflops": {"1": [0.0], "2": [1.0]}}, []])
def test_a_broken_curve_is_one_error(bad):
    with pytest.raises(WorkshopError, match="thread-scaling curve"):
        scaling_at(bad, 96)


def test_gemm_cells_become_a_curve_at_the_largest_size():
    cells = [
        {"size": n, "dtype": dt, "threads": t, "tflops": [t * n / 1000]}
        for n in (1024, 2048)
        for dt in ("bf16", "fp32")
        for t in (1, 2, 4)
    ]
    c = curve_from_gemm_cells(cells)
    assert c is not None and c["shape"] == [2048, 2048, 2048] and c["threads"] == [1, 2, 4]
    assert curve_from_gemm_cells([c for c in cells if c["threads"] == 1]) is None


def test_planner_thread_scaling_comes_from_the_stored_amx_curve():
    rate, (low, high) = calibration.cpu_thread_scaling(96)
    assert rate.kind == "measured" and "AMX" in rate.source and "extrapolated" in rate.source
    assert low <= rate.value <= high < 1.0
    assert calibration.cpu_thread_scaling(16)[0].value > rate.value  # fewer cores keep more per core
