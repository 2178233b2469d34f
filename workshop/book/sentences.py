"""Sentences the chapters' code cells print, kept here so they go through the catalog: a code cell is the
same bytes in the English and the Korean notebook, so what it prints in the learner's language must come from
the package (`_()`), never from a string literal in the cell."""

from __future__ import annotations

from collections.abc import Sequence

from workshop import tables
from workshop.lang import _
from workshop.plan import hardware, topology
from workshop.plan.catalog import PRICE_SOURCE
from workshop.plan.costcheck import CheckRow
from workshop.plan.hardware import AMX_BF16_FLOP_PER_CYCLE


def amx_peak(name: str, cores: int, catalog_ghz: float, h100_tflops: float) -> str:
    """Chapter 01: an AMX host's theoretical peak at the one clock this workbook prices AMX at (the measured
    AMX host's, calibration.cpu_clock_basis: every share of peak stands on it), the catalog's sustained clock
    named beside it, and the original workshop's claim against that peak. Two lines of text."""
    from workshop.plan.calibration import cpu_clock_basis

    clock = cpu_clock_basis()
    peak = cores * clock.value * AMX_BF16_FLOP_PER_CYCLE / 1000
    return (
        _(
            "{name}: {cores} cores x {clock:g} GHz x {flop} = {peak:.0f} TFLOPS AMX peak at "
            "{cite}; the catalog's sustained {catalog:g} GHz would give {catalog_peak:.0f} TFLOPS, but no "
            "share in this workbook is of that clock"
        ).format(
            name=name,
            cores=cores,
            clock=clock.value,
            flop=AMX_BF16_FLOP_PER_CYCLE,
            peak=peak,
            cite=_(clock.source),
            catalog=catalog_ghz,
            catalog_peak=cores * catalog_ghz * AMX_BF16_FLOP_PER_CYCLE / 1000,
        )
        + "\n"
        + _(
            "the original workshop's 30-50 TFLOPS = {low:.0f}-{high:.0f}% of it; "
            "H100 dense bf16 / AMX peak = {ratio:.1f}x"
        ).format(low=3000 / peak, high=5000 / peak, ratio=h100_tflops / peak)
    )


def plans_within(margin: float, usd: float, tokens: float) -> str:
    """Chapter 02: the heading of the plans within `margin` (a fraction, 0.1 = 10%) of the cheapest, which
    costs `usd` (US dollars) for `tokens` (a count)."""
    return _(
        "the first plan, and every plan within {margin:.0%} of the cheapest "
        "(${usd:,.0f} for {tokens:.3g} tokens):"
    ).format(margin=margin, usd=usd, tokens=tokens)


def validation(product: str, release: str, problems: Sequence[object]) -> str:
    """`Karpenter 1.8.8: valid: ...`, or the problems found."""
    verdict = problems or _("valid: every schema check and every evaluable CEL rule passes")
    return f"{product} {release}: {verdict}"


def offline_apply(docs: Sequence[dict], path: object) -> str:
    """Chapter 02: what a server-side apply of `docs` would do, and the kubectl command that does it (two
    lines)."""
    names = ", ".join(d["kind"] + "/" + d["metadata"]["name"] for d in docs)
    return (
        _("offline: would server-side apply {names}").format(names=names)
        + "\n"
        + _("same as: kubectl apply --server-side --field-manager=workshop -f {path}").format(path=path)
    )


def weights_match() -> str:
    """Chapter 03: the sentence for loaded weights that equal the file on every rank."""
    return _("weights equal the file everywhere; ZeRO-3 ranks hold 1/N of the elements each")


def plan_gap(gaps: Sequence[float]) -> str:
    """Chapter 03: the range of measured peak minus planned peak, per rank run (`gaps` in GB)."""
    return _(
        "measured peak - plan*: {low:+.2f} to {high:+.2f} GB over {n} rank runs "
        "(meta: compare plan* with 'used')"
    ).format(low=min(gaps), high=max(gaps), n=len(gaps))


