"""How runs start and stop: torchrun for every multi-rank job (training, loading, collectives, benchmarks),
the rank environment, process trees, network namespaces for multi-node runs, papermill for notebooks.
"""
