"""What the phases hand each other. Each phase is a function `(Context, Results) -> its own result`: the `Context`
holds what the whole reduction was given (the options, the script, the budget, the background work's owner), and
`Results` the frozen result of each phase run so far. A phase reads the results before it and returns a new value;
it never changes an earlier one.

The one thing that changes as phases run is `Context.best`, the program the output would hold if the reduction stopped
now (an interrupted reduction writes it), and `Context.notes`, what the summary says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..harness.executors import Executor
from ..harness.runner import RunResult
from ..harness.signature import Signature
from ..reducers import PassRecord
from .background import Background
from .budget import Budget
from .guard import UNDECIDED, Guard
from .options import ReduceOptions
from .progress import Progress
from .scale import Refusal, ScaleDown
from .triggers import Trigger
from .workers import Workers


@dataclass
class Context:
    """What the whole reduction was given, and the owners of its background work (closed when it ends)."""

    opts: ReduceOptions
    log: Callable[[str], None]
    say: Callable[[str], None]
    script: Path
    source: str
    out: Path
    home: Path
    python: str
    budget: Budget
    progress: Progress
    background: Background
    workers: Workers
    notes: list[str] = field(default_factory=list)
    best: str = ""  # the program the output holds if the reduction stops now
    done: Results | None = None  # the phases' results so far: what an interrupted reduction writes from
    phases: list[dict] = field(default_factory=list)  # per phase run: seconds, candidates, runs side by side

    def note(self, text: str, *, said: bool = True) -> None:
        """A line of the summary's notes; said on the progress too, unless `said` is False."""
        self.notes.append(text)
        if said:
            self.say(text)


@dataclass(frozen=True)
class Established:
    """The original's failure, as its cold runs agree on it (phase `establish`; the confirming runs go on beside the
    scale-down, and the guard takes them, or where they still run beside a standing twin the search does: the result
    is `GuardChoice.established`, or then `Searched.established`)."""

    original: Signature
    first_run: RunResult  # the run the reduction stands on (a failing one)
    cold: tuple[RunResult, ...]  # the original's cold runs so far
    traced: RunResult | None  # the scale-down's traced run (the first), where there was one
    timeout: float  # per run, from the cold runs
    jobs: int  # runs side by side, for runs like the original's
    jobs_why: str
    env: Any  # the bad env's probe (versions, CUDA)
    matcher: Callable[[RunResult], bool]  # the same failure as the original's
    scale_dir: Path | None = None  # the scale-down's work dir (None: no scale-down)
    remembered_twin: ScaleDown | None = None  # a twin found by an earlier run of this same reduction
    trace_disagreed: bool = False  # the traced run alone failed otherwise: no twin stands on it

    @property
    def headline(self) -> str:
        return self.original.headline

    @property
    def owner(self) -> str:
        return str(self.original.owner or "")


@dataclass(frozen=True)
class Twin:
    """Phase `scale-down`: the tiny twin the search stands on (None: none held), and the ladder's refused steps."""

    scaled: ScaleDown | None
    refused: tuple[Refusal, ...] = ()
    jobs: int | None = None  # runs side by side, for runs like the twin's (None: as established)
    jobs_why: str = ""


@dataclass(frozen=True)
class GuardChoice:
    """Phase `guard`: where the bug is fixed, and what the search stands on. `ending` says why the reduction ends on
    the original without a search (the time budget); the original's runs where the bug is fixed then say `good_said`."""

    guard: Guard
    established: Established  # with the confirming runs that went on beside the scale-down (unless `confirming`)
    twin: ScaleDown | None  # the twin the search stands on (None: the original at real scale)
    jobs: int
    jobs_why: str
    good_timeout: float | None = None  # per run where the bug is fixed
    passing_seconds: float = 0.0  # what a passing run where the bug is fixed took
    ending: str = ""
    good_pass: bool | None = None
    good_said: str = ""
    # the original's confirming runs still going where the twin stood: the search takes them (`Searched.established`)
    confirming: bool = False


@dataclass(frozen=True)
class Opened:
    """Phase `search set-up` (or `oracle`): the oracle the search asks, over its executors."""

    oracle: Any  # SignatureOracle, or the user's CommandOracle
    executor: Executor | None  # where the script fails (None: the user's command runs it)
    guard: Guard  # as chosen, or unguarded where its control refused the original
    workdir: Path
    jobs: int
    measured_on: str = ""  # the program the per-candidate budget was measured on
    keep_seeds: bool = False
    headline: str = ""  # the user's oracle, where it decides (no signature)


