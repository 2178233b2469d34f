"""TrainArgs survive their own command line; the DeepSpeed config follows them (offload: CPU Adam)."""

from workshop.train import TrainArgs, parse_args
from workshop.train.deepspeed_config import ds_config


def test_argv_round_trip_and_ds_config():
    a = TrainArgs(
        model="small", zero_stage=3, offload_optimizer=True, offload_param=True, packing=False, threads=2
    )
    assert parse_args(a.to_argv()) == a
    cfg = ds_config(a)
    assert cfg["zero_optimization"]["offload_param"] == {"device": "cpu"}
    assert cfg["optimizer"]["type"] == "AdamW"  # ZeRO-Offload needs DeepSpeed's CPU Adam
    assert (
        "optimizer" not in ds_config(TrainArgs()) and ds_config(TrainArgs())["zero_allow_untested_optimizer"]
    )
