"""`python -m workshop.experiments.loading`: what torchrun starts for each rank, and the CLI."""

import sys

from workshop.experiments.loading.cli import main

sys.exit(main())
