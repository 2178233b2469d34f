"""What results say: sentences and figures computed from numbers. Pure functions (data in, text or PNG out),
so every layer above may use them.
"""