def no_stored_result(command: str) -> str:
    """Chapter 04: no stored result yet, and the `command` that makes one."""
    return _("no stored result: run `{command}`").format(command=command)


def not_submitted(model_dir: str) -> str:
    """Chapter 05: the job was not submitted, and where (`model_dir`) it would have written its model."""
    return _("not submitted (submit=False or no cluster); the job would write its model to {path}").format(
        path=model_dir
    )


def self_rules(added: Sequence[object]) -> str:
    """Chapter 05: the self-referencing rules added to a security group (`added`), or that none were."""
    if not added:
        return _("added self-referencing rules: none needed")
    return _("added self-referencing rules: {rules}").format(rules=added)


def no_netsim_result() -> str:
    """Chapter 06: no stored namespace result, and the two commands that make one."""
    return _(
        "no namespace result stored: run `python -m workshop netsim --json ...` then "
        "`python -m workshop comms netsim`"
    )


def cost_time_title(model: str, tokens: float) -> str:
    """Chapter 01: the cost figure's title, for `model` trained on `tokens` (a count)."""
    return _("{model}, {tokens:.3g} tokens: every plan that fits").format(model=model, tokens=tokens)


def loading_title(model: str, machine: str) -> str:
    """Chapter 03: the loading figure's two-line title: the model, then the machine it ran on."""
    return _("{model}: peak RSS while loading\n{machine}").format(model=model, machine=machine)


def loading_ratios(ratios: dict[str, Sequence[float]]) -> str:
    """Chapter 03: each method's peak over naive's (a ratio, 2 decimals), per rank, at N = 2."""
    per_method = "; ".join(f"{m} " + ", ".join(f"x{x:.2f}" for x in v) for m, v in ratios.items())
    return _("peak / naive peak at N=2, per rank:") + f" {per_method}"


def training_title(model: str, nproc: int, zero_stage: int, precision: str, machine: str) -> str:
    """Chapter 04: the training figure's title: model, ranks, ZeRO stage, precision and machine."""
    return _("{model}: {nproc}-rank ZeRO-{zero}, {precision}, {machine}").format(
        model=model, nproc=nproc, zero=zero_stage, precision=precision, machine=machine
    )


def peak_note(note: str | None) -> str:
    """Chapter 01: the summary's warning, or that every measured value is below its peak. Returns one line of
    text (`note` as given when there is one)."""
    return note or _("all measured values are below their peak")


def price_source() -> str:
    """Chapter 01: where the planner's instance prices (USD per hour, on demand) come from."""
    return _(PRICE_SOURCE)


def _bf16_over_peak(s: dict) -> str:
    """Why bf16's own figure is above its peak (the clock or the FLOP per cycle), from bf16's numbers: the
    summary's note may be about fp32."""
    from workshop.plan.gemm import over_peak
    from workshop.plan.hardware import Peak

    peak = (s.get("peaks") or {}).get("bf16")
    return over_peak(s["bf16_tflops"], Peak(**peak), s.get("clock_source")) if peak else str(s.get("note"))


