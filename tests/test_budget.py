"""The reduction's one budget: the deadline, the verification's reserve, each phase's share, a candidate's limit."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from minrepro.reducers.oracle import PlainOracle, Verdict
from minrepro.reduction.budget import VERIFY_FACTOR, VERIFY_GRACE, Budget, WithinBudget, per_candidate


def test_no_budget_bounds_nothing():
    budget = Budget(time.monotonic(), None)
    assert budget.end() is None and budget.left() is None and budget.search_until() is None
    assert budget.scale_down_until(30.0) is None and not budget.passed() and budget.search_fits(1e9)
    assert budget.establishing_fits(1e9) is None and "none" in budget.describe()


@given(
    seconds=st.floats(1, 10_000),
    bad=st.floats(0, 1_000),
    good=st.floats(0, 1_000),
    one_run=st.floats(0, 1_000),
)
def test_each_phase_ends_before_the_next_ones_share(seconds, bad, good, one_run):
    budget = Budget(100.0, seconds)
    budget.keep_for_verification(bad, good)
    assert budget.reserve == VERIFY_FACTOR * max(bad, good) + VERIFY_GRACE
    assert budget.search_until() == budget.end() - budget.reserve <= budget.end()
    assert budget.scale_down_until(one_run) <= budget.search_until()


def test_a_search_that_cannot_run_one_candidate_and_verify_does_not_fit():
    budget = Budget(time.monotonic(), 100.0)
    budget.keep_for_verification(40.0, 50.0)  # 85 s kept
    assert budget.search_fits(10.0) and not budget.search_fits(20.0)


def test_establishing_that_cannot_fit_is_said_with_what_it_needs():
    assert Budget(0.0, 600.0).establishing_fits(100.0) is None
    assert Budget(0.0, 300.0).establishing_fits(100.0) == 100.0 * (2 + VERIFY_FACTOR)


@given(st.floats(0, 1_000))
def test_a_candidate_may_take_twice_its_programs_time_and_never_less_than_a_grace(seconds):
    assert per_candidate(seconds) >= 2 * seconds and per_candidate(seconds) >= seconds + 2.0


def test_past_its_end_every_proposal_is_answered_no_without_a_run():
    ran = []
    ask = WithinBudget(PlainOracle(lambda sources: ran.extend(sources) or [True] * len(sources)), time.monotonic() - 1)
    assert ask.judge(["a", "b"]).verdicts == (Verdict.UNINTERESTING,) * 2 and ran == [] and ask.unjudged == 2
    ask = WithinBudget(PlainOracle(lambda sources: [True] * len(sources)), None)
    assert ask.judge(["a"]).verdicts == (Verdict.INTERESTING,) and ask.unjudged == 0


@given(
    left=st.floats(0.5, 500),
    limit=st.floats(0.1, 100),
    jobs=st.integers(1, 16),
    count=st.integers(1, 200),
)
def test_a_screen_goes_in_parts_that_fit_before_the_end_and_all_at_once_where_they_do(left, limit, jobs, count):
    """Every answer of a screen is needed: the runs go together (no batch waits for its slowest), in parts of as many
    rounds of `jobs` runs as fit before the end at `limit` seconds a run, a batch at the least."""
    parts = []
    oracle = PlainOracle(lambda sources: parts.append(len(sources)) or [True] * len(sources))
    ask = WithinBudget(oracle, time.monotonic() + left, jobs=jobs, run_limit=lambda: limit)
    assert ask.screen([str(i) for i in range(count)]).verdicts == (Verdict.INTERESTING,) * count
    assert sum(parts) == count and ask.unjudged == 0
    assert all(part <= max(jobs, jobs * (left // limit - 1)) for part in parts)  # one round to spare
    assert all(part >= min(jobs, count) for part in parts[:-1])
    endless = []
    WithinBudget(PlainOracle(lambda s: endless.append(len(s)) or [True] * len(s)), None, jobs=jobs).screen(
        [str(i) for i in range(count)]
    )
    assert endless == [count]


def test_a_screen_without_an_end_goes_whole_and_one_without_a_known_run_limit_goes_a_batch_at_a_time():
    parts = []
    oracle = PlainOracle(lambda sources: parts.append(len(sources)) or [True] * len(sources))
    WithinBudget(oracle, float("inf"), jobs=4, run_limit=lambda: 5.0).screen([str(i) for i in range(10)])
    assert parts == [10]  # `--max-seconds inf`
    parts.clear()
    WithinBudget(oracle, time.monotonic() + 100, jobs=4).screen([str(i) for i in range(10)])
    assert parts == [4, 4, 2]


def test_an_oracle_that_answers_fewer_than_asked_ends_the_screen_with_the_rest_refused():
    ask = WithinBudget(PlainOracle(lambda sources: [True] * (len(sources) - 1)), None, jobs=2)
    assert ask.screen(["a", "b", "c"]).verdicts == (Verdict.INTERESTING, Verdict.INTERESTING, Verdict.UNINTERESTING)
