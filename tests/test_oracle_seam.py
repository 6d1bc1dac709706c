"""The search's seam (`minrepro.reducers.oracle`): verdicts are values, a yes given ahead comes back as a retraction,
and every wrapper the reduce puts around an oracle (answering ahead, the budget, the progress count) is an oracle."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from minrepro.harness.oracle import AnsweringAhead, Cache, SignatureOracle
from minrepro.reducers import FINAL_PASSES, PASSES, SearchSettings, code_lines, reduce_source
from minrepro.reducers.oracle import Answers, Oracle, PlainOracle, Retraction, Verdict, plain
from minrepro.reduction.budget import WithinBudget
from minrepro.reduction.progress import Counted, Progress


def test_a_plain_function_is_an_oracle_and_its_none_is_later():
    oracle = plain(lambda sources: [True, None, False][: len(sources)])
    assert oracle.judge(["a", "b", "c"]) == Answers((Verdict.INTERESTING, Verdict.LATER, Verdict.UNINTERESTING))
    assert oracle.screen(["a", "b", "c"]).verdicts == (Verdict.INTERESTING, Verdict.INTERESTING, Verdict.UNINTERESTING)
    assert oracle.settle() == ()
    assert plain(oracle) is oracle


def test_every_oracle_the_reduce_builds_keeps_the_contract(tmp_path):
    inner = SignatureOracle(Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10)
    progress = Progress(10, lambda _: None, live=False)
    for oracle in (inner, AnsweringAhead(inner), WithinBudget(inner, None), Counted(inner, progress)):
        assert isinstance(oracle, Oracle), type(oracle).__name__


class TakesBackLater:
    """A differential oracle that answers ahead: a candidate that fails the same way where the script fails
    (`fails`) is answered yes at once, and judged where the bug is fixed (`passes_fixed`) only when settled, with the
    next batch or at `settle`; refused there, it comes back as a retraction."""

    def __init__(self, fails, passes_fixed):
        self.fails, self.passes_fixed, self.pending, self.taken_back = fails, passes_fixed, [], 0

    def judge(self, sources):
        screened = self.screen(sources)
        verdicts, retracted = screened.verdicts, screened.retracted
        first = next((i for i, v in enumerate(verdicts) if v is Verdict.INTERESTING), None)
        if first is None:
            return Answers(verdicts, retracted)
        self.pending.append(sources[first])
        rest = (Verdict.LATER,) * (len(sources) - first - 1)
        return Answers((*verdicts[:first], Verdict.INTERESTING, *rest), retracted)

    def screen(self, sources):
        verdicts = tuple(Verdict.of(self.fails(s)) for s in sources)
        return Answers(verdicts, self.settle())

    def settle(self):
        refused = tuple(Retraction(s, "fails where fixed") for s in self.pending if not self.passes_fixed(s))
        self.pending, self.taken_back = [], self.taken_back + len(refused)
        return refused


@settings(max_examples=20, deadline=None)  # each example is a whole search
@given(st.sets(st.integers(0, 7), min_size=1, max_size=3), st.sets(st.integers(0, 7), min_size=1, max_size=3))
def test_a_search_over_yeses_taken_back_later_keeps_no_program_refused_where_the_bug_is_fixed(fails_with, passes_with):
    """Every yes taken back takes back the program and what was built on it: the result holds where the script fails
    and where the bug is fixed, and is as small as the needed lines allow."""
    source = "".join(f"v{i} = {i}\n" for i in range(8)) + "raise SystemExit(1)\n"

    def holds(needed):
        return lambda text: all(f"v{i} = {i}" in text for i in needed)

    fails, passes_fixed = holds(fails_with), holds(passes_with)
    later = TakesBackLater(fails, passes_fixed)
    result = reduce_source(source, later, PASSES, FINAL_PASSES, SearchSettings(jobs=3))
    assert fails(result) and passes_fixed(result)
    assert code_lines(result) <= len(fails_with | passes_with) + 1  # the raise may stay
    assert later.taken_back > 0 or passes_with <= fails_with


def test_past_the_budget_every_proposal_is_no_without_a_run_and_a_yes_given_ahead_is_still_settled():
    ran = []
    inner = TakesBackLater(lambda s: ran.append(s) or True, lambda s: ran.append(s) or False)
    inner.pending = ["taken"]
    budget = WithinBudget(inner, time.monotonic() - 1)
    answers = budget.judge(["a", "b"])
    assert answers == Answers((Verdict.UNINTERESTING,) * 2, (Retraction("taken", "fails where fixed"),))
    assert budget.unjudged == 2 and ran == ["taken"]  # only the settling ran
    assert WithinBudget(PlainOracle(lambda s: [True] * len(s)), None).judge(["a"]).verdicts == (Verdict.INTERESTING,)


def test_the_count_takes_each_candidate_once_screened_or_judged():
    counts = []
    progress = Progress(10, lambda _: None, live=False)
    progress.tried = lambda n, seconds: counts.append(n)
    counted = Counted(PlainOracle(lambda s: [True] * len(s)), progress)
    counted.screen(["a", "b"])
    counted.judge(["b", "c"])
    assert counts == [2, 1]


def test_two_runs_of_one_candidate_at_once_each_have_a_file_of_their_own(tmp_path):
    # a confirmation where the bug is fixed beside a screening of the same candidate: the first to end removed the
    # file the other was still reading (FileNotFoundError in the good env's run)
    from minrepro.harness.oracle import _claimed

    first, second = _claimed(tmp_path, "ab" * 32, "x = 1\n"), _claimed(tmp_path, "ab" * 32, "x = 1\n")
    assert first != second and first.read_text() == second.read_text() == "x = 1\n"
    first.unlink()
    assert second.exists() and _claimed(tmp_path, "ab" * 32, "y\n") == first  # a freed name is taken again
