"""The search's executors: started while the twin is judged, else beside the guard (a warm worker imports the
libraries first), checked on what the search stands on, handed to the search, and closed once when the reduction
ends. `Workers` is their one owner (a context manager held by the driver); the functions below start and check one
executor."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import MinreproError
from ..harness.executors import ColdExecutor, Executor, ExecutorOptions, make_executor
from ..harness.resources import cores
from ..harness.runner import RunResult
from ..harness.signature import Signature
from ..reducers.source import module_imports, patches_imports
from .background import Background
from .options import CONFIRM_RUNS, GOOD_RUNS, ReduceOptions

# a subject whose run takes longer than this: its workers are not reused (a check would cost two such rounds, and a
# worker's imports are then a small share of each candidate's cost)
REUSE_CHECK_SECONDS = 20.0


@dataclass(frozen=True)
class Spec:
    """An executor to start: its env, the bad env's modules (one the env lacks is skipped by the server), `jobs`
    runs at once, `spares` warm-pool workers kept warming beyond them, and whether the env sees a GPU (None: not
    known)."""

    python: str
    modules: tuple[str, ...]
    jobs: int
    spares: int = 0
    cuda: bool | None = None


def good_env_jobs(jobs: int, good_runs: int | None) -> int:
    """Workers of a pool where the bug is fixed: it runs one candidate's good runs at a time (`SignatureOracle.confirm`,
    one yes at a time), so more workers than those runs only add imports and checks beside the twin's runs."""
    return max(1, min(jobs, max(GOOD_RUNS, good_runs or 0)))


@dataclass(frozen=True)
class Subject:
    """What a started executor is checked on: a script (the twin, or the original), its timeout, its home (the
    directory it imports from first; None: the script's own)."""

    script: Path
    timeout: float
    home: Path | None = None


@dataclass(frozen=True)
class ReuseCheck:
    """How `reuse_agrees` checks a pool: `where` (the env, for the notes), a round in fresh workers first, and the
    subject's run time where it is known already (`seconds`)."""

    where: str = ""
    fresh_first: bool = False
    seconds: float = 0.0


@dataclass(frozen=True)
class EarlyStart:
    """An executor started before its subject was known (while the twin is judged): its spec, its start, and what the
    start said (for the summary where it is taken)."""

    spec: Spec
    started: Future
    notes: list[str]


@dataclass
class FixPool:
    """The warm pool of the catalog's fix for this failure (the guard's first env), started while the guard's cold
    runs judge it, and its reuse check made on `subject`: the search takes it where the guard chooses that env."""

    python: str
    subject: Path
    started: Future  # of the executor, checked
    notes: list[str]  # what the start and the check said, for the summary where the search takes it


