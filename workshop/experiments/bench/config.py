"""What every training benchmark shares (`BenchConfig`) and the names of the benchmarks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from workshop.errors import (
    WorkshopError,
    check_positive,
    read_text,
)
from workshop.paths import IMAGES_DIR, RESULTS_DIR
from workshop.plan.models import SEQ_LEN
from workshop.train.data import build_corpus

# Which variants each training benchmark compares: (A, B); ratios are A / B.
TRAINING_BENCHMARKS: dict[str, tuple[str, str]] = {
    "recipes": ("workbook", "original"),
    "engine": ("workbook", "original_engine_packed"),
    "precision": ("workbook", "workbook_fp32"),
}
BENCHMARKS = (*TRAINING_BENCHMARKS, "gemm", "ipex", "workbook")
# Run on its own (its options differ): `workshop bench ceiling ...` is workshop.cli.bench.ceiling.
OWN_COMMAND = ("ceiling",)


@dataclass
class BenchConfig:
    """What every variant shares: same model, data file, step count and rank count."""

    model: str = "small"
    dataset: str | None = None  # a text file, one sample a line; None = the local paragraph corpus
    steps: int = 8
    rounds: int = 2
    nproc: int = 2
    seq_len: int = SEQ_LEN
    cache_dir: str = "~/.cache/workshop"
    out_dir: str = "out/bench"
    results_dir: str = str(RESULTS_DIR)
    images_dir: str = str(IMAGES_DIR)
    timeout_s: float = 1800

    def validate(self) -> None:
        for name in ("steps", "rounds", "nproc", "seq_len"):
            check_positive(name, getattr(self, name))
        if self.steps < 3:
            raise WorkshopError(
                f"steps must be >= 3 (the first, warm-up step is left out of medians), got {self.steps}"
            )
        if self.dataset is not None:  # its head: a folder, an empty or a binary file fail here
            read_text(self.dataset, "--dataset", "a UTF-8 text file, one sample per line", limit=1 << 16)

    def dataset_path(self) -> Path:
        if self.dataset:
            return Path(self.dataset)

        return build_corpus(Path(self.cache_dir).expanduser() / "corpus.txt")
