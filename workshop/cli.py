"""`workshop <command> ...`: one console script; each command is the `main(argv)` of the module that does it.

The CLI only dispatches: every module owns its own argument parser, so `python -m workshop.train`
and `workshop train` are the same program, and modules never import the CLI.
"""

from __future__ import annotations

import importlib
import sys

from workshop.errors import WorkshopError, report

# command -> (module whose main(argv) runs it, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("workshop.train", "the training entry point (same as python -m workshop.train)"),
    "run": ("workshop.launch.notebooks", "execute the notebooks in order with papermill"),
    "images": (
        "workshop.book.images",
        "refresh the tracked figures in images/ from a workbook run (--check: drift)",
    ),
    "i18n": (
        "workshop.book.i18n",
        "Korean catalogs and notebooks-ko/: update | generate | check | sync (all three)",
    ),
    "lab": ("workshop.book.lab", "JupyterLab on a working copy of the chapters (lab/): git stays clean"),
    "nbval": ("workshop.book.nbcheck", "re-record the notebook outputs that nbval checks (nbval refresh)"),
    "hw": ("workshop.plan.hardware", "what this CPU can do: AMX/bf16 detection, oneDNN ISA, GEMM TFLOPS"),
    "instances": ("workshop.plan.catalog", "EC2 instance types (boto3, or moto's offline catalog)"),
    "plan": (
        "workshop.plan.cost",
        "time and cost of the clusters that hold a fine-tune, and what bounds each (--memory: memory only)",
    ),
    "load": ("workshop.experiments.loading", "sharded-loading experiment: naive vs meta device vs zero.Init"),
    "render": ("workshop.k8s.render", "render the workbook's Kubernetes manifests into manifests/"),
    "crds": (
        "workshop.k8s.crds",
        "the CRD releases known here (shipped with the package) and adding another",
    ),
    "validate": ("workshop.k8s.validate", "validate manifests against the real CRDs (schema + CEL)"),
    "cluster": (
        "workshop.k8s.cluster_cli",
        "apply / watch / logs / teardown on a cluster (when a kubeconfig is present)",
    ),
    "netsim": ("workshop.launch.netsim", "multi-node torchrun across network namespaces with rate caps"),
    "comms": ("workshop.experiments.comms", "ZeRO communication model and collective benchmark"),
    "bench": ("workshop.experiments.bench", "side-by-side benchmarks that write JSON results"),
}


def _usage() -> str:
    width = max(map(len, COMMANDS))
    rows = "\n".join(f"  {name:<{width}}  {help_}" for name, (_, help_) in COMMANDS.items())
    return (
        f"usage: workshop <command> [options]\n\ncommands:\n{rows}\n\n"
        "`workshop <command> --help` for a command's options."
    )


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(_usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        return report(WorkshopError(f"unknown command {name!r}; allowed: {', '.join(COMMANDS)}"))
    module = importlib.import_module(COMMANDS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
