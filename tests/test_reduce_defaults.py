"""What a user gets from `minrepro reduce SCRIPT` with no flags: runs side by side chosen from the machine, a time
budget that keeps the verification's share, a fixed world that must *pass*, passes that yield their turns when they
shrink nothing, and a resume command whatever the phase it was stopped in."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from minrepro.cli import main
from minrepro.errors import MinreproError
from minrepro.harness.oracle import AnsweringAhead, Cache, SignatureOracle
from minrepro.reducers.oracle import Answers, Verdict
from minrepro.harness.runner import RunResult, run_from_dict, run_to_dict
from minrepro.harness.signature import Frame, Signature

SIG = Signature("exception", "RuntimeError", "boom", (Frame("fakelib", "fakelib", "f"),), (), "library")
ELSE = Signature(
    "exception", "IndexError", "index out of range in self", (Frame("torch", "torch", "embedding"),), (), "library"
)
FAILING = "import json\nraise RuntimeError('boom')\n"


class _Table:
    """An executor answering from a table: candidate source -> signature (None: exit 0)."""

    name = "table"

    def __init__(self, table):
        self.table = table

    def run_many(self, scripts, timeout, home=None):
        return [
            RunResult(
                0 if self.table[Path(s).read_text()] is None else 1, "", "", 0.1, self.table[Path(s).read_text()], ""
            )
            for s in scripts
        ]


@pytest.mark.parametrize("where_fixed, interesting", [(None, True), (SIG, False), (ELSE, False)])
def test_where_the_bug_is_fixed_a_candidate_must_pass_not_merely_fail_otherwise(tmp_path, where_fixed, interesting):
    # a twin whose per-layer vocabulary was shrunk below generate's ids failed with an IndexError where the bug is
    # fixed; taken as "does not fail the same way there", its output failed on the newest set it claimed to pass on
    oracle = SignatureOracle(
        Cache(tmp_path / "c.jsonl", "k"),
        tmp_path,
        10,
        executor=_Table({"c = 1\n": SIG}),
        original=SIG,
        good=[_Table({"c = 1\n": where_fixed})],
        good_runs=1,
    )
    assert oracle.test_many(["c = 1\n"]) == [interesting]
    note = oracle.cache.notes[oracle.cache.hash("c = 1\n")]
    assert ("where the original passes" in note) == (where_fixed is ELSE)


def test_the_cold_verification_refuses_a_result_that_fails_otherwise_where_the_bug_is_fixed(tmp_path, monkeypatch):
    from minrepro.reduction.phases import verify

    class Cold:
        def __init__(self, python, jobs):
            self.python = python

        def run_many(self, scripts, timeout, home):
            signature = SIG if self.python == "bad" else ELSE
            return [RunResult(1, "", "", 0.3, signature, "")]

    monkeypatch.setattr(verify, "ColdExecutor", Cold)
    oracle = SignatureOracle(Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10, original=SIG, good_runs=2)
    cold = verify.verify_cold("x = 1\n", oracle, SimpleNamespace(pythons=("new",)), ("bad", 5.0), jobs=3)
    assert (cold.verified, cold.good_pass, cold.good_said) == (False, False, "")
    assert "does not pass where the bug is fixed" in cold.why and "IndexError" in cold.why


def _run(rss=0.0, gpu=0.0):
    return RunResult(1, "", "", 1.0, SIG, "", peak_rss_mb=rss, peak_gpu_mb=gpu)


def test_runs_side_by_side_follow_the_cores_and_the_memory_unless_given(monkeypatch):
    from minrepro.reduction.options import MAX_AUTO_JOBS
    from minrepro.reduction.phases import establish

    monkeypatch.setattr(establish, "cores", lambda: 16)
    monkeypatch.setattr(establish, "available_ram_mb", lambda: 100_000.0)
    monkeypatch.setattr(establish, "free_gpu_mb", lambda: 80_000.0)
    jobs, why = establish.choose_jobs(None, [_run(2_000.0, 600.0)], "the twin")
    assert jobs == MAX_AUTO_JOBS and "16 cores" in why and "2.0 GB RAM" in why
    # an E4B original holds 30 GB of RAM: two at once
    jobs, why = establish.choose_jobs(None, [_run(30_000.0, 20_000.0)], "the original")
    assert jobs == 2 and "RAM holds 2" in why
    monkeypatch.setattr(establish, "cores", lambda: 2)
    assert establish.choose_jobs(None, [_run(500.0)], "the twin")[0] == 2  # the 2-core box
    jobs, why = establish.choose_jobs(6, [_run(30_000.0)], "the original")
    assert jobs == 2 and why.startswith("--jobs 6, lowered")
    assert establish.choose_jobs(6, [_run(500.0)], "the twin") == (6, "--jobs 6")


def test_a_pass_that_changed_nothing_yields_its_turns_to_those_that_did():
    from minrepro.reducers import Observers, reduce_source

    calls = {"shrinks": 0, "idle": 0}

    def shrinks(problem):  # drops one line per turn while there are three or more
        calls["shrinks"] += 1
        lines = problem.current.splitlines()
        if len(lines) > 2:
            problem.accept("\n".join(lines[1:]) + "\n")

    def idle(problem):
        calls["idle"] += 1

    source = "".join(f"x{i} = {i}\n" for i in range(8))
    records = {}
    result = reduce_source(
        source, lambda batch: [True] * len(batch), [idle, shrinks], [], observers=Observers(records=records)
    )
    assert result == "x6 = 6\nx7 = 7\n"
    # idle ran on the first round, then only once the productive pass was spent (twice: that round and the last)
    assert calls["idle"] == 2 and calls["shrinks"] == 8
    assert records["shrinks"].lines_removed == 6 and records["idle"].lines_removed == 0


def test_a_pass_whose_candidates_keep_failing_is_retired():
    from minrepro.reducers import reduce_source

    calls = {"costly": 0}

    def costly(problem):  # proposes a new candidate the oracle refuses, every turn (a run each: no cache hit)
        calls["costly"] += 1
        problem.first_interesting([f"refused = {calls['costly']}\n"])

    def shrinks(problem):  # one line a turn down to four
        lines = problem.current.splitlines()
        if len(lines) > 4:
            problem.accept("\n".join(lines[1:]) + "\n")

    def late(problem):  # what the others leave opens a last step: two more full rounds
        lines = problem.current.splitlines()
        if len(lines) == 4:
            problem.accept("\n".join(lines[2:]) + "\n")

    source = "".join(f"x{i} = {i}\n" for i in range(8))
    result = reduce_source(source, lambda batch: ["refused" not in c for c in batch], [costly, shrinks, late], [])
    assert result == "x6 = 6\nx7 = 7\n"
    # two fruitless turns that cost a run each, then retired from the rounds; one last turn before the end
    assert calls["costly"] == 3


def test_a_pass_retired_early_gets_a_last_turn_and_the_search_goes_on_where_it_takes_something():
    """Shrink Ray's probation: a decorator refused while the script still held its good path may go once the slice
    has cut that path; the result is a fixpoint of every pass, not of those still running."""
    from minrepro.reducers import reduce_source

    def without(text: str, line: str) -> str:
        return "".join(f"{kept}\n" for kept in text.splitlines() if kept != line)

    def unlock(problem):  # refused while `key = 1` stands: a new candidate (a run) each turn, so it is retired
        if "lock = 1" in problem.current.splitlines():
            candidate = without(problem.current, "lock = 1")
            if problem.first_interesting([candidate]) == 0:
                problem.accept(candidate)

    def slow(problem):  # every other turn, a filler, then `key = 1` (what a slice reaches late)
        slow.turns = getattr(slow, "turns", 0) + 1
        lines = problem.current.splitlines()
        fillers = [line for line in lines if line.startswith("f")]
        if slow.turns % 2 and (fillers or "key = 1" in lines):
            problem.accept(without(problem.current, fillers[0] if fillers else "key = 1"))

    source = "lock = 1\nkey = 1\nf0 = 0\nx = 0\n"
    interesting = lambda batch: ["x = 0" in c and ("lock = 1" in c or "key = 1" not in c) for c in batch]  # noqa: E731
    assert reduce_source(source, interesting, [unlock, slow], []) == "x = 0\n"


def test_a_run_is_the_same_after_a_round_trip_through_json():
    run = RunResult(
        1,
        "out",
        "err",
        2.5,
        SIG,
        "RuntimeError: boom",
        ({"event": "load"},),
        (3, 4),
        ("torch",),
        ("base",),
        ("torch.nn",),
        900.0,
        120.0,
    )
    assert run_from_dict(json.loads(json.dumps(run_to_dict(run)))) == run
    passing = RunResult(0, "", "", 0.1, None, "")
    assert run_from_dict(json.loads(json.dumps(run_to_dict(passing)))) == passing


def test_stopped_during_the_guard_it_writes_the_original_and_says_how_to_resume(tmp_path, capsys, monkeypatch):
    from minrepro.reduction import driver

    from minrepro.reduction.results import Phase

    def stopped(ctx, done):
        raise KeyboardInterrupt("SIGTERM")

    monkeypatch.setattr(
        driver, "PHASES", [p if p.name != "guard" else Phase("guard", "guard", stopped) for p in driver.PHASES]
    )
    script = tmp_path / "job.py"
    script.write_text(FAILING)
    assert main(["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold"]) == 130
    err = capsys.readouterr().err
    assert "resume with: minrepro reduce" in err and "by SIGTERM" in err
    assert "INTERRUPTED, NOT VERIFIED" in (tmp_path / "job.min.py").read_text()


def test_a_resumed_reduction_takes_the_originals_runs_from_its_earlier_start(tmp_path, capsys, monkeypatch):
    from minrepro.reduction.phases import establish

    script = tmp_path / "job.py"
    script.write_text(FAILING)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--guard", "none", "--json"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    calls = []

    def first_run(*args, **kwargs):
        calls.append(args)
        raise MinreproError("ran the original again")

    monkeypatch.setattr(establish, "first_run", first_run)
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert calls == [] and again["signature"] == first["signature"]
    assert main([*argv, "--fresh"]) == 2 and calls  # --fresh runs the original again


def test_the_summary_says_per_phase_what_it_cost_and_what_ran_side_by_side(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("import json\nimport os\nx = 1\nraise RuntimeError('boom')\n")
    assert main(["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [p["phase"] for p in summary["phases"]] == [
        "establish",
        "scale-down",
        "guard",
        "search set-up",
        "search",
        "trigger report",
        "verify",
    ]
    assert summary["jobs"] >= 1 and "cores" in summary["jobs_why"]
    assert summary["budget_seconds"] is not None and not summary["maybe_not_minimal"]
    assert any(record["lines_removed"] for record in summary["passes"])
    # when the script was how small: each accepted candidate, in time order
    seconds = [point[0] for point in summary["timeline"]]
    assert seconds == sorted(seconds) and summary["timeline"][-1][1] == summary["output_lines"]


def test_a_budget_the_original_cannot_fit_is_said_at_the_start(tmp_path, capsys):
    script = tmp_path / "job.py"
    script.write_text("import time\ntime.sleep(0.6)\nraise RuntimeError('boom')\n")
    argv = [
        "reduce",
        str(script),
        "--workdir",
        str(tmp_path / "w"),
        "--executor",
        "cold",
        "--max-seconds",
        "1",
        "--json",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert any("exceeds the time budget" in note for note in summary["notes"])
    assert "NOT VERIFIED" not in Path(summary["output"]).read_text()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_the_guard_judges_its_candidate_envs_side_by_side_then_reads_them_in_order(tmp_path, monkeypatch):
    import threading
    import time

    from minrepro.reduction.guard import GuardSearch

    live, most, lock = [0], [0], threading.Lock()
    verdicts = {"pinned": SIG, "reporter": SIG, "newest-patched": None}

    def runs(self, python):
        with lock:
            live[0] += 1
            most[0] = max(most[0], live[0])
        time.sleep(0.2)
        with lock:
            live[0] -= 1
        return [RunResult(0 if verdicts[python] is None else 1, "", "", 0.2, verdicts[python], "boom")] * 2

    monkeypatch.setattr(GuardSearch, "_runs", runs)
    search = GuardSearch(tmp_path / "twin.py", "x = 1\n", SIG, "boom", lambda run: True, None, 10.0, print, jobs=8)
    search.prefetch(list(verdicts))
    assert most[0] == 3 and set(search.known) == set(verdicts)
    assert search.why_not_passing("pinned") and not search.why_not_passing("newest-patched")
    calls = []
    monkeypatch.setattr(GuardSearch, "_runs", lambda self, python: calls.append(python) or [])
    search.prefetch(list(verdicts))  # known already: nothing runs again
    small = GuardSearch(tmp_path / "twin.py", "x = 1\n", SIG, "boom", lambda run: True, None, 10.0, print, jobs=2)
    small.prefetch(list(verdicts))  # a box that holds one pair of runs: the search in order runs them itself
    assert calls == [] and small.known == {}


@pytest.mark.parametrize("patched_passes", [True, False, None])
def test_the_families_patched_env_is_judged_first_and_alone(tmp_path, monkeypatch, patched_passes):
    """The catalog's fix of this very failure goes first, its runs alone on the box; where it passes no other env
    runs, and where it does not, the version sets go side by side and the first that passes is the guard. A failure
    no family matches (None) has no patched env: the version sets are judged as before, the first alone."""
    from minrepro.reduction import guard as guards
    from minrepro.reduction.guard import Guard, GuardSearch, choose_guard

    verdicts = {"pinned": SIG, "reporter": None, "newest-patched": None if patched_passes else SIG}
    ran: list[list[str]] = []

    def runs(self, python):
        ran[-1].append(python)
        return [RunResult(0 if verdicts[python] is None else 1, "", "", 0.2, verdicts[python], "boom")] * 2

    def prefetch(self, pythons):
        ran.append([])
        for python in pythons:
            self.known.setdefault(python, runs(self, python))

    def patched(search):
        if patched_passes is None:
            return []
        return [("newest-patched", Guard("good-env", "the family's patches", ("newest-patched",)))]

    made: list[str] = []  # the version sets' envs asked for (each made on first use: a minute on a fresh box)

    def sets(search):
        made.append("sets")
        return [(p, Guard("good-env", f"the {p} set", (p,))) for p in ("pinned", "reporter")]

    monkeypatch.setattr(GuardSearch, "_runs", runs)
    monkeypatch.setattr(GuardSearch, "prefetch", prefetch)
    monkeypatch.setattr(guards, "patched_family_envs", patched)
    monkeypatch.setattr(guards, "version_set_envs", sets)
    monkeypatch.setattr(guards, "GOOD_ENV_CANDIDATES", [patched, sets])
    search = GuardSearch(tmp_path / "twin.py", "x = 1\n", SIG, "boom", lambda run: True, None, 10.0, print, jobs=8)
    search.catalog = object()
    ran.append([])
    guard = choose_guard(search, [], "auto")
    if patched_passes:
        assert ran == [["newest-patched"]] and guard.why == "the family's patches"
        assert made == []  # the other sets' envs are not waited for where the fix passes
    elif patched_passes is None:
        assert ran == [["pinned"], ["reporter"]] and guard.why == "the reporter set"
    else:
        assert ran == [["newest-patched"], ["pinned", "reporter"]] and guard.why == "the reporter set"


def test_the_warm_pool_keeps_spare_workers_warming_beyond_its_jobs():
    from minrepro.harness.executors import ExecutorOptions, WarmPoolExecutor

    pool = WarmPoolExecutor(sys.executable, (), jobs=2, options=ExecutorOptions(spares=2))
    try:
        assert len(pool._idle) == 4
    finally:
        pool.close()


class _Counting(_Table):
    def __init__(self, table):
        super().__init__(table)
        self.ran: list[str] = []

    def run_many(self, scripts, timeout, home=None):
        self.ran += [Path(s).read_text() for s in scripts]
        return super().run_many(scripts, timeout, home)


def test_only_the_first_interesting_candidate_of_a_batch_runs_where_the_bug_is_fixed(tmp_path):
    """A search takes a batch's first interesting candidate: the others' good runs wait until one is asked for
    again (None meanwhile), and then run without another bad run. A refusal where the bug is fixed moves on to the
    next in the batch's order."""
    sources = [f"c = {i}\n" for i in range(4)]
    bad = _Counting({s: SIG for s in sources})
    good = _Counting({sources[0]: SIG, sources[1]: None, sources[2]: None, sources[3]: None})
    oracle = SignatureOracle(
        Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10, executor=bad, original=SIG, good=[good], good_runs=2
    )
    assert oracle.test_many(sources) == [False, True, None, None]  # the first fails there too: not the bug
    assert sorted(bad.ran) == sorted(sources) and good.ran == [sources[0]] * 2 + [sources[1]] * 2
    assert oracle.test_many([sources[3]]) == [True]
    assert sorted(bad.ran) == sorted(sources) and good.ran[-2:] == [sources[3]] * 2  # no second bad run
    assert [a for a, _ in oracle.outcomes(sources)] == [False, True, True, True]


