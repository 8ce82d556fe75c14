"""Test harnesses shipped with the library (as ``pandas.testing``): the kill-9 torture run.

Run it as ``python -m dvengine.testing.torture``.
"""
