"""Runs INSIDE the separate IPEX environment (torch 2.8, transformers 4.51.3): stock vs IPEX training steps.

Self-contained on purpose (no `workshop` import, no tokenizer): it gets the model config and pre-tokenized
blocks as JSON from `workshop bench ipex`, builds the same random-weight Llama twice, and times the two
interleaved, printing one JSON line. With "stock_only" both arms are stock PyTorch (tests the plumbing).
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time
from typing import Any


def main(spec_path: str) -> int:
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    with open(spec_path) as fh:
        spec = json.load(fh)
    torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    cfg = {k: v for k, v in spec["config"].items() if k != "rope_parameters"}
    model = LlamaForCausalLM(LlamaConfig(**cfg))
    blocks = torch.tensor(spec["blocks"], dtype=torch.long)
    mb = spec["micro_batch"]
    arms = {}
    for arm in ("stock", "ipex"):
        m = copy.deepcopy(model).train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
        if arm == "ipex" and not spec.get("stock_only"):
            import intel_extension_for_pytorch as ipex

            m, opt = ipex.optimize(m, optimizer=opt, dtype=torch.bfloat16)
        arms[arm] = (m, opt)

    def steps(arm, n, offset):
        m, opt = arms[arm]
        t0 = time.perf_counter()
        for i in range(n):
            j = (offset + i) * mb % max(1, len(blocks) - mb)
            batch = blocks[j : j + mb]
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = m(input_ids=batch, labels=batch).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        return n * mb * blocks.shape[1] / (time.perf_counter() - t0)

    # one JSON line for `workshop bench ipex`: tokens/s per arm and round, then medians and versions
    out: dict[str, Any] = {"stock_tokens_per_s": [], "ipex_tokens_per_s": []}
    for arm in arms:  # warm-up (oneDNN kernel generation, optimizer state allocation), not timed
        steps(arm, 2, 0)
    for r in range(spec["rounds"]):  # interleaved: stock, ipex, stock, ipex ...
        for arm in arms:
            out[f"{arm}_tokens_per_s"].append(steps(arm, spec["steps"], r * spec["steps"]))
    out.update(
        torch=torch.__version__,
        transformers=transformers.__version__,
        stock_median=statistics.median(out["stock_tokens_per_s"]),
        ipex_median=statistics.median(out["ipex_tokens_per_s"]),
        stock_only=bool(spec.get("stock_only")),
    )
    if not spec.get("stock_only"):
        import intel_extension_for_pytorch as ipex

        out["ipex"] = ipex.__version__
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