def gemm_summary(d: dict, s: dict) -> str:
    """Chapter 01: bf16 against fp32 TFLOPS at one thread count (with the ratio's range over every thread
    count measured), and bf16 as % of this CPU's bf16 peak and of the AMX peak of the same cores."""
    from workshop.report.interpret import gemm_ratio_range

    pct, amx_pct = s["bf16_pct_of_peak"], s["bf16_pct_of_amx_peak"]
    if pct is not None and pct > 100:  # no share above a peak: which factor of the peak is wrong, said
        shares = _(
            "bf16 above this CPU's bf16 peak ({path}), so no share of it is quoted: {note}; at most "
            "{amx_pct}% of the AMX peak of the same cores (a higher clock raises that peak too)"
        ).format(path=s["peak_bf16_path"], note=_bf16_over_peak(s), amx_pct=amx_pct)
    else:
        shares = _(
            "{pct}% of this CPU's bf16 peak ({path}), {amx_pct}% of the AMX peak of the same cores"
        ).format(pct=pct, path=s["peak_bf16_path"], amx_pct=amx_pct)
    clock_source = s["clock_source"] if s["clock_ghz"] else hardware.XEON_REFERENCE["clock_source"]
    said = _(
        "{cpu}, AMX={amx}, both at {threads} thread(s): bf16 {bf16:.3f} vs fp32 {fp32:.3f} TFLOPS "
        "(x{ratio}), {shares}; both peaks at {clock:g} GHz ({source})"
    ).format(
        shares=shares,
        clock=s["clock_ghz"] or hardware.XEON_REFERENCE["clock_ghz"],
        source=_(clock_source),
        cpu=d["cpu_model"],
        amx=d["amx"],
        threads=s["threads"],
        bf16=s["bf16_tflops"],
        fp32=s["fp32_tflops"],
        ratio=s["bf16_over_fp32"],
    )
    span = gemm_ratio_range(s)  # type: ignore[arg-type]
    if not span:
        return said
    rng = _("; x{lo:.2f}-x{hi:.2f} over the {conditions} measured").format(
        lo=span[0], hi=span[1], conditions=span[2]
    )
    ratio = f"x{s['bf16_over_fp32']}"  # the range right after the ratio it belongs to, else at the end
    return said.replace(ratio, ratio + rng, 1) if ratio in said else said + rng


def confounders() -> list[str]:
    """Chapter 06: what limits any model's claim on the original workshop's table. Returns the sentences
    (translated text), one per confounder."""
    return [_(c) for c in topology.CONFOUNDERS]


# ---------------------------------------------------------------- chapter 06's printed lines and titles


def original_run(r: topology.OriginalRun) -> str:
    """Chapter 06: one run of the original workshop's table: label, wall time, s/step, transport, source."""
    where = (
        _("original workshop, chapter 003")
        if r.source == topology.ORIGINAL_003
        else _("not in the original workshop (brief)")
    )
    transport = _("not recorded") if r.transport == "not recorded" else r.transport
    per_step = r.seconds / topology.ORIGINAL_STEPS
    return f"{r.label:38s} {r.wall:>8s}  {per_step:6.1f} s/step  {tables.ljust(transport, 24)} {where}"


def original_sources() -> str:
    """Chapter 06: where the table's runs come from (two sources, one per line)."""
    return "\n  ".join([_("sources:"), _(topology.ORIGINAL_003), _(topology.NOT_IN_ORIGINAL)])


def bytes_by_stage_title() -> str:
    """Chapter 06: the title of the bytes-by-ZeRO-stage figure (the original workshop's run)."""
    return _("Llama-3-8B, 4 ranks, accumulation 4, checkpointing, optimizer offload (+param at 3)")


def original_traffic(collective_gb: float, h2d_gb: float) -> str:
    """Chapter 06: the original run's bytes per rank per step (GB), between GPUs and host to GPU."""
    return _("ZeRO-3, per rank per step: {coll:.0f} GB between GPUs, {h2d:.0f} GB host->GPU").format(
        coll=collective_gb, h2d=h2d_gb
    )


def planner_share(rows: Sequence[CheckRow]) -> str:
    """Chapter 06: how much of each measured offloaded step the planner's terms explain, as the range over
    the rows (costcheck's CheckRow: predicted and measured seconds), so the text never names a range the
    table does not hold."""
    shares = [r.predicted / r.measured for r in rows]
    return _(
        "the planner's terms add up to {lo:.0%}-{hi:.0%} of these {n} measured steps: each run is "
        "x{slow:.1f} to x{fast:.1f} slower than they explain"
    ).format(lo=min(shares), hi=max(shares), n=len(shares), slow=1 / max(shares), fast=1 / min(shares))


def measured_vs_model(label: str, measured: float, predicted: float, error: float) -> str:
    """Chapter 06: one run, measured against the model (s/step) and the error."""
    return _("{label:40s} measured {measured:6.1f}  model {predicted:6.1f} s/step  ({error:+.0%})").format(
        label=label, measured=measured, predicted=predicted, error=error
    )