class Workers(contextlib.AbstractContextManager):
    """Every executor a reduction starts: the bad env's (warmed, then measured on the subject), one per --good-python,
    and the fix's pool started beside the guard's judgement. Closed once each on exit, whoever took them."""

    def __init__(self, opts: ReduceOptions, source: str, notes: list[str], background: Background) -> None:
        self.opts, self.notes, self.background = opts, notes, background
        self.script = ScriptImports.of(source, opts.home)
        self.started: list[Future] = []  # the bad env's executor first, then one per --good-python
        self.warming: Future | None = None  # the bad env's executor, measured on the twin beside the guard
        self.fix_pool: FixPool | None = None
        self.taken: list[Executor] = []  # handed to the search
        self.early: Spec | None = None  # the spec the executors were started with before their subject was known
        self.early_fix: EarlyStart | None = None  # the fix's executor, likewise
        self.readying: list[Future] = []  # the good envs' executors, made ready beside the search's start

    def prestart(self, spec: Spec, fix: Spec | None = None) -> None:
        """The executors `start` and `start_fix_pool` would start (`spec`, and the fix's `fix`), started before their
        subject is known, while the twin is judged: a warm worker's imports then go beside the twin's runs. Kept
        where the later spec is the same, closed unused otherwise."""
        self.start(spec)
        self.early = spec
        if fix is not None and self.opts.executor != "cold":
            where = f"guard env {fix.python}: "
            notes: list[str] = []
            started = self.background.submit(start_executor, self.opts, self.script, fix, notes, where)
            self.early_fix = EarlyStart(fix, started, notes)

    def start(
        self,
        spec: Spec,
        measure_on: tuple[Signature, Subject] | None = None,
        log: Callable[[str], None] = lambda _: None,
    ) -> None:
        """The search's executors, started in the background: the bad env's (`spec`), its warm workers kept one batch
        ahead where the cores allow, and one per --good-python (those `prestart` started for the same spec are kept).
        With `measure_on` (the original's signature, the twin), the bad env's is then measured on the twin: its warm
        runs need no guard, so they go beside the guard's runs."""
        if spec != self.early:  # none started early, or for a twin the search does not stand on
            self._launch(spec)
            if self.early_fix is not None:
                self._close_later(self.early_fix.started)
                self.early_fix = None
        self.early = None
        if measure_on is not None:
            original, twin = measure_on
            started = self.started[0]
            self.warming = self.background.submit(
                lambda: warm_executor(started.result(), original, twin, self.notes, log)
            )

    def _launch(self, spec: Spec) -> None:
        for future in self.started:  # started early for another size: closed once their start ends
            self._close_later(future)
        opts, jobs = self.opts, spec.jobs
        bad = replace(spec, spares=min(jobs, max(0, cores() - jobs)))
        self.started = [self.background.submit(start_executor, opts, self.script, bad, self.notes)]
        self.started += [
            self.background.submit(
                start_executor,
                opts,
                self.script,
                Spec(py, spec.modules, good_env_jobs(jobs, opts.good_runs)),
                self.notes,
                f"guard env {py}: ",
            )
            for py in opts.good_pythons
        ]

    def _close_later(self, started: Future) -> None:
        """An executor not wanted: closed in the background once its start ends (the reduction's end waits)."""
        self.background.start("closing an executor", _close_started, started, awaited=True)

    def restart(self, *args, **kwargs) -> None:
        """The executors started for the twin closed (once the twin's warm runs are done with the bad env's), and
        started again (`start`'s arguments) for the original."""
        if self.warming is not None:
            with contextlib.suppress(Exception):
                self.warming.result()
        for future in self.started:
            with contextlib.suppress(Exception):
                future.result().close()
        self.started, self.warming = [], None
        self.drop_fix_pool()  # sized and checked for the twin
        self.start(*args, **kwargs)

    def start_fix_pool(self, spec: Spec, subject: Subject) -> None:
        """The fix's warm pool (`spec`), started and given its reuse check on `subject` (the twin) while the guard's
        cold runs judge that env."""
        early, self.early_fix = self.early_fix, None
        if early is not None and early.spec != spec:  # started early for another size
            self._close_later(early.started)
            early = None
        notes: list[str] = early.notes if early is not None else []
        where = f"guard env {spec.python}: "

        def start() -> Executor:
            executor = early.started.result() if early else start_executor(self.opts, self.script, spec, notes, where)
            try:
                return reuse_agrees(executor, subject, None, notes, ReuseCheck(where, fresh_first=True))[0]
            except BaseException:
                executor.close()
                raise

        self.fix_pool = FixPool(spec.python, subject.script, self.background.submit(start), notes)

    def _fix_pool_for(self, pythons: tuple[str, ...], subject: Path) -> FixPool | None:
        """The fix's pool, where the guard chose its env for this same subject. Otherwise (another env, or the twin
        dropped since) it is closed once its start ends."""
        pool = self.fix_pool
        if pool is not None and (pool.python not in pythons or pool.subject != subject):
            self.notes.append("the fix's warm pool, started beside the guard's judgement, closed unused")
            self.drop_fix_pool()
            return None
        return pool  # kept in `fix_pool` all the same: the reduction's end closes it once

    def drop_fix_pool(self) -> None:
        """The fix's pool, not wanted: closed in the background once its start ends (the reduction's end waits)."""
        if self.fix_pool is not None:
            self._close_later(self.fix_pool.started)
            self.fix_pool = None

    def good(
        self, pythons: tuple[str, ...], subject: Path, modules: tuple[str, ...], jobs: int, check: tuple[float, Path]
    ) -> list[Future]:
        """One executor per good env of the guard, each made ready in the background (a future of it: the search
        starts beside it, and its first run where the bug is fixed waits for it): the fix's pool started and checked
        beside the guard, a --good-python's started with the bad env's, or a new one; a reusing pool is checked on
        `subject` (`check`: timeout, home), beside the bad env's measurement."""
        fix = self._fix_pool_for(pythons, subject)
        early = dict(zip(self.opts.good_pythons, self.started[1:], strict=False))
        timeout, home = check

        def ready(py: str) -> Executor:
            where = f"guard env {py}: "
            taken = fix.started if fix is not None and fix.python == py else None
            if taken is not None and taken.exception() is None:  # checked on this subject beside the guard already
                self.notes.extend(
                    [*fix.notes, "the fix's warm pool started and was checked beside the guard's judgement"]
                )
                self.taken.append(taken.result())
                return taken.result()
            if py in early:  # a --good-python's, started with the bad env's; else a new one (the fix's start broke too)
                executor = early[py].result()
            else:
                spec = Spec(py, modules, good_env_jobs(jobs, self.opts.good_runs))
                executor = start_executor(self.opts, self.script, spec, self.notes, where)
            self.taken.append(executor)
            check = ReuseCheck(where, fresh_first=True)
            return reuse_agrees(executor, Subject(subject, timeout, home), None, self.notes, check)[0]

        self.readying = [self.background.submit(ready, py) for py in pythons]
        return self.readying

    def bad(self, original: Signature, subject: Subject, twin: bool, log: Callable[[str], None]):
        """The bad env's executor and the subject's run time under it (None: cold runs, not measured): measured on the
        twin beside the guard where the search stands on it, else now on `subject`."""
        if self.warming is not None and twin:
            executor, baseline = self.warming.result()
        else:  # no twin, or the guard refused it: measured on the original (one the twin disagreed with is cold)
            executor = self.warming.result()[0] if self.warming is not None else self.started[0].result()
            executor, baseline = warm_executor(executor, original, subject, self.notes, log)
        self.taken.append(executor)
        return executor, baseline

    def withdraw(self) -> None:
        """Every executor closed, those handed to a search included: the search stood on a twin that is withdrawn, and
        the next `start` begins afresh for the original."""
        if self.warming is not None:
            with contextlib.suppress(Exception):
                self.warming.result()
        self._close_all()
        self.started, self.warming, self.fix_pool, self.taken = [], None, None, []
        self.early, self.early_fix, self.readying = None, None, []

    def __exit__(self, *exc: object) -> None:
        self._close_all()

    def _close_all(self) -> None:
        early = [self.fix_pool.started] if self.fix_pool else []  # taken by the search, or not yet judged
        early += [self.early_fix.started] if self.early_fix else []  # started before its subject, never checked
        used = list(self.taken)
        for future in [*self.started, *early, *self.readying]:  # started, and maybe never taken: closed here, once each
            with contextlib.suppress(Exception):
                used.append(future.result())
        for executor in {id(e): e for e in used}.values():
            executor.close()


