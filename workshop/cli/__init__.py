"""`workshop <command> ...`: one console script. Every command lives in this folder, one module per family
(parse, call the layer below, print); the layers below hold no argument parsing and print no command output.

`python -m workshop.train` (what torchrun and a TrainJob start) is `workshop train`: the same function.
"""

from __future__ import annotations

import importlib
import sys

from workshop.cli.base import command
from workshop.errors import WorkshopError

# command -> ("module:function" that runs it, one-line help); a module is imported when its command runs
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("workshop.cli.train:train", "the training entry point (same as python -m workshop.train)"),
    "run": ("workshop.cli.notebooks:run", "execute the notebooks in order with papermill"),
    "images": (
        "workshop.cli.notebooks:images",
        "refresh the tracked figures in images/ from a workbook run (--check: drift)",
    ),
    "i18n": (
        "workshop.cli.notebooks:i18n",
        "Korean catalogs and notebooks-ko/: update | generate | check | sync (all three)",
    ),
    "lab": (
        "workshop.cli.notebooks:lab",
        "JupyterLab on a working copy of the chapters (lab/): git stays clean",
    ),
    "nbval": (
        "workshop.cli.notebooks:nbval",
        "re-record the notebook outputs that nbval checks (nbval refresh)",
    ),
    "hw": ("workshop.cli.plan:hw", "what this CPU can do: AMX/bf16 detection, oneDNN ISA, GEMM TFLOPS"),
    "instances": ("workshop.cli.plan:instances", "EC2 instance types (boto3, or moto's offline catalog)"),
    "plan": (
        "workshop.cli.plan:plan",
        "time and cost of the clusters that hold a fine-tune, and what bounds each (--memory: memory only)",
    ),
    "load": (
        "workshop.cli.experiments:load",
        "sharded-loading experiment: naive vs meta device vs zero.Init",
    ),
    "render": ("workshop.cli.manifests:render", "render the workbook's Kubernetes manifests into manifests/"),
    "crds": (
        "workshop.cli.manifests:crds",
        "the CRD releases known here (shipped with the package) and adding another",
    ),
    "validate": (
        "workshop.cli.manifests:validate",
        "validate manifests against the real CRDs (schema + CEL)",
    ),
    "cluster": (
        "workshop.cli.cluster:cluster",
        "apply / watch / logs / teardown on a cluster (when a kubeconfig is present)",
    ),
    "netsim": (
        "workshop.cli.experiments:netsim",
        "multi-node torchrun across network namespaces with rate caps",
    ),
    "comms": ("workshop.cli.experiments:comms", "ZeRO communication model and collective benchmark"),
    "bench": ("workshop.cli.bench:bench", "side-by-side benchmarks that write JSON results"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items())
    return (
        f"usage: workshop <command> [options]\n\ncommands:\n{rows}\n\n"
        "`workshop <command> --help` for a command's options."
    )


@command
def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        raise WorkshopError(f"unknown command {name!r}; allowed: {', '.join(COMMANDS)}")
    module, function = COMMANDS[name][0].split(":")
    return int(getattr(importlib.import_module(module), function)(rest) or 0)
