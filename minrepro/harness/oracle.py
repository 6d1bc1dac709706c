"""Oracles: answer "is this candidate interesting?" for batches of candidate sources, with a disk cache.

`SignatureOracle` runs candidates through an executor and keeps those whose failure signature equals the
original's (or, with a regex, whose final line matches it while type and library frames stay the same). With
guards it is *differential*, as compilers' reducers are: a candidate must also not fail that way in a good
environment (a release or a patched env where the bug is fixed), or, as a necessity control, once its call into
the library on the failing path is neutralised. Symptom equality alone keeps reductions that lost the bug.
`CommandOracle` runs a user's interestingness command, as Shrink Ray does: exit 0 means interesting.
Either way, each distinct candidate runs once: answers are cached by content hash in the work directory.
Each is an `Oracle` of the search's seam (`minrepro.reducers.oracle`: `judge`, `screen`, `settle`); `AnsweringAhead`
wraps a differential one so that a yes where the script fails goes on before its runs where the bug is fixed end.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable, Sequence

from minrepro.harness.executors import Executor
from minrepro.harness.runner import RunResult
from minrepro.harness.signature import Signature
from minrepro.reducers.oracle import Answers, Retraction, Verdict


def _claimed(folder: Path, digest: str, source: str) -> Path:
    """`source` written to a file of its own in `folder`, named by its hash: a second run of the same candidate at
    once (a confirmation where the bug is fixed beside a screening) takes `<hash>-1.py`, so that neither removes the
    other's file while it runs."""
    n = 0
    while True:  # the first name no other run holds
        path = folder / (f"{digest[:16]}-{n}.py" if n else f"{digest[:16]}.py")
        try:
            with path.open("x", encoding="utf-8") as fh:
                fh.write(source)
            return path
        except FileExistsError:
            n += 1


@dataclass
class OracleStats:
    calls: int = 0  # candidates actually run
    cache_hits: int = 0
    seconds: float = 0.0  # wall time spent running candidates