@dataclass(frozen=True)
class Searched:
    """Phase `search`: the smallest program the oracle still accepted."""

    result: str
    state_path: Path
    resumed: bool
    pass_records: dict[str, PassRecord]
    unjudged: int  # proposals left at the time budget: a smaller script may exist
    established: Established | None = None  # with the confirming runs the guard left going (`GuardChoice.confirming`)
    # seconds the search's runs where the script fails took, together: against its wall time and `jobs`, how busy
    # the slots were (what a batch left idle waiting for its slowest run, or a pass that sends one candidate); None
    # where the oracle does not time them (a --oracle command)
    run_seconds: float | None = None


@dataclass(frozen=True)
class Triggered:
    """Phase `trigger report`: the triggers found, and the result with them made explicit where that still fails."""

    found: tuple[Trigger, ...]
    result: str


@dataclass(frozen=True)
class Verified:
    """Phase `verify`: the result's cold runs, where the script fails and where the bug is fixed."""

    good_pass: bool | None
    good_said: str
    loaded: tuple[str, ...]


@dataclass(frozen=True)
class Results:
    """Each phase's result, in phase order; None where the phase has not run (or does not apply)."""

    established: Established | None = None
    twin: Twin | None = None
    guard: GuardChoice | None = None
    opened: Opened | None = None
    searched: Searched | None = None
    triggers: Triggered | None = None
    verified: Verified | None = None

    @property
    def standing(self) -> Established | None:
        """The original's failure as confirmed so far."""
        if self.searched and self.searched.established:
            return self.searched.established
        return self.guard.established if self.guard else self.established

    @property
    def headline(self) -> str:
        if self.standing:
            return self.standing.headline
        if self.opened and self.opened.headline:
            return self.opened.headline
        return "not established (stopped before the original's runs agreed)"

    @property
    def owner(self) -> str:
        return self.standing.owner if self.standing else ""

    @property
    def chosen(self) -> Guard:
        if self.opened:
            return self.opened.guard
        return self.guard.guard if self.guard else UNDECIDED

    @property
    def jobs(self) -> tuple[int, str]:
        """Runs side by side now, and why."""
        if self.opened:
            return self.opened.jobs, self.guard.jobs_why if self.guard else ""
        if self.guard:
            return self.guard.jobs, self.guard.jobs_why
        if self.twin and self.twin.jobs:
            return self.twin.jobs, self.twin.jobs_why
        if self.established:
            return self.established.jobs, self.established.jobs_why
        return 1, ""

    @property
    def scaled(self) -> ScaleDown | None:
        """The twin the search stands on (or, before the guard, the one the scale-down proposes)."""
        if self.guard:
            return self.guard.twin
        return self.twin.scaled if self.twin else None

    @property
    def refused(self) -> tuple[Refusal, ...]:
        return self.twin.refused if self.twin else ()

    @property
    def ending(self) -> str:
        return self.guard.ending if self.guard else ""

    @property
    def versions(self) -> dict:
        standing = self.standing
        return dict(standing.env.versions) if standing and standing.env is not None else {}

    @property
    def loaded(self) -> tuple[str, ...]:
        if self.verified:
            return self.verified.loaded
        return self.standing.first_run.loaded if self.standing else ()

    @property
    def found(self) -> tuple[Trigger, ...]:
        return self.triggers.found if self.triggers else ()

    @property
    def searching_cut(self) -> bool:
        return bool(self.searched and self.searched.unjudged)

    @property
    def good_pass(self) -> bool | None:
        if self.verified:
            return self.verified.good_pass
        return self.guard.good_pass if self.guard else None

    @property
    def good_said(self) -> str:
        if self.verified:
            return self.verified.good_said
        return self.guard.good_said if self.guard else ""


class TwinWithdrawn(Exception):
    """Raised by a phase after the search began on the twin: the original's confirming runs, taken late, show that its
    traced run alone failed otherwise, so no twin stands on the trace. The reduction goes back to the guard, on the
    original as the plain runs established it (`established`)."""

    def __init__(self, established: Established):
        super().__init__("the traced run alone failed otherwise: the twin is withdrawn")
        self.established = established


@dataclass(frozen=True)
class Phase:
    """One step of the reduction: `run` takes the context and the results so far and returns the value stored in
    `Results.<field>`; `applies` says whether it runs at all; `detail` is its progress line."""

    name: str
    field: str
    run: Callable[[Context, Results], Any]
    detail: Callable[[Results], str] = lambda done: ""
    applies: Callable[[Context, Results], bool] = lambda ctx, done: True
