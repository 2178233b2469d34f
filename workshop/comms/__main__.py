"""`python -m workshop.comms`: what torchrun starts for each rank, and the CLI."""

import sys

from workshop.comms.cli import main

sys.exit(main())
