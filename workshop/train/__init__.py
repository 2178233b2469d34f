"""The ONE training entry point: `python -m workshop.train` (== `workshop train`), the same program in a notebook's
torchrun, in the multi-node namespace simulation and inside the Kubeflow TrainJob.

The package holds what runs inside a rank: the arguments, the loop, the data pipeline, the mixed-precision
optimizer, the shared-memory all-reduce, the guards, the outputs kept beyond the pod, and the METRIC lines every
launcher reads back.
"""

from workshop.train.args import TrainArgs, build_parser, parse_args
from workshop.train.loop import main, train

__all__ = ["TrainArgs", "build_parser", "main", "parse_args", "train"]
