"""What the notebooks need on top of everything else: exercises with checked outcomes, widgets that also
speak as text, the tracked figures, the outputs nbval checks.
"""
