"""LoRA in the planners: the adapter count PEFT makes, the memory it saves, and `workshop plan --method lora`
ranking plans (cheaper per token than the full fine-tune, and on smaller machines)."""

from workshop.plan.cost import rank
from workshop.plan.memory import GiB, lora_params, plan_memory
from workshop.plan.models import architecture
from workshop.plan.options import Options


def test_adapter_count_is_what_peft_makes():
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from workshop.plan.models import build_config
    from workshop.train.args import TrainArgs
    from workshop.train.lora import lora_config, trainable_count

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(build_config("small"))
    peft_model = get_peft_model(model, lora_config(TrainArgs(method="lora")))
    assert trainable_count(peft_model) == lora_params(architecture("small"))


def test_lora_keeps_frozen_weights_and_drops_their_optimizer_state():
    full = plan_memory("llama-3-8b", world_size=8)
    lora = plan_memory("llama-3-8b", world_size=8, method="lora")
    assert lora.components["params"] >= full.components["params"]  # the weights are all still there
    for k in ("grads", "master_fp32", "adam_moments"):
        assert lora.components[k] < full.components[k] / 100
    assert lora.components["activations"] == full.components["activations"]
    assert (full.total - lora.total) / GiB > 100 / 8  # 8B x 14 B of state, split 8 ways, mostly gone
    assert "LoRA adapters only" in lora.explain()


def test_plan_method_lora_ranks_plans_cheaper_than_full():
    opts = dict(families=("g6e", "p5"), tokens=1e8)
    full, lora = rank(Options(**opts)), rank(Options(method="lora", **opts))
    assert full and lora and all(p.method == "lora" for p in lora)
    assert lora[0].usd < full[0].usd
    assert min(p.nodes * p.procs_per_node for p in lora) < min(p.nodes * p.procs_per_node for p in full)
    assert "LoRA" in lora[0].sources["flops"]


def test_chapter_01s_side_by_side_has_each_methods_cheapest_plan_and_memory():
    from workshop.plan.methods import cheapest_by_method

    opts = Options(families=("g6e", "p5"), tokens=1e8)
    rows = {r["method"]: r for r in cheapest_by_method(opts)}
    assert set(rows) == {"full", "lora"}
    assert rows["lora"]["gib_per_rank"] < rows["full"]["gib_per_rank"]
    assert rows["lora"]["usd"] < rows["full"]["usd"]
