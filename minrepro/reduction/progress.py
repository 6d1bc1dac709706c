"""Progress a user can read on a long reduction: the phase (establish, guard, scale-down, each pass, trigger
report), candidates judged and accepted, seconds per judged batch, the current size, and an estimate of the current
round's remaining time. On a terminal one line redraws in place (rich); elsewhere (a GPU job's log, CI) one line
per finished phase goes to `say`, so a run stopped by a scheduler shows how far it got."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..reducers import FINAL_PASSES, PASSES
from ..reducers.oracle import Answers, Oracle, Retraction

PASS_COUNT = len(PASSES) + len(FINAL_PASSES)
SETUP_PHASES = {"oracle", "establish", "scale-down", "guard", "trigger report", "verify"}


class Progress:
    def __init__(
        self,
        start_lines: int,
        log: Callable[[str], None],
        live: bool | None = None,
        say: Callable[[str], None] | None = None,
    ):
        self.start, self.lines, self.log, self.say = time.monotonic(), start_lines, log, say or log
        self.tries = self.accepts = self.pass_index = 0
        self.judging = 0.0  # seconds the oracle calls took
        self.phase_tries, self.phase_accepts = 0, 0
        self.pass_name, self.pass_started = "", self.start
        self.pass_seconds: list[float] = []
        self.timeline: list[tuple[float, int]] = []  # (seconds since the start, code lines) at each accepted candidate
        self._live = None
        if live if live is not None else sys.stderr.isatty():
            try:
                from rich.console import Console
                from rich.live import Live
            except ImportError:  # rich is a dependency; a broken install still reduces
                return
            self._live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)
            self._live.start()

    def phase(self, name: str, detail: str = "") -> None:
        now = time.monotonic()
        if self.pass_name:
            self._finished(now - self.pass_started)
        self.pass_name, self.pass_started = name, now
        self.phase_tries = self.phase_accepts = 0
        if name not in SETUP_PHASES:
            self.pass_index = self.pass_index % PASS_COUNT + 1
        self.log(f"pass {name}" + (f": {detail}" if detail else ""))
        if name in SETUP_PHASES and self._live is None:
            self.say(f"[{name}] {detail}" if detail else f"[{name}]")
        self._draw()

    def _finished(self, seconds: float) -> None:
        if self.pass_name not in SETUP_PHASES:
            self.pass_seconds.append(seconds)
        if self._live is None and (self.phase_tries or self.pass_name in SETUP_PHASES):
            self.say(
                f"[{self.pass_name}] done in {seconds:.0f} s: {self.phase_tries} candidates judged, "
                f"{self.phase_accepts} accepted; {self.lines} code lines; {self.per_run()}"
            )

    def per_run(self) -> str:
        return f"{self.judging / self.tries:.1f} s per candidate" if self.tries else "no candidate judged yet"

    def tried(self, n: int, seconds: float = 0.0) -> None:
        self.tries, self.phase_tries = self.tries + n, self.phase_tries + n
        self.judging += seconds
        self._draw()

    def accepted(self, lines: int) -> None:
        self.accepts, self.phase_accepts, self.lines = self.accepts + 1, self.phase_accepts + 1, lines
        self.timeline.append((round(time.monotonic() - self.start, 1), lines))
        self.log(f"  accepted: {lines} code lines")
        self._draw()

    def status(self) -> str:
        elapsed = time.monotonic() - self.start
        recent = self.pass_seconds[-PASS_COUNT:]
        left = (sum(recent) / len(recent)) * (PASS_COUNT - self.pass_index) if recent else None
        eta = f"~{left:.0f} s left in this round" if left is not None else "round time unknown"
        where = (
            self.pass_name
            if self.pass_name in SETUP_PHASES
            else f"pass {self.pass_index}/{PASS_COUNT} {self.pass_name}"
        )
        return (
            f"{self.tries} candidates tried, {self.accepts} accepted, {self.lines} code lines, "
            f"{self.per_run()}, {where}, {eta}, {elapsed:.0f} s"
        )

    def _draw(self) -> None:
        if self._live is not None:
            self._live.update(self.status())

    def close(self) -> None:
        if self.pass_name and self._live is None:
            self._finished(time.monotonic() - self.pass_started)
            self.pass_name = ""
        if self._live is not None:
            self._live.stop()
            self._live = None


@dataclass
class Counted:
    """Each candidate counted once in the progress, screened or judged."""

    oracle: Oracle
    progress: Progress
    sent: set[str] = field(default_factory=set)

    def _count(self, ask: Callable[[Sequence[str]], Answers], sources: Sequence[str]) -> Answers:
        began = time.monotonic()
        answers = ask(sources)
        fresh = set(sources) - self.sent
        self.sent.update(fresh)
        self.progress.tried(len(fresh), time.monotonic() - began)
        return answers

    def judge(self, sources: Sequence[str]) -> Answers:
        return self._count(self.oracle.judge, sources)

    def screen(self, sources: Sequence[str]) -> Answers:
        return self._count(self.oracle.screen, sources)

    def settle(self) -> tuple[Retraction, ...]:
        return self.oracle.settle()