def p4d_checks(checks: dict) -> list[str]:
    """Chapter 06: the EFA-over-single-pod ratio (measured, model, error), whether the per-instance order is
    reproduced, and the pairs swapped across instances."""
    return [
        _(
            "p4d EFA / single pod: measured {measured:.2f}, model {predicted:.2f} ({error:+.0%}); "
            "per-instance ordering reproduced: {ok}"
        ).format(
            measured=checks["p4d_ratio_measured"],
            predicted=checks["p4d_ratio_predicted"],
            error=checks["p4d_ratio_error"],
            ok=_("yes") if checks["ordering_ok"] else _("no"),
        ),
        _("pairs swapped across instances: {pairs}").format(
            pairs="; ".join(f"{a} / {b}" for a, b in checks["global_order_swaps"])
        )
        if checks["global_order_swaps"]
        else _("pairs swapped across instances: none"),
    ]


def overlap_line(s: dict) -> str:
    """Chapter 06: the p4d ratio the model predicts at one overlap (a fraction), and its error."""
    return _("overlap {overlap:.1f}: p4d ratio {ratio:.2f} ({error:+.0%})").format(
        overlap=s["overlap"], ratio=s["p4d_ratio_predicted"], error=s["p4d_ratio_error"]
    )


def step_vs_bandwidth_title(compute_s: float) -> str:
    """Chapter 06: the step-time-against-bandwidth figure's title, at p4d's fitted compute (s)."""
    return _("Llama-3-8B ZeRO-3, 4 ranks, p4d's fitted compute {compute:.1f} s, PCIe 25.2 GB/s").format(
        compute=compute_s
    )


def collective_fit(op: str, fit: dict) -> str:
    """Chapter 06: one collective's fitted bandwidth (GB/s) and latency per call (ms)."""
    return _("{op:15s} {gbps:6.2f} GB/s  latency {ms:.2f} ms per call").format(
        op=op, gbps=fit["gbytes_per_s"], ms=fit["alpha_s"] * 1e3
    )


def zero3_calls(model: str, c) -> str:
    """Chapter 06: the ZeRO-3 collective calls of one model: all-gathers (count, MB), reduce-scatters, and the
    gather passes per micro-step."""
    return _(
        "{model:11s} all-gather {gathers:4d} calls {mb:9.1f} MB, reduce-scatter {scatters} calls; gathers "
        "per micro-step {passes}"
    ).format(
        model=model,
        gathers=c.all_gather_calls,
        mb=c.all_gather_bytes / 1e6,
        scatters=c.reduce_scatter_calls,
        passes=c.gather_passes,
    )


def local_step(r: dict) -> str:
    """Chapter 06: one local ZeRO-3 run: the planner's terms (s) beside the measured step (s), the error."""
    return _(
        "{model:5s} offload={offload:5s} compute {compute:.3f} + collectives {comm:.3f} + optimizer "
        "{optimizer:.3f} = {predicted:.3f} s; measured {measured:.3f} s ({error:+.0%})"
    ).format(
        model=r["model"],
        offload=str(r["offload"]),
        compute=r["compute_s"],
        comm=r["comm_s"],
        optimizer=r["optimizer_s"],
        predicted=r["predicted_s"],
        measured=r["measured_s"],
        error=r["error"],
    )


def local_counts(r: dict) -> str:
    """Chapter 06: one local run's all-gather calls and bytes, the model's against the counted."""
    return _(
        "{model:5s} all-gather calls model {calls_model} counted {calls_counted}; bytes model {mb_model:.1f} "
        "MB counted {mb_counted:.1f} MB"
    ).format(
        model=r["model"],
        calls_model=r["all_gather_calls_model"],
        calls_counted=r["all_gather_calls_counted"],
        mb_model=r["all_gather_bytes_model"] / 1e6,
        mb_counted=r["all_gather_bytes_counted"] / 1e6,
    )


