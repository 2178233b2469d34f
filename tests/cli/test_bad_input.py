"""Bad input, every command: a non-zero exit before anything starts, one plain `error:` line naming the bad
value (and, where there is a list, the allowed ones), never a traceback. In-process through
`workshop.cli.main`, so the whole table takes seconds; a traceback would surface here as an uncaught exception
and fail the case.

An argument `@name` is a file of that kind made for the case (see BAD_FILES); a case's expected text is one
string or a tuple of strings, all of which must be on the one error line."""

import json

import pytest

from workshop.cli import main
from workshop.paths import REPO

# Files of the wrong kind, for every command that reads one (root reads any file: no unreadable-file case
# here).
BAD_FILES = {
    "@empty": b"",
    "@blank": b"\n  \n",
    "@binary": bytes(range(256)),
    "@latin1": "caf\u00e9: 1\n".encode("latin-1"),
    "@notyaml": b"a: [1, 2\n  b: }\n",
    "@notjson": b'{"a": 1,,}',
    "@list.yaml": b"- 1\n- 2\n",
    "@list.json": b"[1, 2]",
    "@nokind.yaml": b"apiVersion: v1\nmetadata: {}\n",
    "@folder": None,
    "@badmodel": {"config.json": b'{"model_type": "llama",'},  # a checkpoint folder whose config is cut short
    "@results": {"recipes.json": b'{"tokens_per_s": '},  # a results folder with a damaged result
    "@pngs": {"fig.png": b"\x89PNG\r\n\x1a\n cut short"},  # a figure that is not an image
}

