"""Support package of the distributed-training workbook: the notebooks narrate, this package does.

The folders follow the data flow of a run (README, "The package"). Importing the package is cheap; heavy
libraries (torch, transformers, deepspeed) are imported by the modules that need them.
"""

import glob
import os

__version__ = "0.1.0"

# DeepSpeed guesses its accelerator on import and, finding no GPU, warns "Setting accelerator to CPU. If you
# have GPU or other accelerator, we were unable to detect it." in every process: in notebook cells and in
# every rank's log. Where no NVIDIA device exists, say so up front (children, i.e. the ranks, inherit it); a
# GPU host keeps DeepSpeed's own detection, and an explicit DS_ACCELERATOR always wins.
if "DS_ACCELERATOR" not in os.environ and not glob.glob("/dev/nvidia[0-9]*"):
    os.environ["DS_ACCELERATOR"] = "cpu"
