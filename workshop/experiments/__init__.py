"""The measured lessons: loading, collectives, the benchmarks and the ceiling. Each runs real jobs through
the launch layer and writes JSON (benchmarks/results/) that the chapters read.
"""