CASES = [
    # the training entry point
    (["train", "--model", "gpt5"], "'gpt5'"),
    (["train", "--micro-batch", "0"], "got 0"),
    (["train", "--micro-batch", "two"], "'two'"),
    (["train", "--seq-len", "-4"], "got -4"),
    (["train", "--seq-len", "4096", "--model", "tiny"], "seq-len 4096"),
    (["train", "--grad-accum", "0"], "got 0"),
    (["train", "--max-steps", "0"], "got 0"),
    (["train", "--lr", "0"], "got 0.0"),
    (["train", "--lr=-1e-3"], "got -0.001"),
    (["train", "--lr", "fast"], "'fast'"),
    (["train", "--warmup-steps", "-1"], "got -1"),
    (["train", "--threads", "0"], "got 0"),
    (["train", "--precision", "fp8"], "'fp8'; allowed: auto, bf16, fp32"),
    (["train", "--engine", "fsdp"], "'fsdp'; allowed: deepspeed, ddp"),
    (["train", "--backend", "mpi"], "'mpi'; allowed: auto, gloo, nccl"),
    (["train", "--zero-stage", "4"], "4; allowed: 0, 1, 2, 3"),
    (["train", "--offload-param", "--zero-stage", "2"], "got 2"),
    (["train", "--dataset", "/nonexistent/corpus.txt"], "/nonexistent/corpus.txt"),
    (["train", "--extra-ds", "{overlap_comm: true"], "{overlap_comm: true"),
    (["train", "--extra-ds", "[1, 2]"], "[1, 2]"),
    (["train", "--max-grad-jump", "-5"], "got -5.0"),
    (["train", "--save-total-limit", "0"], "got 0"),
    (["train", "--sync-to", "gs://bucket/x"], "gs://bucket/x"),
    (["train", "--model", "/no/such/dir/"], "/no/such/dir/"),
    (["train", "--no-such-flag"], "--no-such-flag"),
    (["train", "--engine", "ddp", "--offload-optimizer"], "offload flags need --engine deepspeed"),
    (["train", "--master-weights", "--precision", "fp32"], "--master-weights keeps the weights in bf16"),
    (
        ["train", "--optimizer", "adamw_nope"],
        ("--optimizer 'adamw_nope'", "allowed: adamw_torch, adamw_torch_fused"),
    ),
    (["train", "--min-chars", "-1"], ("min-chars", "got -1")),
    (["train", "--save-steps", "-1"], ("save-steps", "got -1")),
    (["train", "--seed", "-1"], ("seed", "got -1")),
    (
        ["train", "--dataset", "@binary"],
        ("--dataset '@binary' is a binary file", "expected 'local', 'wikitext'"),
    ),
    (["train", "--dataset", "@latin1"], "--dataset '@latin1' is a binary file"),
    (["train", "--dataset", "@empty"], "--dataset '@empty' is empty"),
    (["train", "--dataset", "@blank"], "--dataset '@blank' is empty"),
    (["train", "--dataset", "@folder"], "--dataset '@folder' is a folder"),
    (["train", "--model", "@folder"], "--model '@folder/config.json': no such file"),
    (["train", "--model", "@badmodel"], "--model '@badmodel/config.json' is not JSON"),
    (["train", "--output-dir", "@binary"], "--output-dir '@binary' is a file"),
    (
        ["train", "--output-dir", "@binary/run"],
        ("--output-dir '@binary/run' cannot be created", "'@binary' is a file"),
    ),
    (["train", "--cache-dir", "@empty"], "--cache-dir '@empty' is a file"),
    # planning and the catalog
    (["plan", "--model", "gpt5"], "'gpt5'"),
    (["plan", "--model", "llama-3-8b", "--nodes", "0"], "0"),
    (["plan", "--model", "llama-3-8b", "--zero", "5"], "5"),
    (["plan", "--model", "llama-3-8b", "--procs-per-node", "-2"], "-2"),
    (["plan", "--model", "llama-3-8b", "--micro-batch", "0"], "0"),
    (["plan", "--model", "llama-3-8b", "--source", "azure"], "'azure'"),
    (["plan", "--model", "llama-3-8b", "--family", "zz9*", "--source", "moto"], "zz9*"),
    (["instances", "--family", "zz9*", "--source", "moto"], "zz9*"),
    (["instances", "--type", "c7i.huge", "--source", "moto"], "c7i.huge"),
    (["instances", "--source", "azure"], "'azure'"),
    (["instances", "--region", "mars-1", "--source", "moto"], ("region 'mars-1'", "allowed: af-south-1")),
    (["instances", "--region", "", "--source", "moto"], ("region ''", "us-east-1")),
    (["instances", "--region", "mars-1", "--type", "r7i.48xlarge", "--source", "moto"], "region 'mars-1'"),
    (["instances", "--size", "huge", "--source", "moto"], ("size 'huge'", "48xlarge")),
    (["instances", "--type", "", "--source", "moto"], "instance type ''"),
    (["hw", "--sizes", "0"], ("--sizes", "0")),
    (["hw", "--sizes", "abc"], "argument --sizes: expected comma-separated integers >= 1, got 'abc'"),
    (["hw", "--sizes", ""], ("--sizes", "''")),
    (["hw", "--sizes", ","], ("--sizes", "','")),
    (["hw", "--threads", "x,2"], ("--threads", "'x,2'")),
    (["hw", "--threads", "0"], ("--threads", "'0'")),
    (["hw", "--repeats", "0"], ("--repeats", "0")),
    # manifests and clusters
    (["validate", "/no/such/manifest.yaml"], "/no/such/manifest.yaml"),
    (["validate", "--trainer", "9.9.9", "manifests/trainjob-cpu-v2.1.yaml"], "9.9.9"),
    (["validate", "--karpenter", "0.1", "manifests/karpenter-cpu-amx.yaml"], "0.1"),
    (["validate", "--trainer", "", "manifests/trainjob-cpu-v2.1.yaml"], ("release ''", "known: 2.1.0")),
    (
        ["validate", "--karpenter", "", "manifests/karpenter-cpu-amx.yaml"],
        ("Karpenter release ''", "known: 1.8.8"),
    ),
    (["validate", "@binary"], ("manifest file '@binary' is a binary file", "expected a YAML manifest")),
    (["validate", "@latin1"], "manifest file '@latin1' is a binary file"),
    (["validate", "@empty"], "manifest file '@empty' is empty"),
    (["validate", "@folder"], "manifest file '@folder' is a folder"),
    (["cluster", "apply", "/no/such/file.yaml"], "/no/such/file.yaml"),
    (["cluster", "apply", "@notyaml"], ("manifest file '@notyaml' is not YAML", "line 2 column 4")),
    (["cluster", "apply", "@binary"], "manifest file '@binary' is a binary file"),
    (["cluster", "apply", "@latin1"], "manifest file '@latin1' is a binary file"),
    (["cluster", "apply", "@empty"], "manifest file '@empty' is empty"),
    (["cluster", "apply", "@folder"], "manifest file '@folder' is a folder"),
    (["cluster", "apply", "@list.yaml"], "'@list.yaml': document 1 is a list, not a mapping"),
    (["cluster", "delete", "@notyaml"], "manifest file '@notyaml' is not YAML"),
    (["cluster", "delete", "@nokind.yaml"], "'@nokind.yaml': document 1 has no kind"),
    (["cluster", "--kubeconfig", "@notyaml", "status"], "--kubeconfig '@notyaml' is not YAML"),
    (["cluster", "--kubeconfig", "@binary", "status"], "--kubeconfig '@binary' is a binary file"),
    (["cluster", "--kubeconfig", "@list.yaml", "status"], "--kubeconfig '@list.yaml': document 1 is a list"),
    (["cluster", "--kubeconfig", "@folder", "status"], "--kubeconfig '@folder' is a folder"),
    (
        ["cluster", "--kubeconfig", "/no/such/kubeconfig", "status"],
        "--kubeconfig '/no/such/kubeconfig': no such file",
    ),
    (["cluster", "watch", "nodes", "--timeout", "-1"], ("--timeout", "got -1.0")),
    (["cluster", "watch", "pods"], ("'pods'", "'nodeclaims', 'nodes'")),
    (
        ["cluster", "teardown", "--keep-model", "--delete-model"],
        "--delete-model: not allowed with argument --keep-model",
    ),
    (["cluster", "teardown", "--yes", "--timeout", "0"], ("--timeout", "got 0.0")),
    (["cluster", "teardown", "-n", "Team_A"], "--namespace 'Team_A' is not a DNS label"),
    (["crds", "import", "/no/such/folder"], "/no/such/folder"),
    (["crds", "dance"], "dance"),
    # multi-node simulation, collectives, loading, benchmarks, the runner
    (["netsim", "--nodes", "0"], "error: nodes must be a number > 0, got 0"),
    (["netsim", "--rate", "fast"], "fast"),
    (["netsim", "--mode", "carrier-pigeon"], "carrier-pigeon"),
    (["netsim", "--procs-per-node", "0"], "0"),
    (["comms", "model", "--model", "gpt5"], "gpt5"),
    (["comms", "model", "--out", "@notjson"], ("--out '@notjson' is not JSON", "expected a JSON object")),
    (["comms", "model", "--out", "@list.json"], "--out '@list.json' holds a JSON list"),
    (["comms", "model", "--out", "@binary"], "--out '@binary' is a binary file"),
    (["comms", "model", "--out", "@empty"], "--out '@empty' is empty"),
    (["comms", "model", "--out", "@folder"], "--out '@folder' is a folder"),
    (["comms", "model", "--out", "@binary/comms.json"], "--out '@binary/comms.json' cannot be created"),
    (["comms", "model", "--efa-per-pod", "0", "--out", "@folder/c.json"], ("--efa-per-pod", "got 0")),
    (["comms", "bench", "--sizes-mb", "0", "--out", "@folder/c.json"], ("--sizes-mb", "got 0.0")),
    (["comms", "bench", "--iters", "0", "--out", "@folder/c.json"], ("--iters", "got 0")),
    (["comms", "bench", "--backend", "mpi", "--out", "@folder/c.json"], ("'mpi'", "allowed: gloo, nccl")),
    (["comms", "local", "--models", "gpt5", "--out", "@folder/c.json"], ("--models", "'gpt5'", "'tiny'")),
    (["comms", "local", "--steps", "0", "--out", "@folder/c.json"], ("--steps", "got 0")),
    (
        ["comms", "netsim", "--netsim-json", "@notjson", "--out", "@folder/c.json"],
        "--netsim-json '@notjson' is not JSON",
    ),
    (
        ["comms", "netsim", "--netsim-json", "@folder", "--out", "@folder/c.json"],
        "--netsim-json '@folder' is a folder",
    ),
    (["bench", "quantum"], "unknown benchmark 'quantum'"),
    (["bench", "slice", "--layers", "x"], "--layers 'x'"),
    (["bench", "slice", "--layers", "1.5"], "--layers '1.5'"),
    (["bench", "slice", "--layers", "0"], "got 0"),
    (["bench", "slice", "--layers", "33"], "allowed 1..32"),
    (["bench", "slice", "--threads", "0"], "got 0"),
    (["bench", "slice", "--threads", "-2"], "got -2"),
    (["bench", "slice", "--threads", "two"], "--threads 'two'"),
    (["bench", "slice", "--threads", "100000"], "physical cores"),
    (["bench", "slice", "--steps", "2"], ">= 3"),
    (["bench", "slice", "--seq-len", "9000"], "allowed 1..8192"),
    (["plan", "--calibration", "@list.json", "--source", "moto"], "expected a JSON object"),
    (["plan", "--calibration", "@notjson", "--source", "moto"], "cannot read a calibration file"),
    (["bench", "recipes", "--steps", "0"], "0"),
    (["bench", "recipes", "--nproc", "0"], "0"),
    (["bench", "recipes", "--dataset", "@binary"], "--dataset '@binary' is a binary file"),
    (["bench", "recipes", "--dataset", "@empty"], "--dataset '@empty' is empty"),
    (["bench", "recipes", "--json-out", "@folder"], "--json-out '@folder' is a folder"),
    (["bench", "recipes", "--out-dir", "@binary"], "--out-dir '@binary' is a file"),
    (["bench", "ipex", "--ipex-python", "@binary"], "--ipex-python '@binary' is not an executable file"),
    (["bench", "summary", "--results-dir", "@binary"], "--results-dir '@binary': no such folder"),
    (
        ["bench", "summary", "--results-dir", "@results"],
        "benchmark result '@results/recipes.json' is not JSON",
    ),
    (["bench", "ceiling", "--levers", ""], ("--levers", "''")),
    (
        ["bench", "ceiling", "--levers", "recipe,nope"],
        "argument --levers: unknown 'nope' in 'recipe,nope'; allowed: recipe, no_compile",
    ),
    (["bench", "ceiling", "--peak-tflops", "-1"], ("peak-tflops", "got -1.0")),
    (["bench", "ceiling", "--dataset", "@latin1"], "--dataset '@latin1' is a binary file"),
    (["bench", "ceiling", "--json-out", "@folder"], "--json-out '@folder' is a folder"),
    (["load", "bench", "--json-out", "x.json", "--model", "gpt5"], "gpt5"),
    (["load", "bench", "--json-out", "x.json", "--methods", "teleport"], "teleport"),
    (["load", "bench", "--json-out", "x.json", "--ranks", "0"], "0"),
    (["load", "bench", "--json-out", "x.json", "--ranks", ""], ("--ranks", "''")),
    (["load", "bench", "--json-out", "x.json", "--methods", ""], ("--methods", "''")),
    (
        ["load", "bench", "--json-out", "x.json", "--methods", "naive,teleport"],
        ("--methods", "'teleport'", "zero3"),
    ),
    (["load", "bench", "--json-out", "x.json", "--max-shard-size", "abc"], ("--max-shard-size", "'abc'")),
    (["load", "bench", "--json-out", "@folder"], "--json-out '@folder' is a folder"),
    (["load", "bench", "--json-out", "x.json", "--work-dir", "@binary"], "--work-dir '@binary' is a file"),
    (["load", "checkpoint", "--out", "@binary"], "--out '@binary' is a file"),
    (["load", "run", "--checkpoint", "@folder", "--json-out", "@folder"], "--json-out '@folder' is a folder"),
    (
        ["load", "run", "--checkpoint", "@folder", "--ranks", "x"],
        "argument --ranks: expected comma-separated integers >= 1, got 'x'",
    ),
    (["load", "verify", "--checkpoint", "/no/such/ckpt"], "'/no/such/ckpt' does not exist"),
    (["load", "verify", "--checkpoint", "@binary"], "'@binary' is a file"),
    (["load", "verify", "--checkpoint", "@folder"], "'@folder/config.json': no such file"),
    (["load", "verify", "--checkpoint", "@badmodel"], "'@badmodel/config.json' is not JSON"),
    (["run", "--only", "99"], "99"),
    (["run", "--only", "04", "-p", "no_such_param", "5"], "no_such_param"),
    (["run", "--only", ""], ("no notebook matches ['']", "available: 01_")),
    (["run", "--only", "01", "-p", "nodes", "two"], ('-p nodes "two"', "nodes = 4", "an integer")),
    (["run", "--only", "02", "-p", "apply_to_cluster", "1"], ("-p apply_to_cluster 1", "true or false")),
    (["run", "--only", "05", "-p", "trainer_version", "2.3"], ("-p trainer_version 2.3", "a string")),
    (["run", "--only", "06", "-p", "sizes_mb", "4"], ("-p sizes_mb 4", "a JSON list")),
    (["run", "--out", "@binary", "--only", "01"], "--out '@binary' is a file"),
    (["nbval", "refresh", "--only", "04", ""], "no notebook matches ['']"),
    (["images", "--check", "--from", "@pngs"], "'@pngs/fig.png' is not a readable PNG image"),
    (["images", "--from", "@binary"], "--from @binary: no such folder"),
    (["render", "--out", "@binary"], "--out '@binary' is a file"),
    (["render", "--check", "--out", "@binary/manifests"], "--out '@binary/manifests' cannot be created"),
    (["netsim", "--", "--optimizer", "adamw_nope"], ("--optimizer 'adamw_nope'", "allowed: adamw_torch")),
    (["netsim", "--", "--model", "gpt5"], "'gpt5'"),
    (["netsim", "--json", "@folder"], "--json '@folder' is a folder"),
    (["netsim", "--out-dir", "@binary"], "--out-dir '@binary' is a file"),
    (["nonsense"], ("'nonsense'", "allowed: train, run")),
]


