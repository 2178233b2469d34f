"""`python -m workshop.experiments.loading worker|pitfall JSON`: what torchrun starts for each rank
(ranks.py); the command is `workshop load`."""

import json
import sys

from workshop.errors import exit_code, exit_process
from workshop.experiments.loading import ranks

ENTRIES = {"worker": ranks.worker, "pitfall": ranks.pitfall}

if len(sys.argv) != 3 or sys.argv[1] not in ENTRIES:
    sys.exit("usage: python -m workshop.experiments.loading worker|pitfall JSON (the command: workshop load)")
exit_process(exit_code(ENTRIES[sys.argv[1]], json.loads(sys.argv[2])))