def netsim_row(r: dict) -> str:
    """Chapter 06: one rate cap of the namespace run: measured, model and line-rate-only step times (s)."""
    return _(
        "{rate:7s} measured {measured:.3f} s  model {predicted:.3f} s ({error:+.0%})  line rate only "
        "{line:.3f} s ({line_error:+.0%})"
    ).format(
        rate=r["rate"],
        measured=r["measured_s"],
        predicted=r["predicted_s"],
        error=r["error"],
        line=r["line_rate_predicted_s"],
        line_error=r["line_rate_error"],
    )


def placement_pool(pods: int, gpus: int, limits: object, problems: object) -> str:
    """Chapter 06: a GPU pool for `pods` pods of `gpus` GPUs: its limits and the validation problems."""
    return _("{pods} pod x {gpus} GPU: limit {limits}, problems: {problems}").format(
        pods=pods, gpus=gpus, limits=limits, problems=problems
    )


def cpu_capability(capability: str) -> str:
    return _("CPU capability seen by PyTorch: {capability}").format(capability=capability)


def tokens_per_step(global_batch: int, steps: int, tokens: float) -> str:
    """Chapter 01: the tokens every plan's optimizer step takes, and the steps the budget (`tokens`) needs."""
    return _(
        "{batch:,} tokens per optimizer step on every plan: {steps:,} steps for {tokens:.3g} tokens"
    ).format(batch=global_batch, steps=steps, tokens=tokens)


# ---------------------------------------------------------------- chapters 03 and 04's printed lines


def host_line(cpu: str, cpus: int | None, ram_gb: float, amx: bool) -> str:
    """Chapter 03: this host: CPU model, CPU count, RAM (GB) and whether it has AMX."""
    return _("{cpu}: {cpus} CPUs, {ram:.0f} GB RAM, AMX: {amx}").format(
        cpu=cpu, cpus=cpus, ram=ram_gb, amx=amx
    )


def checkpoint_line(info) -> str:
    """Chapter 03: the written checkpoint: parameters (millions), size (GB), dtype and shard count."""
    return _("{params:.1f}M parameters, {gb:.3f} GB in {dtype}, {shards} shards").format(
        params=info.numel / 1e6, gb=info.bytes / 1e9, dtype=info.dtype, shards=len(info.shards)
    )


def pitfall_partition(name: str, r: dict) -> str:
    """Chapter 03: whether a pitfall's model came out partitioned, and how many elements rank 0 holds."""
    return _("{name:>16}: partitioned={partitioned}, rank 0 holds {local:,} of {full:,}").format(
        name=name, partitioned=r["partitioned"], local=r["local_numel"], full=r["full_numel"]
    )


def lcmu_peak(peak_gb: float) -> str:
    """Chapter 03: the peak RSS (GB) of `from_pretrained(low_cpu_mem_usage=False)`."""
    return _("from_pretrained(low_cpu_mem_usage=False): peak {peak:.3f} GB").format(peak=peak_gb)


def planner_loading(method: str, n: int, p: dict) -> str:
    """Chapter 03: the planner's loading prediction for `method` at N = `n` ranks (GB); at N = 1 there are
    no other ranks, so none are named."""
    if n == 1:
        return _("{method:>12} N={n}: keep {keep:.3f} GB, peak rank 0 {rank0:.2f} GB (the only rank)").format(
            method=method, n=n, keep=p["keep_gb"], rank0=p["peak_rank0_gb"]
        )
    return _(
        "{method:>12} N={n}: keep {keep:.3f} GB, peak rank 0 {rank0:.2f}, others {others:.2f} GB"
    ).format(method=method, n=n, keep=p["keep_gb"], rank0=p["peak_rank0_gb"], others=p["peak_other_gb"])


def planner_loading_node(method: str, p: dict) -> str:
    """Chapter 03: the planner's loading peak for Llama-3-8B on 4 ranks: rank 0, the others, the node (GB;
    mapped file pages counted once per node, as the page cache holds them)."""
    return _(
        "{method:>12}: rank 0 {rank0:5.1f} GB, other ranks {others:5.1f} GB, "
        "4 ranks ≈ {node:5.0f} GB per node ({files:.0f} GB of it file pages, held once)"
    ).format(
        method=method,
        rank0=p["peak_rank0_gb"],
        others=p["peak_other_gb"],
        node=p["per_node_gb"],
        files=p["file_gb"],
    )


