"""The search side of minrepro: reduction passes and the driver that applies them."""

from .passes import FINAL_PASSES, PASSES
from .search import Problem, normalize, reduce_source

__all__ = ["FINAL_PASSES", "PASSES", "Problem", "normalize", "reduce_source"]
