"""What the command groups share: progress lines on stderr."""

from __future__ import annotations

import sys


def progress(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)
