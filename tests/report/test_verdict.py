"""The verdict helper on synthetic samples: a clear win, overlapping samples, a drifting reference."""

import pytest

from workshop.errors import WorkshopError
from workshop.report.verdict import compare, share, steady


def test_clear_win_names_the_winner_and_its_range():
    v = compare([200, 205, 210], [100, 102, 104], a_label="A", b_label="B")
    assert v.clear and v.winner == "A"
    assert v.low == pytest.approx(200 / 104) and v.high == pytest.approx(2.1)
    assert v.sentence.startswith("A beats B by x2.01 (1.92-2.10) in tokens/s")


def test_b_winning_is_said_as_b_beats_a():
    v = compare([100, 101, 99], [150, 151, 149], a_label="A", b_label="B")
    assert v.clear and v.winner == "B" and v.sentence.startswith("B beats A by x1.50")


def test_lower_is_better_for_times():
    v = compare(
        [1.0, 1.02], [2.0, 2.1], a_label="fast", b_label="slow", unit="s/step", higher_is_better=False
    )
    assert v.clear and v.winner == "fast" and "x2.0" in v.sentence


def test_overlapping_samples_are_within_noise():
    # the checks-on run looked x1.31 faster by its median, but its steps overlap the plain run's
    v = compare([1854, 1300, 2000], [1418, 1900, 1200], a_label="checks on", b_label="checks off")
    assert not v.clear and v.winner is None
    assert "within noise on this machine" in v.sentence and "spread" in v.sentence


def test_small_effect_is_not_a_win_even_without_overlap():
    v = compare([101, 101.5], [100, 100.2], a_label="A", b_label="B")
    assert v.low > 1 and not v.clear


def test_single_sample_is_never_a_verdict():
    v = compare([300], [100], a_label="A", b_label="B")
    assert not v.clear and "single sample" in v.sentence


def test_paired_rounds_must_agree():
    assert compare([110, 112, 111], [100, 100, 100], a_label="A", b_label="B", paired=True).clear
    mixed = compare([110, 90], [100, 100], a_label="A", b_label="B", paired=True)
    assert not mixed.clear and "within noise" in mixed.sentence
    with pytest.raises(WorkshopError, match="as many A as B"):
        compare([1, 2], [1], a_label="A", b_label="B", paired=True)


def test_steady_drops_the_warm_up():
    assert steady([10, 100, 101, None, 99]) == [100, 101, 99]
    assert steady([5]) == [5]


def test_still_reference_gives_one_share():
    s = share([78.5, 79.0], [80.0, 81.0], part_label="the step", reference_label="GEMM ceiling")
    assert s.clear and round(s.pct) == 98
    assert s.sentence.startswith("the step is 98% (97-99%) of the GEMM ceiling")
    assert "(+1%)" in s.sentence


def test_drifting_reference_gives_a_range_not_a_share():
    # chapter 04 on a busy laptop: the ceiling moved 126.3 -> 194.2 GFLOPS while the step ran at 157
    s = share([157.0], [126.3, 194.2], part_label="the step", reference_label="GEMM ceiling")
    assert not s.clear and s.drift_pct == pytest.approx(53.8, abs=0.1)
    assert "between 81% and 124%" in s.sentence and "+54%" in s.sentence
    assert "98%" not in s.sentence


def test_share_over_100_is_not_a_share():
    s = share([110.0, 111.0], [100.0, 101.0], part_label="the step", reference_label="GEMM ceiling")
    assert not s.clear and "measured low" in s.sentence
    # issue 49: "reads 126% (87-155%)" quoted the median of an impossible share; only the range is said
    assert (
        "109%" not in s.sentence.split("(")[0]
        and "is 109-111% of the GEMM ceiling, a range that reaches above it" in s.sentence
    )


def test_bad_samples_fail_early():
    with pytest.raises(WorkshopError, match="no samples"):
        compare([None], [1.0], a_label="A", b_label="B")
    with pytest.raises(WorkshopError, match="positive"):
        share([1.0], [0.0], part_label="p", reference_label="r")


def test_two_samples_each_need_an_effect_well_beyond_their_spread():
    """Two runs of two: samples of the same thing fail to overlap one time in three."""
    weak = compare([252.0, 517.8], [84.7, 181.3], a_label="2 threads", b_label="1 thread")
    assert weak.low > 1 and not weak.clear and "within noise" in weak.sentence
    strong = compare([2474.0, 2300.0], [62.0, 60.0], a_label="workbook", b_label="original")
    assert strong.clear and strong.winner == "workbook"
    assert not compare([1.015, 1.058], [1.0, 1.0], a_label="A", b_label="B", paired=True).clear


def test_three_agreeing_rounds_are_not_enough_when_their_ratios_scatter():
    """Every one of 3 paired ratios above 1 happens 1 time in 4 with no real difference: that alone is no
    verdict; 5 rounds that agree are (1 in 16), and 3 rounds whose effect dwarfs their scatter are too."""
    a3, b3 = [105.0, 110.0, 130.0], [100.0, 100.0, 100.0]  # x1.10 median, ratios 1.05-1.30
    assert not compare(a3, b3, a_label="A", b_label="B", paired=True).clear
    a5, b5 = a3 + [108.0, 112.0], b3 + [100.0, 100.0]
    assert compare(a5, b5, a_label="A", b_label="B", paired=True).clear
    big = compare([200.0, 205.0, 210.0], [100.0, 100.0, 100.0], a_label="A", b_label="B", paired=True)
    assert big.clear and big.winner == "A"