@pytest.mark.parametrize("argv, value", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input_fails_early_and_plainly(argv, value, capsys, tmp_path, monkeypatch):
    files = _bad_files(tmp_path / "files")
    argv = [_fill(a, files) for a in argv]
    monkeypatch.chdir(tmp_path.parent if argv[0] != "validate" else REPO)
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors: exit 2 with a usage line
        code = exit_.code
    out = capsys.readouterr()
    text = out.err + out.out
    assert code not in (0, None), f"exit {code}: {text[-500:]}"
    assert "Traceback" not in text
    errors = [line for line in out.err.splitlines() if "error:" in line]
    assert len(errors) == 1, f"not one error line: {out.err[-600:]}"
    for v in (value,) if isinstance(value, str) else value:
        assert _fill(v, files) in errors[0], f"{v!r} not named in: {errors[0]}"


def _bad_files(folder):
    folder.mkdir()
    made = {}
    for name, data in BAD_FILES.items():
        made[name] = folder / name.lstrip("@")
        if isinstance(data, bytes):
            made[name].write_bytes(data)
            continue
        made[name].mkdir()
        for inner, content in (data or {}).items():
            (made[name] / inner).write_bytes(content)
    return made


def _fill(text, files):
    for name in sorted(files, key=len, reverse=True):
        text = text.replace(name, str(files[name]))
    return text


def test_there_are_at_least_fifty_cases():
    assert len(CASES) >= 50 and len({json.dumps(a) for a, _ in CASES}) == len(CASES)