def training_line(m: dict) -> str:
    """Chapter 04: the run's loss from first to last step, its useful tokens/s and peak RSS per rank (GB)."""
    return _(
        "loss {first} -> {last} in {steps} steps | {tps:.0f} useful tokens/s | peak RSS per rank (GB): {rss}"
    ).format(
        first=m["first_loss"],
        last=m["final_loss"],
        steps=len(m["steps"]),
        tps=m["tokens_per_s_median"],
        rss=m["peak_rss_gb_per_rank"],
    )


def partition_line(part: dict) -> str:
    """Chapter 04: the ZeRO-3 partition: parameters, elements, and what each rank holds."""
    return _("{params} parameters, {total:,} elements; each of {n} ranks holds {each}").format(
        params=len(part["params"]),
        total=part["total_numel"],
        n=part["world_size"],
        each=part["local_numel_per_rank"],
    )


def release_check(label: str, problems: Sequence[object], note: str) -> str:
    """Chapter 02: one Karpenter release's verdict on the documents, and what Kubernetes it supports (two
    lines, the second indented under the first)."""
    verdict = _("valid") if not problems else str(problems[0])
    return f"{label:17} {verdict}\n{'':17} {_(note)}"


def rule_count(kind: str, row: dict) -> str:
    """Chapter 02: of a kind's CEL rules, how many the offline validator evaluates and skips (those that read
    oldSelf: a transition rule needs the object already stored)."""
    return _("{kind} {rules:3} rules: {evaluated:3} evaluated, {skipped} skipped (oldSelf)").format(
        kind=f"{kind:24}", rules=row["rules"], evaluated=row["evaluated"], skipped=row["skipped"]
    )


def wrote(path: object) -> str:
    """Where a file was written."""
    return _("wrote {path}").format(path=path)


def trainjob_form(form: str, release: str, problems: Sequence[object]) -> str:
    """Chapter 05: a TrainJob form (the release it targets) against another release's CRDs."""
    if not problems:
        return _("form v{form} vs CRDs v{release}: valid").format(form=form, release=release)
    return _("form v{form} vs CRDs v{release}: {problem}").format(
        form=form, release=release, problem=problems[0]
    )


def valid_against(trainer: str, ok: bool) -> str:
    """Chapter 05: whether a job validates against a Trainer release's CRDs."""
    said = _("valid against Trainer {trainer}: True") if ok else _("valid against Trainer {trainer}: False")
    return said.format(trainer=trainer)


def s3_outputs(uri: str, service_account: str) -> str:
    """Chapter 05: outputs to S3, with the service account whose IAM role writes there."""
    return _("S3: {uri} via service account {account}").format(uri=uri, account=service_account)


def cluster_result(outcome: str, steps: Sequence[object]) -> str:
    """Chapter 05: the job's outcome on the cluster and its last parsed step."""
    if not steps:
        return _("{outcome}: no steps parsed").format(outcome=outcome)
    return f"{outcome} {steps[-1]}"


def host_cores(cpu: str, cores: int, why: str) -> str:
    """Chapter 04: the CPU, its physical cores and why the precision was chosen, on one line."""
    return _("{cpu} | {cores} cores | {why}").format(cpu=cpu, cores=cores, why=why)


def placement_line(pods: int, gpus: int, trainer: str, spec: dict, problems: Sequence[object]) -> str:
    """Chapter 06: a placement's TrainJob (pods x GPUs per pod) as the trainer section renders it for a
    Trainer release, and what validation found."""
    return _(
        "{pods} pod x {gpus} GPU, Trainer {trainer}: numNodes={nodes} numProcPerNode={procs} limits={limits} "
        "problems={problems}"
    ).format(
        pods=pods,
        gpus=gpus,
        trainer=trainer,
        nodes=spec["numNodes"],
        procs=spec["numProcPerNode"],
        limits=spec["resourcesPerNode"]["limits"],
        problems=problems,
    )