def _cold_runs_remembered(workdir: Path) -> int:
    """How many cold runs of the original the reduction recorded as established (what a resume takes)."""
    (path,) = workdir.rglob("established.json")
    return len(json.loads(path.read_text())["cold"])


def test_the_originals_confirming_runs_go_beside_the_scale_down(tmp_path, capsys, monkeypatch):
    """The first run is the traced one; the two that confirm it run while the scale-down proposes its twin; the guard
    takes them."""
    from minrepro.reduction.phases import scale_down as scale_phase
    from minrepro.reduction.phases.establish import CONFIRMING

    script = tmp_path / "job.py"
    script.write_text("import time\ntime.sleep(1.5)\nraise RuntimeError('boom')\n")
    seen, contexts = {}, []

    def build_twin(ctx, est, executor, **kwargs):
        contexts.append(ctx)
        seen["traced first"] = est.traced is est.first_run and est.traced is not None
        seen["confirming"] = ctx.background.pending(CONFIRMING)
        return None

    monkeypatch.setattr(scale_phase, "build_twin", build_twin)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--guard", "none", "--json"]
    assert main(argv) == 0
    assert seen == {"traced first": True, "confirming": True}
    assert not contexts[0].background.pending(CONFIRMING) and len(contexts[0].done.standing.cold) == 3
    assert _cold_runs_remembered(tmp_path / "w") == 3


