"""Work that one phase starts and a later phase takes: each task has a name (the original's confirming runs, the
guard's envs, the bad env's probe), runs in a thread of its own, and is taken once by name. The reduction's driver
owns the one `Background` (a context manager): what was not taken is left to finish on its own, and what must end
before the reduction does (a pool being closed) is waited for on exit."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Background(contextlib.AbstractContextManager):
    def __init__(self) -> None:
        self._tasks: dict[str, Future] = {}
        self._awaited: list[Future] = []  # tasks the reduction's end waits for

    def start(self, name: str, work: Callable[..., Any], *args: Any, awaited: bool = False) -> Future:
        """`work(*args)` in a thread of its own, taken later by `name` (`awaited`: the reduction's end waits for it)."""
        future = self.submit(work, *args)
        if awaited:
            self._awaited.append(future)
        else:
            self._tasks[name] = future
        return future

    @staticmethod
    def submit(work: Callable[..., Any], *args: Any) -> Future:
        """`work(*args)` in a thread of its own, nobody's to take (the caller keeps the future)."""
        pool = ThreadPoolExecutor(1)
        future = pool.submit(work, *args)
        pool.shutdown(wait=False)
        return future

    def pending(self, name: str) -> bool:
        """Whether `name` was started and not taken yet."""
        return name in self._tasks

    def running(self, name: str) -> bool:
        """Whether `name` was started, not taken, and has not ended yet."""
        return name in self._tasks and not self._tasks[name].done()

    def take(self, name: str, default: Any = None) -> Any:
        """The result of `name` (waiting for it), once; `default` where it was never started or was taken already."""
        future = self._tasks.pop(name, None)
        return default if future is None else future.result()

    def __exit__(self, *exc: object) -> None:
        for future in self._awaited:
            with contextlib.suppress(Exception):
                future.result()
