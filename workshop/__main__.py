"""`python -m workshop ...` is the same as the `workshop` console script."""

import sys

from workshop.cli import main

sys.exit(main())
