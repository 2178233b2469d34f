"""bf16 weights with fp32 master copies (workshop.train.master_weights): the update that bf16 alone would lose
is kept."""

import copy

import pytest
import torch

from workshop.train.master_weights import MASTER_KEY, with_master_weights


def bf16_model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).to(
        torch.bfloat16
    )


def train(model, opt, steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g).to(next(model.parameters()).dtype)
        loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()


def test_small_updates_accumulate_in_the_masters_and_reach_the_bf16_weights():
    """lr 1e-4 moves a weight of ~0.1 by ~1e-4 per step, below bf16's step of ~5e-4 there: plain bf16 AdamW
    rounds every update away; the masters add them up until the bf16 weight moves."""
    plain, masters = bf16_model(), bf16_model()
    start = [p.detach().clone() for p in plain.parameters()]
    train(plain, torch.optim.AdamW(plain.parameters(), lr=1e-4, weight_decay=0.0), 10)
    opt = with_master_weights(torch.optim.AdamW)(masters.parameters(), lr=1e-4, weight_decay=0.0)
    train(masters, opt, 10)
    frozen = sum(int((p == s).sum()) for p, s in zip(plain.parameters(), start))
    moved = sum(int((p != s).sum()) for p, s in zip(masters.parameters(), start))
    total = sum(p.numel() for p in start)
    assert frozen > 0.5 * total  # most plain-bf16 weights never changed
    assert moved > 0.5 * total  # most weights moved through their masters
    for m, p in zip(opt.master_params, masters.parameters()):
        assert m.dtype == torch.float32 and p.dtype == torch.bfloat16
        assert torch.equal(m.to(torch.bfloat16), p)  # the model holds exactly the rounded masters
        assert m.grad is None and p.grad is None  # no gradient kept between steps


def test_matches_fp32_training_to_bf16_precision():
    """Same steps on fp32 weights (the reference): the masters follow it far closer than plain bf16 weights
    do."""
    ref = bf16_model().float()
    masters, plain = bf16_model(), bf16_model()
    train(ref, torch.optim.AdamW(ref.parameters(), lr=1e-3), 30)
    opt = with_master_weights(torch.optim.AdamW)(masters.parameters(), lr=1e-3)
    train(masters, opt, 30)
    train(plain, torch.optim.AdamW(plain.parameters(), lr=1e-3), 30)
    err_m = max(float((m - r.detach()).abs().max()) for m, r in zip(opt.master_params, ref.parameters()))
    err_p = max(
        float((p.detach().float() - r.detach()).abs().max())
        for p, r in zip(plain.parameters(), ref.parameters())
    )
    assert err_m < 0.5 * err_p, (err_m, err_p)


def test_param_groups_and_fused_kernel_are_kept():
    model = bf16_model()
    decay, no_decay = list(model[0].parameters()), list(model[2].parameters())
    opt = with_master_weights(torch.optim.AdamW)(
        [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
        lr=1e-3,
        fused=True,
    )
    assert [g["weight_decay"] for g in opt.param_groups] == [0.1, 0.0] and opt.defaults["fused"]
    assert all(p.dtype == torch.float32 for g in opt.param_groups for p in g["params"])
    assert isinstance(opt, torch.optim.AdamW) and type(opt).__name__ == "AdamWWithMasterWeights"
    train(model, opt, 2)


def test_state_dict_carries_the_masters_so_a_resume_continues_in_fp32():
    a = bf16_model()
    opt_a = with_master_weights(torch.optim.AdamW)(a.parameters(), lr=1e-4)
    train(a, opt_a, 5)
    saved = copy.deepcopy(opt_a.state_dict())  # as torch.save + torch.load give it back
    assert len(saved[MASTER_KEY]) == 4
    b = bf16_model(seed=7)  # what a resumed run holds before loading: the checkpoint's bf16 weights
    with torch.no_grad():
        for pb, pa in zip(b.parameters(), a.parameters()):
            pb.copy_(pa)
    opt_b = with_master_weights(torch.optim.AdamW)(b.parameters(), lr=1e-4)
    opt_b.load_state_dict(saved)
    for ma, mb in zip(opt_a.master_params, opt_b.master_params):
        assert torch.equal(ma, mb)  # fp32, not the bf16 rounding the model weights alone would give
    train(a, opt_a, 3, seed=3)
    train(b, opt_b, 3, seed=3)
    for pa, pb in zip(a.parameters(), b.parameters()):
        assert torch.equal(pa, pb)


def test_a_checkpoint_from_another_model_is_refused():
    opt = with_master_weights(torch.optim.AdamW)(bf16_model().parameters(), lr=1e-4)
    bad = {**opt.state_dict(), MASTER_KEY: [torch.zeros(3)]}
    with pytest.raises(ValueError, match="checkpoint holds 1 master weights, this model has 4"):
        opt.load_state_dict(bad)


def test_clipping_inside_the_step_matches_torch_and_reports_the_norm():
    """max_grad_norm clips like torch.nn.utils.clip_grad_norm_ (same norm, same update) in the optimizer's
    pass."""
    a, b = bf16_model(), bf16_model()
    opt_a = with_master_weights(torch.optim.AdamW)(a.parameters(), lr=1e-2)
    opt_b = with_master_weights(torch.optim.AdamW, max_grad_norm=0.05)(b.parameters(), lr=1e-2)
    for model in (a, b):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(3)).to(torch.bfloat16)
        model(x).float().pow(2).mean().backward()
    norm = torch.nn.utils.get_total_norm([p.grad.float() for p in a.parameters()])  # clip_grad_norm_'s norm
    for p in a.parameters():  # what the Trainer did before: clip the bf16 gradients in place, then step
        p.grad = (p.grad.float() * min(1.0, 0.05 / (float(norm) + 1e-6))).to(torch.bfloat16)
    opt_a.step()
    opt_b.step()
    assert opt_b.last_grad_norm == pytest.approx(float(norm), rel=1e-5) and float(norm) > 0.05
    for ma, mb in zip(opt_a.master_params, opt_b.master_params):
        torch.testing.assert_close(
            ma, mb, rtol=1e-2, atol=1e-5
        )  # a's clipped grads were rounded to bf16 once more


