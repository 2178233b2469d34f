"""The launcher refuses bad input before it starts anything: more ranks than cores, an unknown model, a limit
that is not a positive number of seconds."""

import pytest

from workshop.errors import WorkshopError
from workshop.launch.torchrun import check_fits, run_torchrun


def test_more_ranks_than_cores_is_refused(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    with pytest.raises(WorkshopError, match=r"nproc_per_node=3 .* allowed: 1..2"):
        check_fits(3, 1)
    with pytest.raises(WorkshopError, match=r"2 ranks x 2 threads"):
        check_fits(2, 2)
    check_fits(2, 1)


def test_run_torchrun_validates_before_starting_anything(tmp_path):
    with pytest.raises(WorkshopError, match="unknown model"):
        run_torchrun(["--model", "nope", "--output-dir", str(tmp_path)], nproc_per_node=1, progress=False)
    assert not any(tmp_path.iterdir()), "nothing may be written for a refused run"


def test_a_limit_that_is_not_positive_is_refused(tmp_path):
    for bad in ({"timeout": 0}, {"step_timeout": -5}):
        with pytest.raises(WorkshopError, match=f"{next(iter(bad))} must be a number > 0"):
            run_torchrun(
                ["--max-steps", "1", "--output-dir", str(tmp_path)], nproc_per_node=1, progress=False, **bad
            )
    assert not any(tmp_path.iterdir()), "nothing may be written for a refused run"
