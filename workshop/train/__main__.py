"""`python -m workshop.train`: what torchrun starts in every rank, and what a TrainJob's node container
runs."""

import sys

from workshop.train.loop import main

if __name__ == "__main__":
    sys.exit(main())
