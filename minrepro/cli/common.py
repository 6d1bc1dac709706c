"""What the command groups share: progress lines on stderr."""

from __future__ import annotations

import sys


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


class AfterAWhile:
    """Progress lines held back until `seconds` have passed, then printed (the held ones first): a long reduction
    says where it is, while bad input, answered at once, still gets its one-line error and nothing else."""

    def __init__(self, seconds: float = 5.0, emit=progress):
        import time

        self.clock, self.emit, self.held = time.monotonic, emit, []
        self.after = self.clock() + seconds

    def __call__(self, message: str) -> None:
        self.held.append(message)
        if self.clock() >= self.after:
            for line in self.held:
                self.emit(line)
            self.held.clear()
