"""Command-line scripts (``python scripts/NAME.py``); importable as ``scripts.NAME`` for tests
and benchmarks."""