def _fake_twin(monkeypatch, text: str, contexts: list | None = None, seen: dict | None = None, memo: bool = False):
    """A scale-down that stands `text` in as the twin (written where the phase would write it); `seen`: which of the
    search's executors had started when the twin was built; `memo`: its `twin.json` written too, as the phase does."""
    from minrepro.reduction.phases import scale_down as scale_phase
    from minrepro.reduction.scale import ScaleDown
    from minrepro.reduction.workdirs import digest

    def build_twin(ctx, est, executor, **kwargs):
        if contexts is not None:
            contexts.append(ctx)
        if seen is not None:
            seen["the bad env's executor started while the twin was judged"] = bool(ctx.workers.started)
            seen["the fix's executor started while the twin was judged"] = ctx.workers.early_fix is not None
        path = est.scale_dir / "twin.py"
        path.write_text(text)
        scaled = ScaleDown(text, "scaled down: a stand-in", [], 1, path)
        if memo:
            scaled.original = digest(ctx.source)
            (est.scale_dir / "twin.json").write_text(scaled.to_json())
        return scaled

    monkeypatch.setattr(scale_phase, "build_twin", build_twin)


def test_the_guard_of_a_twin_goes_beside_the_originals_confirming_runs(tmp_path, capsys, monkeypatch):
    """The twin's guard needs none of the original's confirming runs: they are taken after the guard is chosen,
    before the search. The twin's own cold run where the script fails is the last of the three that agree."""
    from minrepro.reduction.phases import guard as guard_phase
    from minrepro.reduction.phases.establish import CONFIRMING

    script = tmp_path / "job.py"
    script.write_text("import time\ntime.sleep(1.5)\nraise RuntimeError('boom')\n")
    contexts, seen = [], {}
    _fake_twin(monkeypatch, "raise RuntimeError('boom')\n", contexts)
    real_choose = guard_phase.choose_on_twin

    def choose(search, opts, original):
        seen["confirming while the guard chose"] = contexts[0].background.pending(CONFIRMING)
        return real_choose(search, opts, original)

    monkeypatch.setattr(guard_phase, "choose_on_twin", choose)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--guard", "none", "--json"]
    assert main(argv) == 0
    assert seen == {"confirming while the guard chose": True}
    assert len(contexts[0].done.standing.cold) == 2 and not contexts[0].background.pending(CONFIRMING)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert "scaled down: a stand-in" in summary["notes"]


