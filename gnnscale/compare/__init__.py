"""Compare finished runs side by side (``python -m gnnscale.compare RUN_DIRS...``)."""

from gnnscale.compare.runs import CompareError, Run, check_comparable, load_run

__all__ = ["CompareError", "Run", "check_comparable", "load_run"]
