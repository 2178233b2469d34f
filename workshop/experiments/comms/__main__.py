"""What torchrun starts for each rank of chapter 06's measurements (the command is `workshop comms`):

- `python -m workshop.experiments.comms _worker JSON [--threads N --output-dir DIR]`: one rank of the
  collective benchmark (collectives.collective_worker); the flags are what a node launcher appends;
- `python -m workshop.experiments.comms _count OUT TRAIN_ARGV...`: the training entry point with its
  collectives counted (counting._count_worker).
"""

import json
import sys

from workshop.errors import exit_code, exit_process

USAGE = (
    "usage: python -m workshop.experiments.comms _worker JSON [--NAME VALUE ...] | _count OUT TRAIN_ARGV..."
)

argv = sys.argv[1:]
if argv[:1] == ["_worker"] and len(argv) >= 2:
    from workshop.experiments.comms.collectives import collective_worker, launcher_flags

    exit_process(exit_code(lambda: collective_worker(json.loads(argv[1]), launcher_flags(argv[2:]))))
elif argv[:1] == ["_count"] and len(argv) >= 2:
    from workshop.experiments.comms.counting import _count_worker

    exit_process(_count_worker(argv[1:]))
sys.exit(f"{USAGE}\n(the command: workshop comms)")
