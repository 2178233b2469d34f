"""`python -m workshop.experiments.ceiling --child JSON`: one GEMM rank of the ceiling probe, started by
`probe.gemm_ceiling`; it prints its timings as one JSON line. The command is `workshop bench ceiling`."""

import json
import sys

from workshop.errors import exit_process
from workshop.experiments.ceiling.probe import gemm_child

if sys.argv[1:2] != ["--child"] or len(sys.argv) != 3:
    sys.exit(
        "usage: python -m workshop.experiments.ceiling --child JSON (the command: workshop bench ceiling)"
    )
print(json.dumps(gemm_child(json.loads(sys.argv[2]))), flush=True)
exit_process(0)
