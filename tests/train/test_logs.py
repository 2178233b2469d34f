"""Parsing the logs: the original workshop's own ZeRO-3 stage log, and the METRIC lines of the entry point."""

from workshop.tables import table
from workshop.train.logs import parse_metrics, parse_zero_stages

SEED_LOG = """\
Stage 3 initialize beginning
MA 4.81 GB         Max_MA 4.81 GB         CA 4.81 GB         Max_CA 5 GB
CPU Virtual Memory:  used = 26.09 GB, percent = 3.5%
Before creating fp32 partitions
MA 5.44 GB         Max_MA 5.44 GB         CA 5.44 GB         Max_CA 5 GB
CPU Virtual Memory:  used = 32.06 GB, percent = 4.3%
After initializing ZeRO optimizer
MA 24.47 GB         Max_MA 24.47 GB         CA 24.47 GB         Max_CA 24 GB
CPU Virtual Memory:  used = 104.54 GB, percent = 14.1%
"""


def test_parse_seed_zero_stages():
    stages = parse_zero_stages(SEED_LOG)
    assert [s["stage"] for s in stages] == [
        "Stage 3 initialize beginning",
        "Before creating fp32 partitions",
        "After initializing ZeRO optimizer",
    ]
    assert stages[-1]["ma_gb"] == 24.47 and stages[-1]["host_used_gb"] == 104.54
    assert "24.47" in table(stages)


def test_parse_metrics_skips_noise_and_rank_prefixes():
    text = (
        'noise\n[default0]:METRIC {"step": 1, "loss": 9.0}\n'
        'METRIC {"step": 2, "loss": 8.5}\nMETRIC {"step": 3,'
    )
    assert [m["step"] for m in parse_metrics(text)] == [1, 2]


def test_metrics_medians_skip_the_warm_up_step_and_are_statistics_median():
    """An even number of steady steps gives the mean of the middle two (statistics.median, like the rest of
    the package), not the upper one; a step without a rate is left out."""
    from workshop.train.metrics import summarize

    steps = [{"loss": 9.0, "tokens_per_s": 1.0, "step_time_s": 9.0}] + [
        {"loss": 8.0, "tokens_per_s": t, "step_time_s": 1 / t} for t in (100.0, 400.0, 200.0, 300.0)
    ]
    m = summarize(steps, world_size=2)
    assert m["tokens_per_s_median"] == 250.0 and m["step_time_s_median"] == (1 / 200 + 1 / 300) / 2
    assert (m["first_loss"], m["final_loss"], m["world_size"]) == (9.0, 8.0, 2)
    assert summarize([{"loss": 1.0, "tokens_per_s": None, "step_time_s": 0.5}])["tokens_per_s_median"] is None
    assert summarize([])["tokens_per_s_median"] is None
