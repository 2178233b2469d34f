import pytest

from workshop.errors import WorkshopError
from workshop.train.threads import THREADS_BY_STEP, threads_by_step


def test_threads_by_step_reads_one_count_per_step(monkeypatch):
    monkeypatch.delenv(THREADS_BY_STEP, raising=False)
    assert threads_by_step() is None
    monkeypatch.setenv(THREADS_BY_STEP, "1,1,2, 2")
    assert threads_by_step() == [1, 1, 2, 2]


@pytest.mark.parametrize("bad", ["1,0", "1,two", "1,,2", "-1"])
def test_threads_by_step_refuses_a_bad_count_naming_it(bad):
    with pytest.raises(
        WorkshopError, match=rf"{THREADS_BY_STEP}: .* is not a thread count; allowed: integers"
    ):
        threads_by_step(bad)
