"""The reduction's time, owned in one place: the whole run's deadline (`--max-seconds`), the reserve kept for the
cold verification, what each phase may spend, and the limit on one candidate's run. Every phase asks it; none keeps
a clock of its own.

    establish    the original's cold runs: needed whatever the budget (said at once where they cannot fit)
    scale-down   twins, until the search's end less one verification of the original
    guard        its runs stop at the deadline: a guard they cannot decide is said undecided
    search       candidates until the deadline less the reserve; past it every proposal is answered "no"
    verify       the reserve: a bad run and the good runs side by side, cold
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..reducers.oracle import Answers, Oracle, Retraction, Verdict

DEFAULT_BUDGET = 600.0  # seconds for a whole reduce unless --max-seconds says otherwise (the CLI's default)
# The cold verification is kept out of the search's time: a bad run and the good runs side by side cost about the
# slowest of them, cold (imports included); the factor covers a loaded machine.
VERIFY_FACTOR, VERIFY_GRACE = 1.5, 10.0
# A candidate may not run slower than SLOWDOWN x the program the search stands on (or it + GRACE_SECONDS): dropping
# `num_hidden_layers=2` keeps the bug but makes every later candidate, and the final repro, slow.
SLOWDOWN, GRACE_SECONDS = 2.0, 2.0


@dataclass
class Budget:
    start: float
    seconds: float | None  # the whole reduce; None: no budget
    reserve: float = 0.0  # kept for the cold verification, once the guard knows what a run where it is fixed costs

    def end(self) -> float | None:
        """When the whole reduce must have ended (None: no budget)."""
        return None if self.seconds is None else self.start + self.seconds

    def left(self) -> float | None:
        end = self.end()
        return None if end is None else end - time.monotonic()

    def search_until(self) -> float | None:
        """No candidate runs past this: the verification's reserve is kept."""
        end = self.end()
        return None if end is None else end - self.reserve

    def passed(self) -> bool:
        until = self.search_until()
        return until is not None and time.monotonic() >= until

    def scale_down_until(self, one_run: float) -> float | None:
        """No twin is tried past this: one cold verification of the original (`one_run` long) must still fit."""
        until = self.search_until()
        return None if until is None else until - VERIFY_FACTOR * one_run

    def establishing_fits(self, one_run: float) -> float | None:
        """None where two more cold runs and a cold verification fit, else what they need at the least."""
        floor = one_run * (1 + 1 + VERIFY_FACTOR)
        return floor if self.seconds is not None and floor > self.seconds else None

    def keep_for_verification(self, bad_seconds: float, good_seconds: float) -> None:
        self.reserve = VERIFY_FACTOR * max(bad_seconds, good_seconds) + VERIFY_GRACE

    def search_fits(self, one_candidate: float) -> bool:
        """Whether one candidate and then the verification fit in what is left."""
        left = self.left()
        return left is None or left >= self.reserve + one_candidate

    def describe(self) -> str:
        """What each phase may spend, said at the start."""
        if self.seconds is None:
            return "time budget: none (--max-seconds not set)"
        return (
            f"time budget: {self.seconds:.0f} s; twins until the search's end less one verification of the "
            "original; the guard's runs stop at the end; the search until the end less the verification's reserve "
            f"({VERIFY_FACTOR:g}x the slowest run of the result plus {VERIFY_GRACE:.0f} s)"
        )


def per_candidate(seconds: float) -> float:
    """The longest a candidate may run where the program it comes from ran `seconds`."""
    return max(SLOWDOWN * seconds, seconds + GRACE_SECONDS)


@dataclass
class WithinBudget:
    """Past `until` every proposal is answered UNINTERESTING without a run (counted in `unjudged`): the search runs
    out of proposals at once and its best goes to verification like one that ended by itself (no pass knows). A yes
    given ahead is still settled, so none is left unjudged at the end.

    A screen of many candidates goes to the oracle in parts planned to end before `until`, `jobs` runs at a time of at
    most `run_limit()` seconds each (what the oracle spends on one candidate's screen) with one round to spare: all at
    once where the time left holds them (no batch waits for its slowest), a batch at a time near the end."""

    oracle: Oracle
    until: float | None
    unjudged: int = 0
    jobs: int = 1
    run_limit: Callable[[], float] | None = None

    def _past(self, sources: Sequence[str]) -> Answers | None:
        if self.until is None or time.monotonic() < self.until:
            return None
        self.unjudged += len(sources)
        return Answers((Verdict.UNINTERESTING,) * len(sources), self.oracle.settle())

    def judge(self, sources: Sequence[str]) -> Answers:
        return self._past(sources) or self.oracle.judge(sources)

    def screen(self, sources: Sequence[str]) -> Answers:
        verdicts: list[Verdict] = []
        retracted: list[Retraction] = []
        while len(verdicts) < len(sources):
            part = sources[len(verdicts) : len(verdicts) + self._part()]
            answers = self._past(part) or self.oracle.screen(part)
            verdicts += answers.verdicts[: len(part)]
            retracted += answers.retracted
            # the program changed under the rest (the search drops them and asks again), or the oracle answered
            # fewer than asked (the rest as no, as a batch's missing answers were)
            if answers.retracted or len(answers.verdicts) < len(part):
                verdicts += [Verdict.UNINTERESTING] * (len(sources) - len(verdicts))
        return Answers(tuple(verdicts), tuple(retracted))

    def _part(self) -> int:
        """How many candidates are planned to end before `until`, one round to spare (a batch of `jobs` at the
        least; all where there is no end, a batch where a run's limit is not known)."""
        jobs = max(1, self.jobs)
        left = math.inf if self.until is None else self.until - time.monotonic()
        if math.isinf(left):  # no budget, or `--max-seconds inf`
            return 1 << 30
        limit = self.run_limit() if self.run_limit is not None else math.nan
        if not (math.isfinite(limit) and limit > 0):
            return jobs
        return jobs * max(1, int(left // limit) - 1)

    def settle(self) -> tuple[Retraction, ...]:
        return self.oracle.settle()
