"""`python -m workshop.experiments.comms`: what torchrun starts for each rank, and the CLI."""

import sys

from workshop.experiments.comms.cli import main

sys.exit(main())