def test_a_twin_the_guard_drops_is_not_counted_among_the_confirming_runs(tmp_path, capsys, monkeypatch):
    """The twin fails where the bug is fixed too (a twin's own artifact), so the search stands on the original: its
    third cold run is made on the original, not taken from the twin that went."""
    import stat

    script = tmp_path / "job.py"
    script.write_text(
        "import os, time\ntime.sleep(1.5)\nif not os.environ.get('FIXED'):\n    raise RuntimeError('boom')\n"
    )
    good = tmp_path / "good-python"
    good.write_text(f'#!/bin/sh\nFIXED=1 exec "{sys.executable}" "$@"\n')
    good.chmod(good.stat().st_mode | stat.S_IEXEC)
    contexts: list = []
    _fake_twin(monkeypatch, "raise RuntimeError('boom')\n", contexts)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--json"]
    assert main([*argv, "--good-python", str(good), "-v"]) == 0
    err = capsys.readouterr().err
    assert "no tiny twin stands: 1 more cold run(s) of the original" in err
    assert len(contexts[0].done.standing.cold) == 3 and contexts[0].done.scaled is None


def test_the_search_starts_beside_the_good_env_s_reuse_check(tmp_path, capsys, monkeypatch):
    """The good env's executor is made ready (its reuse check) beside the search's first candidates: the search does
    not wait for it, and its runs where the bug is fixed still judge every yes."""
    import stat
    import time

    from minrepro.reduction import workers
    from minrepro.reduction.phases import search as search_phase

    script = tmp_path / "job.py"
    script.write_text("import os\nx = 1\ny = 2\nif not os.environ.get('FIXED'):\n    raise RuntimeError('boom')\n")
    good = tmp_path / "good-python"
    good.write_text(f'#!/bin/sh\nFIXED=1 exec "{sys.executable}" "$@"\n')
    good.chmod(good.stat().st_mode | stat.S_IEXEC)
    events: dict[str, float] = {}
    real_check, real_search = workers.reuse_agrees, search_phase.reduce_source

    def check(executor, subject, *args, **kwargs):
        if getattr(executor, "python", "") == str(good):
            time.sleep(3)
            events["good check ended"] = time.monotonic()
        return real_check(executor, subject, *args, **kwargs)

    def search(*args, **kwargs):
        events.setdefault("search began", time.monotonic())
        return real_search(*args, **kwargs)

    monkeypatch.setattr(workers, "reuse_agrees", check)
    monkeypatch.setattr(search_phase, "reduce_source", search)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--json", "--no-scale-down"]
    assert main([*argv, "--good-python", str(good)]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert events["search began"] < events["good check ended"]
    assert summary["passes_in_good_env"] and "FIXED" in Path(summary["output"]).read_text()


def test_a_resumed_reduction_makes_the_run_a_twin_stood_in_for_where_no_twin_stands_now(tmp_path, capsys, monkeypatch):
    """An earlier run of the reduction kept two cold runs of the original (its twin's run was the third); resumed
    without that twin, the third is made on the original."""
    from minrepro.reduction.phases import scale_down as scale_phase

    script = tmp_path / "job.py"
    script.write_text("raise RuntimeError('boom')\n")
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--guard", "none"]
    _fake_twin(monkeypatch, "raise RuntimeError('boom')\n")
    assert main(argv) == 0
    assert _cold_runs_remembered(tmp_path / "w") == 2
    for memo in (tmp_path / "w").rglob("twin.json"):
        memo.unlink()
    monkeypatch.setattr(scale_phase, "build_twin", lambda *args, **kwargs: None)
    capsys.readouterr()
    assert main([*argv, "-v"]) == 0
    assert "no tiny twin stands: 1 more cold run(s) of the original" in capsys.readouterr().err
    assert _cold_runs_remembered(tmp_path / "w") == 3


def test_a_twin_whose_traced_run_alone_disagreed_goes_after_the_guard_and_the_original_is_reduced(
    tmp_path, capsys, monkeypatch
):
    script = tmp_path / "job.py"
    script.write_text(
        "import json\nif __file__.endswith('scale.py'):\n    raise KeyError('traced')\nraise RuntimeError('plain')\n"
    )
    _fake_twin(monkeypatch, "raise KeyError('traced')\n")
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "warm-pool", "--json"]
    argv += ["--guard", "none"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["signature"] == "RuntimeError: plain"
    assert any("the traced run failed otherwise" in note for note in summary["notes"])
    assert "scaled down: a stand-in" not in summary["notes"]
    assert "KeyError" not in Path(summary["output"]).read_text()


def test_a_twin_whose_traced_run_disagrees_after_the_search_began_is_withdrawn_and_the_original_reduced(
    tmp_path, capsys, monkeypatch
):
    """The plain runs are slow, so the guard leaves them going and the search starts on the twin; taken at its end
    (here only there: between passes is `poll`'s own test), they disagree with the traced run: the twin is withdrawn,
    and the guard and the search run again on the original."""
    from minrepro.reduction.phases import establish as establish_phase

    script = tmp_path / "job.py"
    script.write_text(
        "import time\nif __file__.endswith('scale.py'):\n    raise KeyError('traced')\ntime.sleep(4)\n"
        "raise RuntimeError('plain')\n"
    )
    contexts: list = []
    _fake_twin(monkeypatch, "raise KeyError('traced')\n", contexts, memo=True)
    taken = []
    real = establish_phase.ConfirmingBeside.take

    def take(self):
        taken.append(True)
        return real(self)

    monkeypatch.setattr(establish_phase.ConfirmingBeside, "take", take)
    monkeypatch.setattr(establish_phase.ConfirmingBeside, "poll", lambda self: None)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--guard", "none", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert taken == [True]  # the guard left them to the search on the twin
    assert summary["signature"] == "RuntimeError: plain"
    assert any("the search on the tiny twin was withdrawn" in note for note in summary["notes"])
    assert [p["phase"] for p in summary["phases"]].count("search") == 2
    assert contexts[0].done.scaled is None and contexts[0].done.standing.traced is None
    assert "KeyError" not in Path(summary["output"]).read_text()
    # the same command again (what an interrupted reduction is told to run): the withdrawn twin stays withdrawn
    assert not (contexts[0].done.established.scale_dir / "twin.json").exists()
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert again["signature"] == "RuntimeError: plain" and "KeyError" not in Path(again["output"]).read_text()


def test_a_traced_first_run_that_alone_fails_otherwise_leaves_the_reduction_on_a_plain_run(tmp_path, capsys):
    """The trace runs a normalized copy (`scale.py`): where that run alone fails otherwise, the reduction keeps the
    plain runs' signature and says why no twin stands in."""
    script = tmp_path / "job.py"
    script.write_text(
        "import json\nif __file__.endswith('scale.py'):\n    raise KeyError('traced')\nraise RuntimeError('plain')\n"
    )
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "cold", "--guard", "none", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["signature"] == "RuntimeError: plain"
    assert any("the traced run failed otherwise" in note for note in summary["notes"])


def test_screening_runs_where_the_script_fails_only_and_judging_then_runs_only_where_it_is_fixed(tmp_path):
    """`screen_many` answers from the bad runs alone; a screened candidate asked of `test_many` later runs only in
    the good env (a sweep pays one good run for the edits it merges)."""
    sources = [f"c = {i}\n" for i in range(3)]
    bad = _Counting({sources[0]: SIG, sources[1]: None, sources[2]: SIG})
    good = _Counting({s: None for s in sources})
    oracle = SignatureOracle(Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10, executor=bad, original=SIG, good=[good])
    assert oracle.screen_many(sources) == [True, False, True] and good.ran == []
    assert oracle.test_many([sources[2]]) == [True]
    assert sorted(bad.ran) == sorted(sources) and set(good.ran) == {sources[2]}


def test_an_oracle_answering_ahead_says_yes_at_once_and_its_good_runs_overlap_the_next_bad_runs(tmp_path):
    """With `AnsweringAhead`, a candidate that fails the same way where the script fails is answered yes at once; its runs
    where the bug is fixed go on while the next candidates run where it fails, and are settled by a later call."""
    import threading

    sources = [f"c = {i}\n" for i in range(3)]
    release = threading.Event()

    class Slow(_Counting):
        def run_many(self, scripts, timeout, home=None):
            assert release.wait(5)  # held until the next batch's bad runs have gone
            return super().run_many(scripts, timeout, home)

    class Releasing(_Counting):
        def run_many(self, scripts, timeout, home=None):
            runs = super().run_many(scripts, timeout, home)
            if len(self.ran) > 1:  # the second candidate's bad run
                release.set()
            return runs

    bad = Releasing({s: SIG for s in sources})
    good = Slow({s: None for s in sources})
    oracle = SignatureOracle(Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10, executor=bad, original=SIG, good=[good])
    ahead = AnsweringAhead(oracle)
    yes = Answers((Verdict.INTERESTING,))
    assert ahead.judge(sources[:1]) == yes and good.ran == []  # yes before its good run ended
    assert ahead.judge(sources[1:2]) == yes  # the first still going there: not waited for
    assert ahead.settle() == ()
    assert oracle.cache.answers[oracle.cache.hash(sources[0])] is True
    assert good.ran == [sources[0]] * 2 + [sources[1]] * 2  # two good runs each (`good_runs`)
    ahead.close()


def _answering_ahead(tmp_path: Path, sources: list[str], good) -> AnsweringAhead:
    """An oracle answering ahead where every source fails the same way where the script fails; `good` judges them
    where the bug is fixed."""
    bad = _Counting({s: SIG for s in sources})
    return AnsweringAhead(
        SignatureOracle(Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10, executor=bad, original=SIG, good=[good])
    )


def test_an_oracle_answering_ahead_waits_for_the_oldest_yes_only_past_max_ahead(tmp_path):
    """Yeses one after another (a pass that takes one candidate at a time) each answer at once while fewer than
    MAX_AHEAD runs where the bug is fixed go on; the next waits for the oldest."""
    import threading

    from minrepro.harness.oracle import MAX_AHEAD

    sources = [f"c = {i}\n" for i in range(MAX_AHEAD + 1)]
    release = threading.Event()

    class Held(_Counting):
        def run_many(self, scripts, timeout, home=None):
            assert release.wait(5)
            return super().run_many(scripts, timeout, home)

    good = Held({s: None for s in sources})
    ahead = _answering_ahead(tmp_path, sources, good)
    yes = Answers((Verdict.INTERESTING,))
    assert [ahead.judge([s]) for s in sources[:MAX_AHEAD]] == [yes] * MAX_AHEAD and good.ran == []
    threading.Timer(0.3, release.set).start()
    assert ahead.judge(sources[MAX_AHEAD:]) == yes and release.is_set()  # waited for the oldest
    assert ahead.settle() == () and len(good.ran) == 2 * len(sources)
    ahead.close()


def test_every_yes_refused_where_the_bug_is_fixed_comes_back_as_a_retraction(tmp_path):
    """Yeses still going where the bug is fixed are settled oldest first, and each refused there is taken back: a yes
    the search never took (a ddmin pass asked ahead) goes back as nothing, and the refused yes after it still goes."""
    sources = [f"c = {i}\n" for i in range(3)]
    good = _Counting({sources[0]: SIG, sources[1]: None, sources[2]: SIG})
    ahead = _answering_ahead(tmp_path, sources, good)
    answered = [ahead.judge([source]) for source in sources]  # each may bring the refusals settled by then
    retracted = [r.source for answers in answered for r in answers.retracted] + [r.source for r in ahead.settle()]
    assert retracted == [sources[0], sources[2]] and ahead.retractions == 2
    assert ahead.settle() == ()
    ahead.close()


def _fails_where_it_fails(text: str) -> bool:
    return "raise RuntimeError(x)" in text and "x = 1" in text


def _passes_where_fixed(text: str) -> bool:  # there the script needs `y = 2` (it fails otherwise without it)
    return "y = 2" in text


class _ByText:
    """An env that runs a candidate by reading it: where the script fails, or where the bug is fixed (`good`)."""

    name = "by-text"

    def __init__(self, good: bool):
        self.good = good

    def run_many(self, scripts, timeout, home=None):
        runs = []
        for script in scripts:
            text = Path(script).read_text()
            other = Signature("exception", "NameError", "y", (), (), "script")
            sig = (
                (None if _passes_where_fixed(text) else other)
                if self.good
                else (SIG if _fails_where_it_fails(text) else None)
            )
            runs.append(RunResult(1 if sig else 0, "", "", 0.1, sig, ""))
        return runs


@pytest.mark.parametrize("mode", ["deferring", "optimistic"])
def test_a_search_over_an_oracle_that_defers_or_answers_ahead_decides_as_over_a_plain_judge(tmp_path, mode):
    """Deferred good runs (only the first interesting candidate of a batch runs where the bug is fixed) and yes
    answered ahead of them (`optimistic`: a candidate refused there after it was taken goes back, with what was built
    on it) change when the runs happen, never what the search decides: the result is the one a plain judge gives."""
    from minrepro.reducers import FINAL_PASSES, PASSES, SearchSettings, reduce_source

    source = "import os\nimport sys\nx = 1\ny = 2\nz = 3\nraise RuntimeError(x)\n"
    plain = reduce_source(
        source, lambda batch: [_fails_where_it_fails(s) and _passes_where_fixed(s) for s in batch], PASSES, FINAL_PASSES
    )
    oracle = SignatureOracle(
        Cache(tmp_path / "c.jsonl", "k"), tmp_path, 10, executor=_ByText(False), original=SIG, good=[_ByText(True)]
    )
    asked = AnsweringAhead(oracle) if mode == "optimistic" else oracle
    result = reduce_source(source, asked, PASSES, FINAL_PASSES, SearchSettings(jobs=2))
    assert result == plain == "x = 1\ny = 2\nraise RuntimeError(x)\n"
    if mode == "optimistic":
        asked.close()
        assert asked.retractions >= 1  # a candidate without `y = 2` was taken, then taken back


def test_a_retracted_program_goes_back_with_everything_accepted_after_it():
    from minrepro.reducers import Problem

    problem = Problem("a = 1\nb = 2\nc = 3\n", lambda s: [True] * len(s))
    problem.accept("a = 1\nb = 2\n")
    problem.accept("a = 1\n")
    assert problem.retract("a = 1\nb = 2\n") and problem.current == "a = 1\nb = 2\nc = 3\n"
    assert problem.lines == 3 and not problem.retract("b = 2\n")  # never accepted: nothing to take back
    assert not problem.admissible("a = 1\n")  # taken back programs are not proposed again


@pytest.mark.parametrize("case", ["fix passes", "fix fails", "no family", "twin lost"])
def test_the_fixs_warm_pool_starts_beside_the_guards_judgement_and_the_search_takes_it(
    tmp_path, capsys, monkeypatch, case
):
    """The catalog's fix of this failure is the guard's first env: its warm pool starts, and gets its reuse check on
    the twin, while the guard's cold runs judge it. The search takes that pool as it is. Where the guard chooses
    otherwise, or the twin fails where the fix is (the search then stands on the original, which that check never
    ran), it is closed unused. Where no family matches, no pool starts before the guard has chosen."""
    fix_passes = {"fix passes": True, "fix fails": False, "no family": None, "twin lost": True}[case]
    from minrepro.reduction import guard as guards
    from minrepro.reduction import workers
    from minrepro.reduction.guard import Guard
    from minrepro.reduction.phases import guard as guard_phase

    fixed = tmp_path / ("fixed" if fix_passes else "other") / "bin" / "python"
    fixed.parent.mkdir(parents=True)
    fixed.symlink_to(sys.executable)
    family = [(str(fixed), Guard("good-env", "passes with the family's patches", (str(fixed),)))]
    family = family if fix_passes is not None else []
    monkeypatch.setattr(guards, "patched_family_envs", lambda search: family)
    monkeypatch.setattr(guards, "GOOD_ENV_CANDIDATES", [lambda search: family])
    monkeypatch.setattr(guards, "SEARCH_ORDER", [guards.patched_family, guards.necessity_control])
    script = tmp_path / "job.py"
    text = "import sys\nif 'fixed' not in sys.executable:\n    raise RuntimeError('boom')\n"
    script.write_text(text)
    contexts, started, checked, closed, seen, early = [], [], [], [], {}, {}
    _fake_twin(monkeypatch, text if case != "twin lost" else "raise RuntimeError('boom')\n", contexts, early)
    real_start, real_check, real_choose = workers.start_executor, workers.reuse_agrees, guard_phase.choose_on_twin

    def start(opts, source, spec, *args, **kwargs):
        executor = real_start(opts, source, spec, *args, **kwargs)
        if spec.python == str(fixed):
            started.append(executor)
            real_close = executor.close
            executor.close = lambda: (closed.append(executor), real_close())
        return executor

    def check(executor, subject, *args, **kwargs):
        if executor.python == str(fixed):
            checked.append(subject.script.name)
        return real_check(executor, subject, *args, **kwargs)

    def choose(search, opts, original):
        seen["the fix's pool started before the judgement"] = contexts[0].workers.fix_pool is not None
        return real_choose(search, opts, original)

    monkeypatch.setattr(workers, "start_executor", start)
    monkeypatch.setattr(workers, "reuse_agrees", check)
    monkeypatch.setattr(guard_phase, "choose_on_twin", choose)
    argv = ["reduce", str(script), "--workdir", str(tmp_path / "w"), "--executor", "warm-pool", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    searched_with = contexts[0].done.opened.oracle
    assert seen == {"the fix's pool started before the judgement": fix_passes is not None}
    assert early == {
        "the bad env's executor started while the twin was judged": True,
        "the fix's executor started while the twin was judged": fix_passes is not None,
    }
    if case == "twin lost":  # the guard chosen on the original: its pool is the search's own, checked on it
        assert summary["guard_why"] == "passes with the family's patches" and summary["passes_in_good_env"]
        assert len(started) == 2 and checked == ["twin.py", "job.py"]
        assert searched_with.good[0].ready is started[1]
        assert "the fix's warm pool, started beside the guard's judgement, closed unused" in summary["notes"]
        assert sorted(map(id, closed)) == sorted(map(id, started))
        return
    assert len(started) == (fix_passes is not None)  # the search did not start another
    if fix_passes:
        assert summary["guard_why"] == "passes with the family's patches" and summary["passes_in_good_env"]
        assert checked == ["twin.py"]  # checked once, on the twin, beside the judgement
        assert searched_with.good[0].ready is started[0]  # the search's good env runs in it
        assert "the fix's warm pool started and was checked beside the guard's judgement" in summary["notes"]
    elif fix_passes is False:
        assert summary["guard"] != "good-env"
        assert "the fix's warm pool, started beside the guard's judgement, closed unused" in summary["notes"]
    else:
        assert not any("the fix's warm pool" in note for note in summary["notes"])
    assert closed == started  # closed once: by the search's end, or unused once its start and check ended


def test_no_pool_starts_beside_the_guard_for_a_subject_at_real_scale(monkeypatch):
    """Without a twin the guard judges the original at its real size: a pool's runs beside the guard's would share
    the GPU's memory with them, so the fix's pool waits for the guard's choice."""
    from minrepro.reduction.phases import guard as guard_phase

    monkeypatch.setattr(guard_phase, "family_fix_env", lambda search, pythons, mode: "fix/bin/python")
    opts = SimpleNamespace(good_pythons=[], guard="auto", executor="auto")
    started = []
    ctx = SimpleNamespace(opts=opts, workers=SimpleNamespace(start_fix_pool=lambda *a: started.append(a)))
    guard_phase.start_fix_pool(ctx, None, None, SimpleNamespace(script=Path("job.py")), 1)
    assert started == []


def test_the_fixs_pool_has_as_many_workers_as_one_candidates_good_runs(monkeypatch):
    """Where the bug is fixed a pool runs one candidate's good runs at a time: the fix's pool, started beside the
    guard for a twin, gets that many workers (or fewer where the search runs fewer at once), not the search's."""
    from minrepro.reduction.phases import guard as guard_phase
    from minrepro.reduction.workers import good_env_jobs

    monkeypatch.setattr(guard_phase, "family_fix_env", lambda search, pythons, mode: "fix/bin/python")
    opts = SimpleNamespace(good_pythons=[], guard="auto", executor="auto", timeout=None, good_runs=None)
    started = []
    ctx = SimpleNamespace(
        opts=opts, home=Path("."), workers=SimpleNamespace(start_fix_pool=lambda *a: started.append(a))
    )
    est = SimpleNamespace(timeout=30.0, first_run=SimpleNamespace(modules=("torch",)))
    guard_phase.start_fix_pool(ctx, est, object(), SimpleNamespace(script=Path("twin.py")), 8)
    assert [spec.jobs for spec, _ in started] == [2]
    assert (good_env_jobs(8, None), good_env_jobs(8, 3), good_env_jobs(1, None)) == (2, 3, 1)


def test_the_search_takes_the_confirming_runs_between_passes_once_they_have_ended(monkeypatch):
    """`ConfirmingBeside.poll` never waits: while the runs go it takes nothing; once they have ended it takes them,
    once, and a disagreement withdraws the twin there."""
    import threading
    import time

    from minrepro.reduction import background as background_module
    from minrepro.reduction.phases import establish as establish_phase
    from minrepro.reduction.results import TwinWithdrawn

    taken = []

    def confirmed(ctx, est, on_twin=False, spent=False):
        taken.append(ctx.background.take(establish_phase.CONFIRMING))
        return SimpleNamespace(trace_disagreed=est == "disagrees")

    monkeypatch.setattr(establish_phase, "confirmed", confirmed)
    for est in ("agrees", "disagrees"):
        release = threading.Event()
        with background_module.Background() as background:
            background.start(establish_phase.CONFIRMING, lambda event=release: event.wait(10) and "runs")
            beside = establish_phase.ConfirmingBeside(SimpleNamespace(background=background), est)
            beside.poll()
            assert beside.taken is None and taken == []
            release.set()
            while background.running(establish_phase.CONFIRMING):
                time.sleep(0.01)
            if est == "disagrees":
                with pytest.raises(TwinWithdrawn):
                    beside.poll()
            else:
                beside.poll()
                beside.poll()
                assert beside.take() is beside.taken and taken == ["runs"]
        taken.clear()
