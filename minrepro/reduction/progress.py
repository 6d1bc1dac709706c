"""A live line for long reductions: candidates tried, accepted, current size, calls/s, the pass running and an
estimate of the current round's remaining time. On a terminal it redraws in place (rich); elsewhere it writes a
line per accepted step to the log."""

from __future__ import annotations

import sys
import time
from typing import Callable

from ..reducers import FINAL_PASSES, PASSES

PASS_COUNT = len(PASSES) + len(FINAL_PASSES)


class Progress:
    def __init__(self, start_lines: int, log: Callable[[str], None], live: bool | None = None):
        self.start, self.lines, self.log = time.monotonic(), start_lines, log
        self.tries = self.accepts = self.pass_index = 0
        self.pass_name, self.pass_started = "", self.start
        self.pass_seconds: list[float] = []
        self._live = None
        if live if live is not None else sys.stderr.isatty():
            try:
                from rich.console import Console
                from rich.live import Live
            except ImportError:  # rich is a dependency; a broken install still reduces
                return
            self._live = Live("", console=Console(stderr=True), refresh_per_second=4, transient=True)
            self._live.start()

    def phase(self, name: str) -> None:
        now = time.monotonic()
        if self.pass_name:
            self.pass_seconds.append(now - self.pass_started)
        self.pass_name, self.pass_started = name, now
        self.pass_index = self.pass_index % PASS_COUNT + 1 if name != "trigger report" else self.pass_index
        self.log(f"pass {name}")
        self._draw()

    def tried(self, n: int) -> None:
        self.tries += n
        self._draw()

    def accepted(self, lines: int) -> None:
        self.accepts, self.lines = self.accepts + 1, lines
        self.log(f"  accepted: {lines} code lines")
        self._draw()

    def status(self) -> str:
        elapsed = time.monotonic() - self.start
        rate = self.tries / elapsed if elapsed > 0 else 0.0
        recent = self.pass_seconds[-PASS_COUNT:]
        left = (sum(recent) / len(recent)) * (PASS_COUNT - self.pass_index) if recent else None
        eta = f"~{left:.0f} s left in this round" if left is not None else "round time unknown"
        return (f"{self.tries} candidates tried, {self.accepts} accepted, {self.lines} code lines, "
                f"{rate:.1f} calls/s, pass {self.pass_index}/{PASS_COUNT} {self.pass_name}, {eta}, "
                f"{elapsed:.0f} s")

    def _draw(self) -> None:
        if self._live is not None:
            self._live.update(self.status())

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
