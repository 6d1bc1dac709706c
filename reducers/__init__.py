"""The search side of minrepro (installed as `minrepro.reducers`): passes that propose smaller programs and the
driver that applies them. It never runs code and imports nothing from the rest of minrepro: an oracle is any
`test_many(sources) -> list[bool]` (the Lithium seam)."""

from .passes import FINAL_PASSES, PASSES
from .search import PassRecord, Problem, TestMany, reduce_source
from .source import code_lines, normalize

__all__ = ["FINAL_PASSES", "PASSES", "PassRecord", "Problem", "TestMany", "code_lines", "normalize", "reduce_source"]
