"""`workshop bench`: side-by-side benchmarks that prove (or refute) that the workbook's CPU recipe is the fast
one. Results go to benchmarks/results/<name>.json, and `summary_rows()` turns them into the table chapter 04
shows.

The modules: `config` (what every benchmark shares), `training` (recipes, engine, precision: interleaved
variants, A against B), `gemm`, `ipex` (with `ipex_child.py`, run in IPEX's own environment), `workbook` (the
timed smoke run), `summary` (the headline table). `workshop bench ceiling` is its own package,
workshop.experiments.ceiling. Chapter 04 calls the names below.
"""

from workshop.experiments.bench.summary import format_rows, load_results, plot, summary_rows

__all__ = ["format_rows", "load_results", "plot", "summary_rows"]
