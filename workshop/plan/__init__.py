"""What to run, decided before anything runs: what this CPU does, which instances exist, the model's exact
size, memory per rank, the bytes ZeRO moves and what they cost. Pure computation: nothing here starts a
process.
"""
