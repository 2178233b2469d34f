"""`python -m workshop.train`: what torchrun starts in every rank, and what a TrainJob's node container
runs. The door to the command `workshop train` (workshop/cli/train.py), which sits above every layer."""

from workshop.cli.train import train
from workshop.errors import exit_process

if __name__ == "__main__":
    exit_process(train())
