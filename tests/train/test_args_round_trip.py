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


def test_overlap_comm_is_what_the_planner_prices():
    """One constant (plan.traffic.OVERLAP_COMM): the config overlaps where the planner hides comms, and only
    there (GPU: NCCL on its own streams; CPU: gloo on the cores that compute)."""
    from workshop.plan import rates, traffic
    from workshop.plan.catalog import instance_info
    from workshop.plan.nodes import node_for
    from workshop.plan.options import Options

    for backend, device, itype in (("gloo", "cpu", "c7i.48xlarge"), ("nccl", "gpu", "p5.48xlarge")):
        overlaps = ds_config(TrainArgs(), backend)["zero_optimization"]["overlap_comm"]
        hidden = node_for(instance_info(itype, source="moto"), Options(source="moto")).overlap.value
        assert overlaps is traffic.OVERLAP_COMM[device]
        assert (hidden > 0) is overlaps, (device, overlaps, hidden)
    assert not traffic.OVERLAP_COMM["cpu"] and traffic.OVERLAP_COMM["gpu"]
    assert rates.OVERLAP["gpu"].value == traffic.HIDDEN_WHEN_OVERLAPPED
