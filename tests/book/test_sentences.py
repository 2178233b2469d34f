"""Sentences the chapters print whose range comes from the rows beside them (issue 49)."""

from workshop.book import sentences
from workshop.plan.costcheck import CheckRow, original_gpu_rows


def test_the_offload_gap_is_the_range_of_the_rows_it_follows():
    """Chapter 06 said the planner's terms explain "a few seconds of a 20-150 s step" beside a p4d ENI row
    whose terms add to 41 s: the sentence is now the range over the rows themselves."""
    rows = original_gpu_rows()
    said = sentences.planner_share(rows)
    shares = [r.predicted / r.measured for r in rows]
    assert f"{min(shares):.0%}-{max(shares):.0%} of these {len(rows)} measured steps" in said
    assert f"x{1 / max(shares):.1f} to x{1 / min(shares):.1f} slower" in said
    two = [CheckRow("a", 1.0, 4.0, "s/step", None, "", ""), CheckRow("b", 1.0, 2.0, "s/step", None, "", "")]
    assert sentences.planner_share(two).startswith("the planner's terms add up to 25%-50% of these 2")