class ReadyLater:
    """A good env's executor that `Workers.good` is still making ready (its pool's imports, its reuse check): the
    search holds it from its start, and its first use (a run where the bug is fixed) waits for it."""

    def __init__(self, future: Future) -> None:
        self._future = future

    @property
    def ready(self) -> Executor:
        """The executor, once ready (waiting for it)."""
        return self._future.result()

    def __getattr__(self, name: str):
        return getattr(self.ready, name)


def _close_started(started: Future) -> None:
    with contextlib.suppress(Exception):  # a start that broke closed what it had started
        started.result().close()


@dataclass(frozen=True)
class ScriptImports:
    """What the executors read from the script: its imports, and the first statement that patches what outlives a run
    ("" where none: `patches_imports`). Read once, in the reduction's own thread (`of`): the executors start in
    background threads, and CPython 3.11 can fail an AST built in one thread while another builds one ("AST
    constructor recursion depth mismatch")."""

    modules: tuple[str, ...]
    patch: str

    @classmethod
    def of(cls, source: str, home: Path | None) -> ScriptImports:
        return cls(tuple(module_imports(source)), patches_imports(source, home))


def start_executor(
    opts: ReduceOptions, script: ScriptImports, spec: Spec, notes: list[str], where: str = ""
) -> Executor:
    """The requested executor (`spec`), started (a fork server imports the libraries first), or cold runs where it
    cannot start."""
    python, jobs = spec.python, spec.jobs
    if opts.executor == "cold":
        return ColdExecutor(python, jobs)
    # a warm worker runs the next candidate where the last left it as fresh, unless the script patches a library
    patch = script.patch if opts.reuse_workers and opts.executor in ("auto", "warm-pool") else ""
    reuse = opts.reuse_workers and not patch
    try:
        options = ExecutorOptions(spec.modules, spec.spares, reuse, spec.cuda)
        executor = make_executor(opts.executor, python, list(script.modules), jobs, options)
    except MinreproError as exc:
        notes.append(f"{where}{opts.executor} unavailable ({exc}); cold runs used" + (" there" if where else ""))
        return ColdExecutor(python, jobs)
    if patch and not where and executor.name == "warm-pool":  # a fork server's children never run twice anyway
        notes.append(f"a warm worker runs one candidate: the script patches what would outlive a run ({patch})")
    return executor


