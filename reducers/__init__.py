"""The search side of minrepro (installed as `minrepro.reducers`): passes that propose smaller programs and the
driver that applies them. It never runs code and imports nothing from the rest of minrepro: it asks an `Oracle`
(`reducers.oracle`: verdicts as values, a yes given ahead taken back as a `Retraction`), or any plain
`test_many(sources) -> list[bool]` (the Lithium seam)."""

from .oracle import Answers, Oracle, PlainOracle, Retraction, TestMany, Verdict, plain
from .passes import FINAL_PASSES, PASSES
from .search import Observers, PassRecord, Problem, SearchSettings, reduce_source
from .source import code_lines, normalize

__all__ = [
    "FINAL_PASSES",
    "PASSES",
    "Answers",
    "Observers",
    "Oracle",
    "PassRecord",
    "PlainOracle",
    "Problem",
    "Retraction",
    "SearchSettings",
    "TestMany",
    "Verdict",
    "code_lines",
    "normalize",
    "plain",
    "reduce_source",
]
