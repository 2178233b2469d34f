"""`python -m workshop ...` is the same as the `workshop` console script."""

from workshop.cli import main
from workshop.errors import exit_process

exit_process(main())
