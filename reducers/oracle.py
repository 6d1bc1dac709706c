"""The seam between the search and whatever runs candidates (the Lithium seam, written down).

The search proposes programs and asks an `Oracle`; the oracle answers each with a `Verdict`. It never raises to say
no. An oracle that answers yes ahead of part of its judgment (runs where the bug is fixed still going) says later
that it takes a yes back, as a `Retraction` carried by a later answer or by `settle`: the search then goes back to
the program before that yes. Any plain `test_many(sources) -> list[bool | None]` is an oracle through `plain`."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class Verdict(enum.Enum):
    INTERESTING = "interesting"
    UNINTERESTING = "uninteresting"
    # not judged yet: given only after an interesting candidate of the same batch (a search takes the first yes,
    # so the rest's costliest runs would be spent); asked again, the candidate is judged
    LATER = "later"

    @classmethod
    def of(cls, answer: bool | None) -> Verdict:
        return cls.LATER if answer is None else cls.INTERESTING if answer else cls.UNINTERESTING


@dataclass(frozen=True)
class Retraction:
    """A yes taken back: `source` was answered interesting ahead of its whole judgment and refused after all."""

    source: str
    why: str = ""


@dataclass(frozen=True)
class Answers:
    """The verdicts of one batch, in its order, and the yeses of earlier batches taken back since the last answer."""

    verdicts: tuple[Verdict, ...]
    retracted: tuple[Retraction, ...] = ()


@runtime_checkable
class Oracle(Protocol):
    def judge(self, sources: Sequence[str]) -> Answers:
        """The whole judgment of each candidate (LATER allowed after an INTERESTING one)."""

    def screen(self, sources: Sequence[str]) -> Answers:
        """A first judgment, where the script fails only: INTERESTING may still be refused by `judge`; an oracle
        that judges in one step screens by judging. Never LATER."""

    def settle(self) -> tuple[Retraction, ...]:
        """Wait for every yes given ahead of its judgment; the ones refused after all."""


TestMany = Callable[[list[str]], "list[bool | None]"]


@dataclass(frozen=True)
class PlainOracle:
    """An oracle over plain functions: `test_many` judges (None: LATER), `screen_many` (if given) screens."""

    test_many: TestMany
    screen_many: TestMany | None = None

    def judge(self, sources: Sequence[str]) -> Answers:
        return Answers(tuple(Verdict.of(a) for a in self.test_many(list(sources))))

    def screen(self, sources: Sequence[str]) -> Answers:
        answers = (self.screen_many or self.test_many)(list(sources))
        return Answers(tuple(Verdict.UNINTERESTING if a is False else Verdict.INTERESTING for a in answers))

    def settle(self) -> tuple[Retraction, ...]:
        return ()


def plain(oracle: Oracle | TestMany) -> Oracle:
    """`oracle` itself where it is an `Oracle`, else a `PlainOracle` over the function."""
    return oracle if isinstance(oracle, Oracle) else PlainOracle(oracle)