def warm_executor(
    executor: Executor, original: Signature, subject: Subject, notes: list[str], log: Callable[[str], None]
) -> tuple[Executor, float | None]:
    """The started executor and the script's run time under it (as many runs at once as the search makes: the time
    budget follows that), if every run reproduces the original signature (a warm executor that disagrees with
    itself is not trusted either); otherwise cold runs, their time not measured here (None)."""
    if executor.name == "cold":
        return executor, None
    # in workers that have run nothing yet: a reused worker's answer is checked apart (`reuse_agrees`)
    first = getattr(executor, "run_fresh", executor.run_many)
    script = subject.script
    warm = first([script] * max(2, executor.jobs), subject.timeout, subject.home or script.parent)
    if any(run.signature != original for run in warm):
        executor.close()
        seen = answers(warm)
        notes.append(
            f"under {executor.name} the script gives [{seen}] where {CONFIRM_RUNS} cold runs agree on "
            f"'{original.headline}' (it depends on a fresh interpreter: imports done before it, threads, "
            "seeds); cold runs used"
        )
        return ColdExecutor(executor.python, executor.jobs), None
    executor, again = reuse_agrees(
        executor, subject, original, notes, ReuseCheck(seconds=max(run.seconds for run in warm))
    )
    warm += again
    if getattr(executor, "skipped", None):
        notes.append(f"fork server: {', '.join(executor.skipped)} imported by each candidate (it initializes CUDA)")
    if getattr(executor, "chosen_because", ""):
        notes.append(f"warm pool: {executor.chosen_because}")
    log(f"executor: {executor.name} (original runs in {warm[0].seconds:.2f} s there)")
    return executor, max(run.seconds for run in warm)


def answers(runs: list[RunResult]) -> str:
    """What the runs gave, each answer once: their failures' headlines, or "passes"."""
    return "; ".join(sorted({run.signature.headline if run.signature else "passes" for run in runs}))


def reuse_agrees(
    executor: Executor,
    subject: Subject,
    expected: Signature | None,
    notes: list[str],
    check: ReuseCheck = ReuseCheck(),  # frozen: one shared default is safe
) -> tuple[Executor, list[RunResult]]:
    """A reusing warm pool runs `script` once more in each worker its last round kept (with `fresh_first`, after a
    round in workers that have run nothing); where one answers otherwise than `expected` (None: it passes), the pool
    goes on with a worker per candidate. So it does, unchecked, where a run of the subject took over
    REUSE_CHECK_SECONDS (`seconds`, or the fresh round's). The executor to search with, and the runs."""
    if not getattr(executor, "reuse", False):
        return executor, []
    script, timeout, where = subject.script, subject.timeout, check.where
    home = subject.home or script.parent
    runs = executor.run_fresh([script] * executor.jobs, timeout, home) if check.fresh_first else []
    slowest = max([check.seconds, *(run.seconds for run in runs)])
    if slowest > REUSE_CHECK_SECONDS:
        executor.stop_reuse()
        notes.append(f"{where}warm pool: workers run one candidate each (a run took {slowest:.0f} s)")
        return executor, runs
    runs += getattr(executor, "run_reused", executor.run_many)([script] * executor.jobs, timeout, home)
    if all(run.signature == expected for run in runs) and executor.reused:
        return executor, runs
    if executor.reused:  # a worker answered otherwise once reused
        seen = answers(runs)
        notes.append(f"{where}warm pool: workers run one candidate each (in a reused worker the script gives [{seen}])")
    else:  # none was kept: nothing to reuse, and nothing checked
        notes.append(f"{where}warm pool: no worker was kept after a run, so each runs one candidate")
    executor.stop_reuse()
    return executor, runs