def test_grad_divisor_turns_a_summed_all_reduce_into_the_average():
    """A summed all-reduce over 2 ranks with grad_divisor=2 steps exactly like the averaged gradients (the
    norm reported is the average's)."""
    a, b = bf16_model(), bf16_model()
    opt_a = with_master_weights(torch.optim.AdamW, max_grad_norm=1.0)(a.parameters(), lr=1e-3)
    opt_b = with_master_weights(torch.optim.AdamW, max_grad_norm=1.0, grad_divisor=2)(b.parameters(), lr=1e-3)
    for model, factor in ((a, 1), (b, 2)):
        x = torch.randn(8, 16, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
        (model(x).float().pow(2).mean() * factor).backward()  # b holds twice the gradient: a sum over 2 ranks
    opt_a.step()
    opt_b.step()
    assert opt_b.last_grad_norm == pytest.approx(opt_a.last_grad_norm, rel=1e-6)
    for ma, mb in zip(opt_a.master_params, opt_b.master_params):
        assert torch.equal(ma, mb)


@pytest.mark.slow
def test_compiled_step_is_torch_adamw_in_one_pass_and_checkpoints_alike():
    """The compiled step (clip, cast, AdamW, round in one pass per tensor) follows torch's AdamW on the
    masters to fp32 rounding across a changing learning rate and two parameter groups, without recompiling
    each step, and its state loads into the eager path."""
    from torch._dynamo.utils import counters

    def groups(model):
        return [
            {"params": list(model[0].parameters()), "weight_decay": 0.1},
            {"params": list(model[2].parameters()), "weight_decay": 0.0},
        ]

    eager, fused = bf16_model(), bf16_model()
    opt_e = with_master_weights(torch.optim.AdamW, max_grad_norm=1.0)(groups(eager), lr=1e-3)
    opt_f = with_master_weights(torch.optim.AdamW, compiled_step=True, max_grad_norm=1.0)(
        groups(fused), lr=1e-3
    )
    assert opt_f.compiled_step and not opt_e.compiled_step
    counters.clear()
    for step in range(6):
        for model in (eager, fused):
            x = torch.randn(8, 16, generator=torch.Generator().manual_seed(step)).to(torch.bfloat16)
            model(x).float().pow(2).mean().backward()
        opt_e.step()
        opt_f.step()
        opt_e.zero_grad()
        opt_f.zero_grad()
        for opt in (opt_e, opt_f):
            for g in opt.param_groups:
                g["lr"] *= 0.8  # a schedule: a new learning rate every step
    assert counters["stats"]["unique_graphs"] <= 2  # one graph per parameter group, not one per step
    for me, mf, pf in zip(opt_e.master_params, opt_f.master_params, fused.parameters()):
        torch.testing.assert_close(me, mf, rtol=1e-5, atol=1e-7)
        assert torch.equal(mf.to(torch.bfloat16), pf) and pf.grad is None
    assert opt_f.last_grad_norm == pytest.approx(opt_e.last_grad_norm, rel=1e-5)
    resumed = bf16_model(seed=9)
    opt_r = with_master_weights(torch.optim.AdamW, max_grad_norm=1.0)(groups(resumed), lr=1e-3)
    opt_r.load_state_dict(copy.deepcopy(opt_f.state_dict()))
    for mf, mr in zip(opt_f.master_params, opt_r.master_params):
        assert torch.equal(mf, mr)
