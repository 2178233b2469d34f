"""workshop bench ceiling: the matmul shapes, the ratios, and a real (tiny) interleaved run."""

import pytest

from workshop import ceiling
from workshop.errors import WorkshopError


def test_gemm_shapes_follow_the_config():
    shapes = {name: (m, k, n) for name, m, k, n in ceiling.gemm_shapes("tiny", 512)}
    # tiny: hidden 256, 8 heads (head 32), 4 kv heads, intermediate 688, vocab 8192
    assert shapes["q_proj"] == (512, 256, 256) and shapes["k_proj"] == (512, 256, 128)
    assert shapes["down_proj"] == (512, 688, 256) and shapes["lm_head"] == (512, 256, 8192)


def test_ceiling_weights_shapes_by_use():
    r = ceiling.gemm_ceiling("tiny", 128, threads=1, repeats=2)
    assert r["tflops"] > 0 and {s["name"] for s in r["shapes"]} >= {"q_proj", "lm_head"}
    assert next(s for s in r["shapes"] if s["name"] == "q_proj")["count"] == 4  # one per layer


def test_bad_lever_is_named_with_the_allowed_ones():
    with pytest.raises(WorkshopError, match="'flash'.*compile"):
        ceiling.CeilingConfig(levers=("flash",)).validate()


def test_run_reports_share_of_ceiling_and_paired_ratios(monkeypatch):
    monkeypatch.setattr(ceiling, "gemm_ceiling", lambda *a, **k: {"tflops": 0.1, "shapes": []})
    speed = {"base": 100.0, "compile": 150.0}

    def fake(v, cfg, r):
        return {"tokens_per_s": speed[v.name] * (1 + 0.1 * r)}

    out = ceiling.run(ceiling.CeilingConfig(model="tiny", levers=("compile",), steps=3, rounds=2), echo=lambda *_: None,
                      runner=fake)
    rows = {r["lever"]: r for r in out["rows"]}
    assert rows["compile"]["vs_base"]["median"] == pytest.approx(1.5)
    assert 0 < rows["base"]["pct_of_ceiling"] < rows["compile"]["pct_of_ceiling"]
    assert out["env"]["cpu_model"] and out["isa_path"]
    assert "compile" in ceiling.format_rows(out)


@pytest.mark.slow
def test_tiny_ceiling_run_end_to_end(tmp_path):
    out = ceiling.run(ceiling.CeilingConfig(model="tiny", seq_len=128, steps=3, rounds=1, levers=("unfused_adamw",),
                                            out_dir=str(tmp_path)), echo=lambda *_: None)
    for r in out["rows"]:
        assert 0 < r["pct_of_ceiling"] / 100 <= 1.5, r
        assert r["tokens_per_s"] > 0
