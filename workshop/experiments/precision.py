"""bf16 against fp16, measured: why the original workshop (and this workbook) trains in bf16, never fp16.

Both formats have 16 bits. fp16 spends 10 on the mantissa and 5 on the exponent, so it tops out at 65,504 and
loses anything below ~6e-8; bf16 keeps fp32's 8-bit exponent (same range as fp32) and pays with precision
(3 significant digits). Training needs range more than digits: activations and logits grow past 65,504 and
small gradients fall below fp16's smallest value. fp16 therefore needs *loss scaling* (multiply the loss so
gradients stay representable, skip a step and halve the scale when they overflow); bf16 needs none.
Every number here is computed on this machine, in milliseconds, on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from workshop.lang import N_, _


def formats() -> list[dict]:
    """Bits, largest value, smallest normal value and epsilon of fp32, bf16 and fp16 (torch.finfo)."""
    import torch

    out = []
    for name, dt, exp, man in (
        ("fp32", torch.float32, 8, 23),
        ("bf16", torch.bfloat16, 8, 7),
        ("fp16", torch.float16, 5, 10),
    ):
        f = torch.finfo(dt)
        out.append(
            {
                "format": name,
                "exponent_bits": exp,
                "mantissa_bits": man,
                "max": f.max,
                "smallest_normal": f.smallest_normal,
                "eps": f.eps,
            }
        )
    return out


def overflow_examples(seed: int = 0) -> list[dict]:
    """Values and one real matmul that fp16 cannot hold and bf16 can (count of inf / lost entries,
    measured)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    rows = []
    for label, value in ((N_("an activation of 70,000"), 70_000.0), (N_("a gradient of 1e-8"), 1e-8)):
        x = torch.tensor(value)
        rows.append({"case": label, "fp32": float(x), "bf16": float(x.bfloat16()), "fp16": float(x.half())})
    # Attention-like scores: q . k over a 4096-wide hidden size with activations of magnitude ~10; the
    # diagonal (q . q = 4096 x 100) is past fp16's 65,504.
    q = torch.randn(64, 4096, generator=g) * 10
    exact = q @ q.T
    for name, dt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        y = (q.to(dt) @ q.to(dt).T).float()
        rows.append(
            {
                "case": _("64x64 scores q.k^T (hidden 4096, |x|~10) in {name}").format(name=name),
                "inf_entries": int((~torch.isfinite(y)).sum()),
                "entries": y.numel(),
                # error of the finite entries, relative to the largest score (entries near 0 have no own
                # scale)
                "max_rel_error_finite": float((y - exact).abs()[torch.isfinite(y)].max() / exact.abs().max()),
            }
        )
    return rows


@dataclass
class ScalingStep:
    step: int
    scale: float
    finite: bool  # were the scaled fp16 gradients finite?
    applied: bool  # did the optimizer step run (GradScaler skips it on inf/nan)


def loss_scaling_run(
    steps: int = 10, *, init_scale: float = 2.0**16, grad_size: float = 30.0, seed: int = 0
) -> list[ScalingStep]:
    """A small fp16-autocast regression trained with torch's dynamic loss scaler, on the CPU.

    The inputs make the true gradients ~`grad_size`, so the scaled gradients (x 65,536) overflow fp16: the
    scaler skips the step and halves the scale until they fit, then trains, exactly what DeepSpeed's fp16
    section does (its `loss_scale: 0` = dynamic). With bf16 none of this is needed.
    """
    import torch

    torch.manual_seed(seed)
    model = torch.nn.Linear(256, 256)
    x = torch.randn(32, 256) * grad_size
    target = torch.randn(32, 256)
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=1000)
    out = []
    for i in range(steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.float16):
            loss = torch.nn.functional.mse_loss(model(x).float(), target)
        scale = scaler.get_scale()
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        finite = all(torch.isfinite(p.grad).all() for p in model.parameters())
        scaler.step(opt)
        scaler.update()
        out.append(ScalingStep(i, scale, bool(finite), applied=bool(finite)))
    return out


def report(steps: int = 10) -> str:
    """The three measurements as the text chapter 04 prints (one string): each format's exponent and mantissa
    bits, range and epsilon, then what `steps` steps of each do to the loss."""
    lines = [f"{'format':6s} {'exp':>3s} {'mant':>4s} {'max':>12s} {'smallest normal':>16s} {'eps':>10s}"]
    lines += [
        f"{f['format']:6s} {f['exponent_bits']:3d} {f['mantissa_bits']:4d} {f['max']:12.4g} "
        f"{f['smallest_normal']:16.4g} {f['eps']:10.3g}"
        for f in formats()
    ]
    for r in overflow_examples():
        if "fp16" in r:
            lines.append(f"{_(r['case'])}: fp32 {r['fp32']:.4g}, bf16 {r['bf16']:.4g}, fp16 {r['fp16']:.4g}")
        elif r["inf_entries"] < r["entries"]:
            lines.append(
                _(
                    "{case}: {inf} of {entries} entries inf, finite ones off by at most {err:.2%} of the "
                    "largest score"
                ).format(
                    case=r["case"], inf=r["inf_entries"], entries=r["entries"], err=r["max_rel_error_finite"]
                )
            )
        else:
            lines.append(
                _("{case}: {inf} of {entries} entries inf").format(
                    case=r["case"], inf=r["inf_entries"], entries=r["entries"]
                )
            )
    run = loss_scaling_run(steps)
    skipped = [s.step for s in run if not s.applied]
    lines.append(
        _(
            "fp16 + dynamic loss scaling, {steps} steps: {n} skipped on overflow (steps {skipped}), scale "
            "{first:.0f} -> {last:.0f}; then every step applied"
        ).format(steps=steps, n=len(skipped), skipped=skipped, first=run[0].scale, last=run[-1].scale)
    )
    return "\n".join(lines)