class Cache:
    """Answers by content hash, appended to a JSON-lines file so an interrupted run resumes."""

    def __init__(self, path: Path, key: str):
        self.path, self.key, self.answers, self.notes = path, key, {}, {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue  # a line cut short by an interruption
                self.answers[record["hash"]] = record["interesting"]
                self.notes[record["hash"]] = record.get("note", "")

    def hash(self, source: str) -> str:
        return hashlib.sha256(f"{self.key}\0{source}".encode()).hexdigest()

    def store(self, digest: str, interesting: bool, note: str, seconds: float | None = None) -> None:
        """One answer; `seconds` is what judging it cost (every run it took), so a work directory says where a
        reduction's time went."""
        self.answers[digest], self.notes[digest] = interesting, note
        record = {"hash": digest, "interesting": interesting, "note": note}
        if seconds is not None:
            record["seconds"] = round(seconds, 3)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")


@dataclass
class Answer:
    interesting: bool
    note: str  # "pass", the failure's headline, and why it was refused if it was
    seconds: float = 0.0  # every run judging it took (bad env, good envs, control)

    def refuse(self, why: str) -> None:
        self.interesting, self.note = False, f"{self.note} ({why})"


@dataclass
class _Base:
    cache: Cache
    workdir: Path
    timeout: float
    home: Path | None = None  # the original script's directory: candidates import from it first
    stats: OracleStats = field(default_factory=OracleStats)

    def screen_many(self, sources: list[str]) -> list[bool]:
        """Where an oracle judges in one step, screening is judging (`Problem.screen`)."""
        return self.test_many(sources)

    def judge(self, sources: Sequence[str]) -> Answers:
        return Answers(tuple(Verdict.of(a) for a in self.test_many(list(sources))))

    def screen(self, sources: Sequence[str]) -> Answers:
        return Answers(tuple(Verdict.of(bool(a)) for a in self.screen_many(list(sources))))

    def settle(self) -> tuple[Retraction, ...]:
        """Every answer is settled when given (`AnsweringAhead` gives some ahead)."""
        return ()

    def test_many(self, sources: list[str]) -> list[bool]:
        digests = [self.cache.hash(s) for s in sources]
        todo = {d: s for d, s in zip(digests, sources, strict=False) if d not in self.cache.answers}
        self.stats.cache_hits += len(sources) - len(todo)
        if todo:
            self.stats.calls += len(todo)
            for digest, answer in zip(todo, self._run(todo, self._judge), strict=True):
                self.cache.store(digest, answer.interesting, answer.note, answer.seconds)
        return [self.cache.answers[d] for d in digests]

    def _run(self, todo: dict[str, str], judge: Callable[[list[Path]], list[Answer]]) -> list[Answer]:
        """`judge` over the candidates (hash -> source), each written to a file named by its hash for the run, and
        removed after it; the time it took is counted."""
        folder = self.workdir / "candidates"
        folder.mkdir(parents=True, exist_ok=True)
        paths = [_claimed(folder, digest, source) for digest, source in todo.items()]
        start = time.monotonic()
        try:
            return judge(paths)
        finally:
            self.stats.seconds += time.monotonic() - start
            for path in paths:
                path.unlink(missing_ok=True)

    def outcomes(self, sources: list[str]) -> list[tuple[bool, str]]:
        """(interesting, what the run did: "pass" or the failure's headline) for each source, every one judged."""
        answers = self.test_many(sources)
        while None in answers:  # each call judges at least the first of those left
            left = [s for s, a in zip(sources, answers, strict=True) if a is None]
            settled = iter(self.test_many(left))
            answers = [next(settled) if a is None else a for a in answers]
        return [(a, self.cache.notes.get(self.cache.hash(s), "")) for a, s in zip(answers, sources, strict=False)]

    def _judge(self, paths: list[Path]) -> list[Answer]:
        raise NotImplementedError


def same_failure(original: Signature | None, regex: str | None, result: RunResult) -> bool:
    """Same failure: equal signature, or with a regex the same kind, type, raiser and library frames and a final
    line the regex matches."""
    sig = result.signature
    if sig is None or original is None:
        return False
    if regex is None:
        return sig == original
    same_place = (sig.kind, sig.type, sig.frames, sig.raised_by) == (
        original.kind,
        original.type,
        original.frames,
        original.raised_by,
    )
    return same_place and re.search(regex, result.raw_headline) is not None


Neutralise = Callable[[str, RunResult], "str | None"]  # (candidate source, its failing run) -> control source
RETRACTIONS_OFF = 2  # refusals where the bug is fixed after a yes, before `AnsweringAhead` stops answering ahead
# yeses whose runs where the bug is fixed may go on at once (`AnsweringAhead`): past it, the next waits for the oldest.
# Each runs after the one before, in one thread: a refusal takes back what was built on it, so more only risks more
MAX_AHEAD = 4


@dataclass
class SignatureOracle(_Base):
    executor: Executor | None = None
    original: Signature | None = None
    regex: str | None = None
    max_seconds: float | None = None  # a reduction must not make the repro much slower to run
    good: Sequence[Executor] = ()  # environments where the bug is fixed: the candidate must not fail the same there
    neutralise: Neutralise | None = None  # necessity control: with the library call cut, the failure must vanish
    # runs in each good env that must all pass: a candidate that made the script nondeterministic (a reduction
    # dropped the seed of the data its own check reads) passed where the bug is fixed once in two, and was taken
    good_runs: int = 2
    cwd_writes_allowed: bool = True  # False when the original leaves nothing in its working directory
    # where the bug is fixed the script runs to its end, past where it failed: its own limit, not the time budget
    # (a good run cut at the budget would count as "does not fail the same way")
    good_timeout: float | None = None
    # each judged candidate's run in the bad env, by its cache hash (in memory: what a chosen twin cost, its peak RAM)
    runs: dict[str, RunResult] = field(default_factory=dict)
    # candidates that fail the same way here and have not run where the bug is fixed yet (see `test_many`), by hash
    deferred: dict[str, Answer] = field(default_factory=dict)

    def matches(self, result: RunResult) -> bool:
        return same_failure(self.original, self.regex, result)

    def not_passing(self, good_run: RunResult) -> str:
        """Why a run where the bug is fixed disqualifies a candidate ("" if it passed). The original passes there (the
        guard checked), so a faithful candidate passes too: one that fails *otherwise* there (a twin whose vocabulary
        no longer holds generate's ids: an IndexError) lost what makes the original pass, and proves nothing."""
        if good_run.signature is None:
            return ""
        if self.matches(good_run):
            return "also in a good env: not the bug"
        return f"fails where the bug is fixed ({good_run.signature.headline}), where the original passes"

    def test_many(self, sources: list[str]) -> list[bool | None]:
        """With good environments, a batch's candidates run where the script fails, side by side; then, in the batch's
        order, only the first that fails the same way runs where the bug is fixed (the next one if that refuses it):
        a search takes the first interesting candidate of a batch, so the good runs of the rest would be spent. Those
        after the first interesting one are answered None (not judged yet); their runs here are kept, and asked again,
        they run only where the bug is fixed."""
        if not self.deferring:
            return super().test_many(sources)
        digests, by_digest = self.screened(sources)
        for digest in by_digest:  # in the batch's order, up to the first interesting one
            if self.cache.answers.get(digest):
                break
            if digest in self.deferred and self.confirm(digest, by_digest[digest]):
                break
        return [self.cache.answers.get(d) for d in digests]

    @property
    def deferring(self) -> bool:
        """Whether a candidate's runs here and where the bug is fixed are two steps (`screened`, `confirm`)."""
        return bool(self.good) and self.neutralise is None

    def confirm(self, digest: str, source: str) -> bool:
        """The runs where the bug is fixed of a candidate that failed the same way here (`deferred`), and its
        answer recorded."""
        return self.confirm_answer(digest, source, self.deferred.pop(digest))

    def confirm_answer(self, digest: str, source: str, answer: Answer) -> bool:
        """`confirm` of an answer already taken out of `deferred` (by the caller's thread: a screening beside it
        must not find the candidate in neither place and run it again)."""
        self._run({digest: source}, lambda paths: self._judge_good(paths, [answer]))
        self.cache.store(digest, answer.interesting, answer.note, answer.seconds)
        return answer.interesting

    def screen_many(self, sources: list[str]) -> list[bool]:
        """Whether each candidate fails the same way where the script fails, its runs where the bug is fixed left
        until `test_many` asks (`Problem.screen`). Without good environments this is `test_many`."""
        if not self.deferring:
            return self.test_many(sources)
        digests, _ = self.screened(sources)
        return [self.cache.answers.get(d, d in self.deferred) for d in digests]

    def screened(self, sources: list[str]) -> tuple[list[str], dict[str, str]]:
        """Every candidate not judged yet, run where the script fails: one that fails the same way waits in
        `deferred` for its good runs, one that does not is answered. Their digests, and the candidates by digest."""
        digests = [self.cache.hash(s) for s in sources]
        by_digest = dict(zip(digests, sources, strict=True))
        fresh = {d: s for d, s in by_digest.items() if d not in self.cache.answers and d not in self.deferred}
        self.stats.cache_hits += sum(d in self.cache.answers for d in digests)
        if fresh:
            self.stats.calls += len(fresh)
            for digest, answer in zip(fresh, self._run(fresh, self._judge_bad), strict=True):
                if answer.interesting:
                    self.deferred[digest] = answer
                else:
                    self.cache.store(digest, False, answer.note, answer.seconds)
        return digests, by_digest

    def _judge(self, paths: list[Path]) -> list[Answer]:
        answers = self._judge_bad(paths)
        self._judge_good(paths, answers)
        if self.neutralise is not None:
            self._necessity(paths, [self.runs[path.stem] for path in paths], answers)
        return answers

    def _judge_bad(self, paths: list[Path]) -> list[Answer]:
        """Each candidate where the script fails: the same failure, within the time budget, no litter."""
        results = self.executor.run_many(paths, self.timeout, self.home)
        # a slow run is confirmed before it refuses a candidate: on busy cores the same program's runs can differ
        # several-fold, and one slow run would refuse a candidate that is no slower (the faster of the two counts)
        slow = [
            i
            for i, r in enumerate(results)
            if self.max_seconds is not None and self.matches(r) and r.seconds > self.max_seconds
        ]
        spent = dict.fromkeys(range(len(results)), 0.0)  # the first, slower run's seconds count too
        for i, again in zip(
            slow, self.executor.run_many([paths[i] for i in slow], self.timeout, self.home), strict=False
        ):
            if self.matches(again) and again.seconds < results[i].seconds:
                results[i], spent[i] = again, results[i].seconds
            else:
                spent[i] = again.seconds
        self.runs.update((path.stem, result) for path, result in zip(paths, results, strict=False))
        answers = [self._answer(r) for r in results]
        for i, answer in enumerate(answers):
            answer.seconds += spent[i]
        return answers

    def _judge_good(self, paths: list[Path], answers: list[Answer]) -> None:
        """Where the bug is fixed, each candidate still interesting must pass (`not_passing`)."""
        for guard in self.good:  # only what is still interesting runs there
            # all of a candidate's good runs at once: one accepted candidate's two runs used one core of two, in turn
            alive = [i for i, a in enumerate(answers) if a.interesting for _ in range(self.good_runs)]
            for i, run in zip(
                alive,
                guard.run_many([paths[i] for i in alive], self.good_timeout or self.timeout, self.home),
                strict=False,
            ):
                answers[i].seconds += run.seconds
                if answers[i].interesting and (why := self.not_passing(run)):
                    answers[i].refuse(why)

    def _necessity(self, paths: list[Path], results: list[RunResult], answers: list[Answer]) -> None:
        controls = {}
        for i, answer in enumerate(answers):
            control = self.neutralise(paths[i].read_text(encoding="utf-8"), results[i]) if answer.interesting else None
            if answer.interesting and control is None:
                answer.refuse("no library call to neutralise")
            elif control is not None:
                path = paths[i].with_name(paths[i].stem + ".control.py")
                path.write_text(control, encoding="utf-8")
                controls[i] = path
        for i, run in zip(
            controls, self.executor.run_many(list(controls.values()), self.timeout, self.home), strict=False
        ):
            controls[i].unlink(missing_ok=True)
            answers[i].seconds += run.seconds
            if self.matches(run):
                answers[i].refuse("persists with the library call cut: not the library's")

    def _answer(self, result: RunResult) -> Answer:
        answer = Answer(self.matches(result), result.signature.headline if result.signature else "pass", result.seconds)
        if not answer.interesting:
            return answer
        if self.max_seconds is not None and result.seconds > self.max_seconds:  # say why it was refused
            answer.refuse(f"over the time budget: {result.seconds:.1f} s > {self.max_seconds:.1f} s")
        elif why := self.litters(result):
            answer.refuse(why)
        return answer

    def litters(self, result: RunResult) -> str:
        """Why a run is refused for what it left in its working directory ("" if it is not): the output would
        leave `base/` wherever its user runs it (lowmem_chat_server's did)."""
        if not result.cwd_writes or self.cwd_writes_allowed:
            return ""
        return f"writes {', '.join(result.cwd_writes[:3])} into the working directory; the original does not"


@dataclass
class AnsweringAhead:
    """A differential oracle's yes given once a candidate fails the same way where the script fails: its runs where
    the bug is fixed go on beside the next candidates' runs here, and a refusal there comes back as a `Retraction`
    (with a later answer, or at `settle`). Otherwise every accepted candidate's good runs would wait for its bad
    run, step after step. Up to MAX_AHEAD yeses may be going there at once: a pass that takes one candidate after
    another waits for the oldest only beyond that. Off (judging as the oracle does) after RETRACTIONS_OFF
    retractions."""

    oracle: SignatureOracle
    retractions: int = 0
    _pending: list[tuple[str, str, Future]] = field(default_factory=list, repr=False)  # oldest first
    _background: ThreadPoolExecutor | None = field(default=None, repr=False)

    @property
    def ahead(self) -> bool:
        return self.oracle.deferring and self.retractions < RETRACTIONS_OFF

    def judge(self, sources: Sequence[str]) -> Answers:
        if not self.ahead:
            return Answers(self.oracle.judge(sources).verdicts, self.settle())
        digests, by_digest = self.oracle.screened(list(sources))
        retracted = self._settled()  # the yeses judged where the bug is fixed while these ran here
        known = self.oracle.cache.answers
        # the first that fails the same way here (those before it were answered no here), in the batch's order
        first = next((d for d in by_digest if known.get(d) or d in self.oracle.deferred), None)
        ahead = first is not None and not known.get(first)
        if ahead:  # answered now, judged where the bug is fixed meanwhile
            self._pending.append((first, by_digest[first], self._later(first, by_digest[first])))
        # the rest after it: their answer if known, else LATER (judged if asked again)
        return Answers(tuple(Verdict.of(True if ahead and d == first else known.get(d)) for d in digests), retracted)

    def screen(self, sources: Sequence[str]) -> Answers:
        screened = self.oracle.screen(sources).verdicts  # beside the last yeses' runs where the bug is fixed
        return Answers(screened, self._settled())

    def settle(self) -> tuple[Retraction, ...]:
        """Wait for every yes's runs where the bug is fixed; those refused there, as retractions."""
        return self._settled(keep=0)

    def _settled(self, keep: int = MAX_AHEAD - 1) -> tuple[Retraction, ...]:
        """The yeses whose runs where the bug is fixed have ended, oldest first (waiting for the oldest while more
        than `keep` go on): the retractions of those refused there."""
        retracted = []
        while self._pending and (self._pending[0][2].done() or len(self._pending) > keep):
            digest, source, judging = self._pending.pop(0)
            if not judging.result():  # each refusal counts: a yes the search never took (ddmin asked ahead) too
                self.retractions += 1
                retracted.append(Retraction(source, self.oracle.cache.notes.get(digest, "")))
        return tuple(retracted)

    def _later(self, digest: str, source: str) -> Future:
        if self._background is None:
            self._background = ThreadPoolExecutor(1, thread_name_prefix="minrepro-good-runs")
        return self._background.submit(self.oracle.confirm_answer, digest, source, self.oracle.deferred.pop(digest))

    def close(self) -> None:
        """A run still going where the bug is fixed (an interrupted search) ends when its executor is closed:
        nothing waits for it."""
        if self._background is not None:
            self._background.shutdown(wait=False)
            self._background = None


@dataclass
class CommandOracle(_Base):
    command: Sequence[str] = ()
    jobs: int = 1

    def _judge(self, paths: list[Path]) -> list[Answer]:
        def one(path: Path) -> Answer:
            start = time.monotonic()
            with tempfile.TemporaryDirectory(prefix="minrepro-cwd-") as scratch:
                proc = subprocess.Popen(
                    [*self.command, str(path)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=scratch,
                    start_new_session=True,
                )
                try:
                    code = proc.wait(self.timeout)
                    return Answer(code == 0, f"exit {code}", time.monotonic() - start)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)  # the command and everything it started
                    proc.wait()
                    return Answer(False, "timeout", time.monotonic() - start)

        with ThreadPoolExecutor(max(1, self.jobs)) as pool:
            return list(pool.map(one, paths))
