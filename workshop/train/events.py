"""TensorBoard event files beside the checkpoints: what a 10-day run shows after the notebook has closed.

Rank 0 writes <output-dir>/tensorboard (on FSx with the shared volume; uploaded with the checkpoints with
`--sync-to s3://...`): train loss, held-out loss and perplexity, tokens/s and the learning rate, by step. Open
them with `tensorboard --logdir <output-dir>/tensorboard`. The METRIC lines are the same with or without.
"""

from __future__ import annotations

from pathlib import Path

EVENTS_DIR = "tensorboard"
# a METRIC record's field -> its TensorBoard tag
TAGS = {
    "loss": "train/loss",
    "eval_loss": "eval/loss",
    "eval_perplexity": "eval/perplexity",
    "tokens_per_s": "train/tokens_per_s",
    "lr": "train/lr",
}


class EventWriter:
    """Writes each METRIC record's scalars as one step of event data (torch.utils.tensorboard)."""

    def __init__(self, out: Path):
        from torch.utils.tensorboard import SummaryWriter

        self.dir = Path(out) / EVENTS_DIR
        self.writer = SummaryWriter(log_dir=str(self.dir))

    def __call__(self, rec: dict) -> None:
        for key, tag in TAGS.items():
            if rec.get(key) is not None:
                self.writer.add_scalar(tag, float(rec[key]), global_step=int(rec["step"]))
        self.writer.flush()  # a run killed mid-way keeps every step written so far

    def close(self) -> None:
        self.writer.close()


def read_events(folder: str | Path) -> dict[str, list[tuple[int, float]]]:
    """tag -> [(step, value), ...] of the event files in `folder` (what TensorBoard would plot)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
