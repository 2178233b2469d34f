"""The ONE training entry point: `python -m workshop.train` (== `workshop train`), the same program in a
notebook's torchrun, in the multi-node namespace simulation and inside the Kubeflow TrainJob.

The package holds what runs inside a rank: the arguments (args), the process group (distributed), the
DeepSpeed config (deepspeed_config), the model (model), what the HF Trainer gets (trainer), the METRIC lines
every launcher reads back (metrics), the loop that puts them in order (loop), and beside them the data
pipeline, the mixed-precision optimizer, the shared-memory all-reduce, the guards and the outputs kept beyond
the pod.
"""

from workshop.train.args import TrainArgs, parse_args
from workshop.train.deepspeed_config import ds_config
from workshop.train.loop import train

__all__ = ["TrainArgs", "ds_config", "parse_args", "train"]
