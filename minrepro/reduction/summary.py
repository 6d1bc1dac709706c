"""What a reduce reports: the summary's fields (printed, and as JSON with --json), built from the phases' results."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field

from . import triggers


@dataclass
class ReduceSummary:
    input_lines: int
    output_lines: int
    oracle_calls: int
    cache_hits: int
    seconds: float
    signature: str
    output: str
    executor: str
    resumed: bool
    guard: str = "none"
    guard_why: str = ""
    passes_in_good_env: bool | None = None
    triggers: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    snapshot_runs: int = 0  # candidates served from a prefix snapshot: whether that path was taken at all
    good_runs: int = 0  # runs of each interesting candidate in each good env (see options.default_good_runs)
    jobs: int = 1  # runs side by side in the search
    jobs_why: str = ""  # why that many
    budget_seconds: float | None = None  # the time budget it ran under
    maybe_not_minimal: bool = False  # the search stopped at the budget, not at a fixpoint
    good_run: str = ""  # what the result did where the bug is fixed (the cold verification's good runs)
    phases: list[dict] = field(default_factory=list)  # per phase: seconds, candidates, runs side by side
    passes: list[dict] = field(default_factory=list)  # per pass: turns, seconds, candidates, lines removed
    # (seconds since the start, code lines) at each accepted candidate: how soon the script was how small
    timeline: list[tuple[float, int]] = field(default_factory=list)
    workers: str = ""  # the warm pool's reuse of its workers: runs in a reused worker, why workers retired
    twin: str = ""  # the step of the twin's ladder the search stood on ("" where it stood on the original)
    twin_refused: list[str] = field(default_factory=list)  # the steps refused where the bug is fixed, and why

    def as_json(self) -> dict:
        return asdict(self)


def slots_busy(phase: dict) -> float | None:
    """The share of a phase's run slots (`jobs` for its seconds) that its runs where the script fails kept busy; None
    where it did not record them."""
    if "run_seconds" not in phase or not phase["seconds"]:
        return None
    return phase["run_seconds"] / (max(1, phase["jobs"]) * phase["seconds"])


def _phase_said(phase: dict) -> str:
    said = [f"{phase['candidates']} candidates"] if phase["candidates"] else []
    busy = slots_busy(phase)
    if busy is not None:
        said.append(f"its runs kept {busy:.0%} of {phase['jobs']} slots busy")
    return f"{phase['phase']} {phase['seconds']:.0f} s" + (f" ({', '.join(said)})" if said else "")


def print_summary(summary: ReduceSummary, as_json: bool) -> None:
    print(
        f"{summary.input_lines} -> {summary.output_lines} code lines, {summary.oracle_calls} oracle calls "
        f"({summary.cache_hits} cache hits), {summary.seconds:.1f} s, executor {summary.executor}, "
        f"{summary.jobs} at once"
        + (f", {summary.snapshot_runs} from prefix snapshots" if summary.executor == "forkserver" else "")
        + (" (resumed)" if summary.resumed else "")
    )
    print(f"signature: {summary.signature}")
    print(
        f"guard: {summary.guard_why or summary.guard}"
        + (
            f" ({summary.good_runs} good-env run{'s' if summary.good_runs > 1 else ''} per candidate)"
            if summary.good_runs
            else ""
        )
        + (
            ""
            if summary.passes_in_good_env is None
            else f"; the result passes in the good env: {'yes' if summary.passes_in_good_env else 'NO'}"
            + (f" ({summary.good_run})" if summary.good_run else "")
        )
    )
    if summary.phases:
        print("phases: " + ", ".join(_phase_said(p) for p in summary.phases))
    if summary.executor == "warm-pool" and summary.workers:
        print(f"warm pool: {summary.workers}")
    if summary.twin or summary.twin_refused:
        print(f"twin: {summary.twin or 'none: reduced at real scale'}")
        for refused in summary.twin_refused:
            print(f"  refused: {refused}")
    if summary.maybe_not_minimal:
        print(f"stopped at the time budget ({summary.budget_seconds:g} s): verified, maybe not minimal")
    if summary.triggers:
        print("trigger report:")
        print(triggers.format_table([triggers.Trigger(**t) for t in summary.triggers]))
    print(f"written to {summary.output}")
    for note in summary.notes:
        print(f"note: {note}")
    if as_json:
        print(json.dumps(summary.as_json()))
    sys.stdout.flush()
