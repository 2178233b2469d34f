"""`python -m workshop.loading`: what torchrun starts for each rank, and the CLI."""

import sys

from workshop.loading.cli import main

sys.exit(main())
