"""Chapter 05's cap sentences (rev-ko 5): a step that got faster under the tighter cap is said to have shrunk,
never "grew -0.18 s"."""

from __future__ import annotations

from workshop.report import network


def _row(rate: str, step: float, mb: float) -> dict:
    return {"rate": rate, "ok": True, "step_time_s_median": step, "mb_per_step_per_node": [mb, mb]}


def test_growth_is_said_by_its_sign():
    grew = network.bandwidth([_row("10gbit", 0.30, 21.0), _row("1gbit", 0.55, 21.0)])[-1]
    assert "the step grew 0.25 s." in grew and "shrank" not in grew
    shrank = network.bandwidth([_row("10gbit", 0.63, 21.0), _row("1gbit", 0.45, 21.0)])[-1]
    assert "the step shrank 0.18 s instead" in shrank and "grew" not in shrank and "-0.18" not in shrank
