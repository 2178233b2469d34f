"""Support package of the distributed-training workbook: the notebooks narrate, this package does.

Modules follow the data flow of a run: hardware -> catalog -> models -> memory -> plan -> k8s specs,
and data -> train -> logs -> plots. Importing the package is cheap; heavy libraries (torch,
transformers, deepspeed) are imported by the modules that need them.
"""

__version__ = "0.1.0"
