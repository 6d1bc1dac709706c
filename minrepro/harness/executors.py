"""Ways to run many candidate scripts, answering `RunResult`s.

- `ColdExecutor`: a fresh interpreter per candidate (`run_script`); pays the full import every time.
- `ForkServerExecutor`: one server imports the heavy libraries once, then forks a child per candidate.
- `WarmPoolExecutor`: spawned workers that pre-import the libraries and run one candidate each, or several in a row.
- "auto" (`_auto`): the warm pool where CUDA is visible (or the fork server cannot serve), else the fork server.

Every candidate gets a process of its own, so a crash or a monkeypatch cannot leak into the next, except in a
warm pool told to reuse its workers: a worker then runs the next candidate only where the last left none of what its
checks look for (`_forkserver.reuse` lists them, and what they cannot see), and only for a script that patches nothing
that outlives a run (`reducers.source.patches_imports`).

The reducer only sees `run_many`; `benchmarks/` measures the three against each other.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from collections.abc import Sequence

from minrepro.errors import MinreproError
from minrepro.harness.bytecode import child_environ
from minrepro.harness.probe import probe
from minrepro.harness.resources import thread_cap
from minrepro.harness.runner import (
    STACK_GRACE,
    RunResult,
    classify_run,
    cwd_entries,
    read_report,
    resolve_python,
    run_script,
    script_lines,
)
import contextlib

FORKSERVER = Path(__file__).with_name("_forkserver.py")
WARMUP_TIMEOUT = 300.0


class Executor(Protocol):
    name: str

    def run_many(self, scripts: Sequence[Path], timeout: float, home: Path | None = None) -> list[RunResult]:
        """Run each script in its own process and in an empty scratch directory (what one candidate
        writes cannot feed the next), importing first from ``home`` (the original script's directory)."""

    def profile(self, script: Path, out: Path, timeout: float, home: Path | None = None) -> RunResult:
        """One run that also writes the module-level profile (`_bootstrap.run_profiled`) to ``out``."""

    def close(self) -> None: ...


class ColdExecutor:
    name = "cold"

    def __init__(self, python: str | None = None, jobs: int = 1):
        self.python, self.jobs = resolve_python(python), max(1, jobs)

    def run_many(self, scripts: Sequence[Path], timeout: float, home: Path | None = None) -> list[RunResult]:
        with ThreadPoolExecutor(self.jobs) as pool:
            return list(pool.map(lambda script: self._one(script, timeout, home), scripts))

    def profile(self, script: Path, out: Path, timeout: float, home: Path | None = None) -> RunResult:
        return self._one(script, timeout, home, out)

    def _one(self, script: Path, timeout: float, home: Path | None, profile: Path | None = None) -> RunResult:
        with tempfile.TemporaryDirectory(prefix="minrepro-cwd-") as scratch:
            return run_script(
                script,
                python=self.python,
                timeout=timeout,
                cwd=scratch,
                path0=home or Path(script).parent,
                profile=profile,
                env=thread_cap(self.jobs),
            )

    def close(self) -> None:
        pass


@dataclass
class _Job:
    index: int
    script: Path
    workdir: Path
    home: Path | None = None
    started: float = field(default_factory=time.monotonic)
    pid: int | None = None
    usr1_at: float | None = None  # when the stack dump was requested (timeout)

    prefix: tuple[int, str] | None = None  # (cut, key): run from a snapshot of the first `cut` statements
    timeout: float | None = None  # a snapshot's prefix runs under it (past it the job is handed back, to run whole)
    profile: Path | None = None  # where a profiled run writes its profile

    def spec(self) -> dict:
        scratch = self.workdir / "cwd"
        scratch.mkdir(exist_ok=True)
        spec = {
            "id": self.index,
            "script": str(self.script.resolve()),
            "args": [],
            "cwd": str(scratch),
            "scratch_root": str(self.workdir.parent),  # where a prefix snapshot keeps its files (outlives the job)
            "path0": str((self.home or self.script.parent).resolve()),
            "report": str(self.workdir / "report.json"),
            "stdout": str(self.workdir / "stdout"),
            "stderr": str(self.workdir / "stderr"),
        }
        if self.prefix is not None:
            spec["cut"], spec["prefix_key"] = self.prefix
            spec["timeout"] = self.timeout
        if self.profile is not None:
            spec["profile"] = str(self.profile)
        return spec

    def result(self, code: int, timeout: float) -> RunResult:
        out = (self.workdir / "stdout").read_text(errors="replace") if (self.workdir / "stdout").exists() else ""
        err = (self.workdir / "stderr").read_text(errors="replace") if (self.workdir / "stderr").exists() else ""
        timed_out = self.usr1_at is not None
        report = read_report(self.workdir / "report.json")
        sig, headline = classify_run(code, err, report, timed_out, timeout)
        skipped = self.workdir / "prefix_seconds"  # served from a prefix snapshot: the prefix's cost counts too
        extra = float(skipped.read_text()) if skipped.is_file() else 0.0
        shared = self.workdir / "prefix_cwd_writes"  # what the snapshot's prefix wrote into its working directory
        written = set(cwd_entries(self.workdir / "cwd")) | set(
            shared.read_text().split("\n") if shared.is_file() else ()
        )
        result = RunResult(
            code,
            out,
            err,
            time.monotonic() - self.started + extra,
            sig,
            headline,
            (),
            script_lines(report),
            tuple(report.get("loaded", ())),
            tuple(sorted(written - {""})),
            tuple(report.get("modules", ())),
        )
        # each candidate may save a checkpoint: kept until close(), 450 of them filled 12 GB and ended a
        # reduction with "No space left on device" (a failure no candidate of the script had)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return result

    def expire(self, now: float, timeout: float) -> None:
        """Past the deadline: ask for a stack dump, then kill the child's whole group."""
        if self.pid is None:
            return
        if self.usr1_at is None and now - self.started > timeout:
            self.usr1_at = now
            _signal(self.pid, signal.SIGUSR1, group=False)
        elif self.usr1_at is not None and now - self.usr1_at > STACK_GRACE:
            _signal(self.pid, signal.SIGKILL, group=True)


def _scratch(kind: str) -> tempfile.TemporaryDirectory:
    """The executor's scratch directory, named with this process's id. A run killed from outside (a capped
    benchmark, a lost session) cannot clean up: the next executor removes what dead processes left."""
    root = Path(tempfile.gettempdir())
    for stale in root.glob("minrepro-*-*-*"):
        parts = stale.name.split("-")
        if parts[1] in ("fork", "pool") and parts[2].isdigit() and not _alive(int(parts[2])):
            shutil.rmtree(stale, ignore_errors=True)
    return tempfile.TemporaryDirectory(prefix=f"minrepro-{kind}-{os.getpid()}-", ignore_cleanup_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pid: int, sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig) if group else os.kill(pid, sig)


class _Lines:
    """Line reader over a pipe, usable with select."""

    def __init__(self, fd: int):
        self.fd, self.buffer = fd, b""

    def read(self, wait: float) -> list[dict]:
        ready, _, _ = select.select([self.fd], [], [], max(wait, 0.0))
        if not ready:
            return []
        chunk = os.read(self.fd, 65536)
        if not chunk:
            raise MinreproError("the fork server exited unexpectedly")
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]


def _await_ready(lines: _Lines, what: str) -> dict:
    """The worker's ready line (it has imported the preload), or a one-line error after WARMUP_TIMEOUT."""
    deadline = time.monotonic() + WARMUP_TIMEOUT
    while time.monotonic() < deadline:
        for record in lines.read(deadline - time.monotonic()):
            if "ready" in record:
                return record
    raise MinreproError(f"{what} did not start in time")


def _start_worker(python: str, mode: str, preload: Sequence[str], log, jobs: int) -> subprocess.Popen:
    names = "\n".join(preload)
    if len(names) > 8192:  # a run's recorded modules (thousands) exceed what one argument may hold
        listing = Path(log.name).with_name(f"preload-{hashlib.sha1(names.encode()).hexdigest()[:12]}.txt")
        if not listing.is_file():  # a warm pool starts a worker per candidate: one listing serves them all
            listing.write_text(names, encoding="utf-8")
        names = f"@{listing}"
    # the server imports torch with the cap set: each child it forks inherits its share of the cores
    return subprocess.Popen(
        [python, str(FORKSERVER), mode, names],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        start_new_session=True,
        env=child_environ({**os.environ, **thread_cap(jobs)}, python),
    )


class _WarmExecutor:
    """What the warm executors share: both run candidates as `_Job`s, a profiled run being one job more."""

    def run_many(self, scripts: Sequence[Path], timeout: float, home: Path | None = None) -> list[RunResult]:
        return self._run(scripts, timeout, home)

    def profile(self, script: Path, out: Path, timeout: float, home: Path | None = None) -> RunResult:
        return self._run([script], timeout, home, out)[0]

    def _run(
        self, scripts: Sequence[Path], timeout: float, home: Path | None, profile: Path | None = None
    ) -> list[RunResult]:
        raise NotImplementedError


@dataclass(frozen=True)
class ServerStart:
    seconds: float
    cuda_by: str | None  # the preload whose import initialized CUDA (this start was given up), or None
    imports: dict[str, float]  # seconds per preloaded name
    refused: dict[str, str]  # preloads left to each child: name -> the package that tried to initialize CUDA

    def describe(self) -> str:
        slow = sorted(self.imports.items(), key=lambda kv: -kv[1])[:3]
        left = sorted(set(self.refused.values()))
        return (
            f"{self.seconds:.1f} s"
            + (f", CUDA initialized by {self.cuda_by}" if self.cuda_by else "")
            + (
                f", {len(self.refused)} import(s) left to each run (they initialize CUDA: {', '.join(left)})"
                if left
                else ""
            )
            + (f" (slowest: {', '.join(f'{n} {s:.1f} s' for n, s in slow)})" if slow else "")
        )


@dataclass(frozen=True)
class ExecutorOptions:
    """What an executor is told beyond the script's own imports: `recorded`, every module a run of it imported
    (what the libraries import lazily), preloaded after them by the warm executors; for the warm pool, `spares`
    workers kept warming beyond `jobs`, and `reuse`: a worker runs more than one candidate (see
    `WarmPoolExecutor`); for "auto", `cuda`: whether the env's torch sees a GPU, where a probe said so already."""

    recorded: Sequence[str] = ()
    spares: int = 0
    reuse: bool = False
    cuda: bool | None = None


class ForkServerExecutor(_WarmExecutor):
    """Forks a child per candidate from a server that imported the libraries once. With `set_heavy`, candidates
    that share their statements up to the last slow one run from a snapshot of that prefix: it runs once, in a
    child of the server, and each such candidate forks from it and runs only the rest. A prefix is snapshotted
    the second time it is asked for (a one-off prefix costs as much either way). Snapshot children share the
    files the prefix wrote; the reducer's final cold check does not trust them."""

    name = "forkserver"

    def __init__(
        self,
        python: str | None = None,
        preload: Sequence[str] = (),
        jobs: int = 1,
        options: ExecutorOptions | None = None,
    ):
        self.python, self.jobs = resolve_python(python), max(1, jobs)
        self.heavy: set[str] = set()
        self.asked: dict[str, int] = {}
        self.snapshot_runs = 0
        self.snapshots_refused = ""  # why prefix snapshots stopped ("cuda": a prefix initialized it), or ""
        self.refused_prefixes: set[str] = set()  # prefixes whose children changed the files they wrote
        self._tmp = _scratch("fork")
        self._log = open(Path(self._tmp.name) / "server.log", "wb")  # noqa: SIM115 (the server's log, closed in close())
        self.skipped: list[str] = []  # preloads left to each child because importing them initializes CUDA
        self.starts: list[ServerStart] = []  # each start of the server, restarts included: what a warm start cost
        recorded = (options or ExecutorOptions()).recorded
        preload, recorded = list(preload), [m for m in recorded if m not in preload]
        while True:
            began = time.monotonic()
            # "--": the recorded modules follow, imported in the server itself (see `_forkserver._preload`)
            self.proc = _start_worker(self.python, "fork", [*preload, "--", *recorded], self._log, self.jobs)
            self._lines = _Lines(self.proc.stdout.fileno())
            try:
                ready = _await_ready(self._lines, "the fork server")
            except MinreproError as exc:
                raise self._with_log(exc) from None
            self.starts.append(
                ServerStart(
                    time.monotonic() - began,
                    ready.get("initialized_by"),
                    ready.get("seconds", {}),
                    ready.get("refused", {}),
                )
            )
            self.server_pid: int = ready["pid"]  # a trial's child carries on as the server: not the process started
            if not ready["cuda_initialized"]:
                self.skipped += [name for name in ready.get("refused", {}) if name not in self.skipped]
                break
            self._stop_server()
            culprit = ready.get("initialized_by")
            if culprit in recorded:  # what a run imported from there on is left to the children (one restart)
                recorded = recorded[: recorded.index(culprit)]
                continue
            if culprit not in preload:  # initialized by something other than a preload: no fork server here
                self._cleanup()
                raise MinreproError("CUDA was initialized while preloading; a fork server cannot be used")
            preload.remove(culprit)
            self.skipped.append(culprit)

    def set_heavy(self, statements: Sequence[str]) -> None:
        """The slow top-level statements of the current program (as unparsed): where prefixes are cut."""
        self.heavy = set(statements)

    def _prefix(self, script: Path, home: Path | None) -> tuple[int, str] | None:
        if not self.heavy or self.snapshots_refused:
            return None
        try:
            texts = [ast.unparse(s) for s in ast.parse(script.read_text(encoding="utf-8")).body]
        except (SyntaxError, OSError, ValueError):
            return None
        cuts = [i + 1 for i, text in enumerate(texts[:-1]) if text in self.heavy]  # leave a suffix to run
        if not cuts:
            return None
        key = hashlib.sha1("\n".join([str(home), *texts[: cuts[-1]]]).encode()).hexdigest()
        if key in self.refused_prefixes:
            return None
        self.asked[key] = self.asked.get(key, 0) + 1
        return (cuts[-1], key) if self.asked[key] >= 2 else None

    def _run(
        self, scripts: Sequence[Path], timeout: float, home: Path | None, profile: Path | None = None
    ) -> list[RunResult]:
        results: list[RunResult | None] = [None] * len(scripts)
        queue = list(enumerate(scripts))
        by_id: dict[int, _Job] = {}
        by_pid: dict[int, _Job] = {}
        while queue or by_id or by_pid:
            while queue and len(by_id) + len(by_pid) < self.jobs:
                index, script = queue.pop(0)
                job = _Job(index, Path(script), Path(tempfile.mkdtemp(dir=self._tmp.name)), home, profile=profile)
                job.prefix = None if profile else self._prefix(Path(script), home)
                job.timeout = timeout
                self.snapshot_runs += job.prefix is not None
                by_id[index] = job
                self.proc.stdin.write((json.dumps(job.spec()) + "\n").encode())
                self.proc.stdin.flush()
            try:
                records = self._lines.read(0.05)
            except MinreproError as exc:
                raise self._with_log(exc) from None
            for record in records:
                if "id" in record and record["id"] in by_id:
                    job = by_id.pop(record["id"])
                    job.pid = record["pid"]
                    by_pid[job.pid] = job
                elif "code" in record and record["pid"] in by_pid:
                    job = by_pid.pop(record["pid"])
                    refused = job.workdir / "snapshot_refused"
                    if refused.is_file():  # handed back by a snapshot: run it whole
                        reason = refused.read_text()
                        # its children change what the prefix wrote, or the prefix itself ran past the timeout:
                        # not that prefix again
                        if reason in ("files", "slow"):
                            self.refused_prefixes.add(job.prefix[1])  # only a snapshot's job hands back
                        else:  # it cannot fork (CUDA): no snapshots from now on
                            self.snapshots_refused = reason
                        self.snapshot_runs -= 1
                        shutil.rmtree(job.workdir, ignore_errors=True)
                        queue.insert(0, (job.index, job.script))
                        continue
                    results[job.index] = job.result(record["code"], timeout)
            now = time.monotonic()
            for job in by_pid.values():
                job.expire(now, timeout)
        return [r for r in results if r is not None]

    def _with_log(self, exc: MinreproError) -> MinreproError:
        """The error with the server's last words (its stderr), which go with its scratch directory otherwise."""
        self._log.flush()
        lines = (Path(self._tmp.name) / "server.log").read_text(errors="replace").strip().splitlines()
        return MinreproError(f"{exc}; its log ends: {' / '.join(lines[-3:])}" if lines else str(exc))

    def _stop_server(self) -> None:
        """Close its job stream and wait for its output to end: the server may be a grandchild (see `_preload`),
        so the end of its stdout, not the started process's exit, says it is gone; then kill what is left."""
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        deadline = time.monotonic() + 5
        try:
            while time.monotonic() < deadline:
                self._lines.read(deadline - time.monotonic())
        except MinreproError:  # the end of its output: the server has exited
            pass
        else:
            _signal(self.proc.pid, signal.SIGKILL, group=True)
        self.proc.wait()

    def _cleanup(self) -> None:
        self._log.close()
        self._tmp.cleanup()

    def close(self) -> None:
        self._stop_server()
        self._cleanup()


# warm workers beyond `jobs` while workers are reused: one replaces a worker a profiled run or its run limit retired
REUSE_SPARES = 2


# a worker putting a run back for longer than this is let go: a put-back takes a fraction of a second
RESTORE_TIMEOUT = 60.0


@dataclass
class _Worker:
    proc: subprocess.Popen
    lines: _Lines
    ready: bool = False  # its ready line (or whether it stays after its last run) has been read: it waits for a job
    runs: int = 0
    answered_at: float = 0.0  # when its last run's answer came: it is putting that run back since
    verdict: dict | None = None  # whether it stays after that run, where it came in one read with the answer


class WarmPoolExecutor(_WarmExecutor):
    """Workers spawned ahead of need; each imports the libraries and runs candidates. `spares` more than `jobs` are
    kept warming: a worker's imports take many times a twin's run (`docs/benchmarks.md`, "Executors on a twin"), so
    with only `jobs` of them each batch after the first would wait for its replacements' imports. Where workers are
    reused, only a retired one needs a replacement: REUSE_SPARES of them warm (more would import beside the runs that
    the search waits for), and the rest once reuse stops.

    With `reuse`, a worker runs candidates one after another, putting back what a run changed, and retires where a
    run left what it cannot put back (`_forkserver.reuse` says which is which, and what its checks cannot see); a
    retired worker is replaced. Without it, each worker runs one candidate and exits. `reused` counts the runs that
    went to a worker that had run before, `retired` why workers were let go."""

    name = "warm-pool"

    def __init__(
        self,
        python: str | None = None,
        preload: Sequence[str] = (),
        jobs: int = 1,
        options: ExecutorOptions | None = None,
    ):
        options = options or ExecutorOptions()
        self.python, self.jobs = resolve_python(python), max(1, jobs)
        self.spares_single = max(0, options.spares)  # the spares where each worker runs one candidate
        self.spares = min(self.spares_single, REUSE_SPARES) if options.reuse else self.spares_single
        # each worker may initialize CUDA: it never forks
        self.preload = list(dict.fromkeys([*preload, *options.recorded]))
        self.reuse, self.reused, self.retired = options.reuse, 0, Counter()
        self.chosen_because = ""  # why "auto" took it over the fork server, if it did
        self._tmp = _scratch("pool")
        self._log = open(Path(self._tmp.name) / "workers.log", "wb")  # noqa: SIM115 (closed in close())
        self._spawned: list[_Worker] = []  # every worker started: close() kills those alive, a busy one included
        self._idle = [self._spawn() for _ in range(self.jobs + self.spares)]
        self._restoring: list[_Worker] = []  # answered their last run, putting it back before the next

    def _spawn(self) -> _Worker:
        proc = _start_worker(self.python, "reuse" if self.reuse else "single", self.preload, self._log, self.jobs)
        worker = _Worker(proc, _Lines(proc.stdout.fileno()))
        self._spawned = [*(w for w in self._spawned if w.proc.poll() is None), worker]
        return worker

    def _take(self, which: str = "any", busy: int = 0) -> _Worker | None:
        """The first worker ready, else None (the caller goes on with its running jobs and asks again): "fresh", one
        that has run nothing yet; "reused", one that has, while any is kept or putting a run back. A kept one first;
        a spare only while fewer than `jobs` workers hold a run (`busy` running, and those putting a run back): each
        holds its run's memory until its put-back ends, and the runs side by side were sized as `jobs` of them."""
        fresh = which == "fresh"
        if fresh and not any(w.runs == 0 for w in self._idle):
            self._idle.append(self._spawn())
        self._poll_restoring()
        for worker in list(self._idle):
            if worker.ready:
                continue
            try:  # its imports may have ended since
                worker.ready = any("ready" in record for record in worker.lines.read(0))
            except MinreproError:  # it exited while importing: the others may still serve
                self._idle.remove(worker)
                if not (self._idle or self._restoring or busy):
                    raise MinreproError("a warm worker exited while importing the libraries") from None
        ran = which == "reused" and (self._restoring or any(w.runs for w in self._idle))
        holding = busy + len(self._restoring)

        def usable(w: _Worker) -> bool:
            if not w.ready:
                return False
            if fresh:
                return w.runs == 0
            return bool(w.runs) or (not ran and holding < self.jobs)

        ready = [w for w in self._idle if usable(w)]
        for worker in ready:
            self._idle.remove(worker)
            if worker.proc.poll() is not None:  # a worker that died while idle
                self.retired["its process ended while idle"] += 1
                self._idle.append(self._spawn())
                continue
            if not self.reuse:
                self._idle.append(self._spawn())  # warm the replacement while this one works
            self.reused += worker.runs > 0
            return worker
        if not self._idle and not self._restoring:
            self._idle.append(self._spawn())
        return None

    def _settle(self, seconds: float) -> None:
        """Wait (at most `seconds`) for the workers putting a run back to say whether they stay: what a summary
        counts of reuse includes the last runs."""
        deadline = time.monotonic() + seconds
        while self._restoring and time.monotonic() < deadline:
            self._poll_restoring()
            time.sleep(0.005)

    def _poll_restoring(self) -> None:
        """Each worker putting its last run back that has said whether it stays: kept, it goes first in line; let go
        (or gone, or past RESTORE_TIMEOUT), it is replaced where workers are reused."""
        for worker in list(self._restoring):
            verdict, worker.verdict = worker.verdict, None
            try:
                verdict = verdict or next((r for r in worker.lines.read(0) if "kept" in r), None)
            except MinreproError:  # its output ended: it exited
                verdict = {"kept": False, "why": "its process ended"}
            if verdict is None and time.monotonic() - worker.answered_at > RESTORE_TIMEOUT:
                verdict = {"kept": False, "why": "putting a run back took too long"}
            if verdict is None:
                continue
            self._restoring.remove(worker)
            if verdict["kept"] and self.reuse:
                worker.ready, worker.runs = True, worker.runs + 1
                self._idle.insert(0, worker)
                continue
            self._let_go(worker, verdict["why"] or "the timeout")

    def _let_go(self, worker: _Worker, why: str) -> None:
        """`worker` killed (its process group: what its run left running too); where workers are reused, its
        retirement counted (`why`) and a replacement started."""
        _signal(worker.proc.pid, signal.SIGKILL, group=True)
        worker.proc.wait()
        if self.reuse:
            self.retired[why] += 1
            self._idle.append(self._spawn())

    def run_fresh(self, scripts: Sequence[Path], timeout: float, home: Path | None = None) -> list[RunResult]:
        """Each script in a worker that has run nothing before: what the reused runs are compared with."""
        return self._run(scripts, timeout, home, which="fresh")

    def run_reused(self, scripts: Sequence[Path], timeout: float, home: Path | None = None) -> list[RunResult]:
        """Each script in a worker that has run before (one putting its run back is waited for, not passed over for
        a spare), while there is one: the reuse check's runs."""
        return self._run(scripts, timeout, home, which="reused")

    def _run(
        self,
        scripts: Sequence[Path],
        timeout: float,
        home: Path | None,
        profile: Path | None = None,
        which: str = "any",
    ) -> list[RunResult]:
        results: list[RunResult | None] = [None] * len(scripts)
        queue, running = list(enumerate(scripts)), []
        waiting = None  # since when the next job waits for a worker: its imports, or its put-back
        while queue or running:
            while queue and len(running) < self.jobs:
                worker = self._take(which, len(running))
                if worker is None:  # the running jobs are polled meanwhile: their time is theirs alone
                    waiting = waiting or time.monotonic()
                    if time.monotonic() - waiting > WARMUP_TIMEOUT:
                        raise MinreproError("a warm worker did not start in time")
                    break
                waiting = None
                index, script = queue.pop(0)
                job = _Job(index, Path(script), Path(tempfile.mkdtemp(dir=self._tmp.name)), home, profile=profile)
                job.started, job.pid, worker.ready = time.monotonic(), worker.proc.pid, False
                worker.proc.stdin.write((json.dumps(job.spec()) + "\n").encode())
                if self.reuse:
                    worker.proc.stdin.flush()
                else:
                    worker.proc.stdin.close()
                running.append((job, worker))
            time.sleep(0.01)
            now = time.monotonic()
            for job, worker in list(running):
                code = self._finished(job, worker)
                if code is None:
                    job.expire(now, timeout)
                    continue
                running.remove((job, worker))
                results[job.index] = job.result(code, timeout)
        return [r for r in results if r is not None]

    def _finished(self, job: _Job, worker: _Worker) -> int | None:
        """The run's exit code once it has ended, else None. A reused worker answers, then puts the run back
        (`_poll_restoring` then keeps it, first in line, or replaces it; the spares stay warm for the retired). A
        worker whose run was past its timeout is never kept: it may have been killed after it answered. A worker
        started to be reused, once reuse is turned off (`stop_reuse`), runs its job and is let go."""
        try:
            records = worker.lines.read(0)
        except MinreproError:  # its output ended: killed at the timeout, or crashed
            records = []
        for record in records:
            if "code" not in record:
                continue
            if self.reuse and job.usr1_at is None:
                worker.answered_at = time.monotonic()
                worker.verdict = next((r for r in records if "kept" in r), None)
                self._restoring.append(worker)
                return record["code"]
            self._let_go(worker, "the timeout")
            return record["code"]
        code = worker.proc.poll()
        if code is not None and self.reuse:
            self.retired["its process ended" if code >= 0 else "a crash or the timeout"] += 1
            self._idle.append(self._spawn())
        return code

    def stop_reuse(self) -> None:
        """From now on each worker runs one candidate: a worker that has run one already is let go and replaced, one
        still warm from its start serves once, and the new ones are started for one run."""
        self.reuse = False
        for worker in [w for w in self._idle if w.runs] + self._restoring:
            if worker in self._idle:
                self._idle.remove(worker)
            _signal(worker.proc.pid, signal.SIGKILL, group=True)
            worker.proc.wait()
            self._idle.append(self._spawn())
        self._restoring = []
        self._idle += [self._spawn() for _ in range(self.spares_single - self.spares)]
        self.spares = self.spares_single

    def describe_reuse(self) -> str:
        """How many runs went to a worker used before, and why workers retired: what reuse did, for the log."""
        self._settle(RESTORE_TIMEOUT)
        if not self.reuse:
            return "workers not reused" + (f" (after {self.reused} run(s) in a reused worker)" if self.reused else "")
        why = ", ".join(f"{reason} {n}" for reason, n in self.retired.most_common())
        return f"{self.reused} run(s) in a reused worker; retired: {why or 'none'}"

    def close(self) -> None:
        for worker in self._spawned:
            _signal(worker.proc.pid, signal.SIGKILL, group=True)
            worker.proc.wait()
        self._log.close()
        self._tmp.cleanup()


def _cuda_visible_in(python: str) -> bool:
    """Whether the env's torch sees a GPU (`probe`: one subprocess that has to import torch). A box without the
    NVIDIA driver is not asked."""
    if not (Path("/dev/nvidiactl").exists() or Path("/proc/driver/nvidia").exists()):
        return False
    try:
        return probe(python).cuda
    except (MinreproError, subprocess.TimeoutExpired):  # the env cannot even be probed: its runs will say why
        return False


def _auto(python: str | None, preload: Sequence[str], jobs: int, options: ExecutorOptions) -> Executor:
    """The warm pool where CUDA is visible, else the fork server. On a GPU the fork server's prefix snapshots stop at
    the first CUDA initialization, so each child imports again whatever comes after it, and a twin's candidates run
    slower than in the warm pool's workers; on newest the fork server also leaves peft (bitsandbytes 0.50 initializes
    CUDA at import) to every child. Elsewhere
    the fork server stays; if it would leave a CUDA-initializing import anyway, or cannot start, the warm pool.
    `options.cuda`: whether the env's torch sees a GPU, where the caller's probe said so already."""
    python = resolve_python(python)
    if _cuda_visible_in(python) if options.cuda is None else options.cuda:
        why = "CUDA is visible: fork-server snapshots cannot pass CUDA's initialization"
    else:
        try:
            server = ForkServerExecutor(python, preload, jobs, options)
        except MinreproError as exc:  # e.g. CUDA initialized while preloading: workers that never fork can still run
            why = f"the fork server could not start ({exc})"
        else:
            if not server.skipped:
                return server
            why = (
                f"the fork server would leave {', '.join(server.skipped)} to each candidate "
                "(importing it initializes CUDA)"
            )
            server.close()
    pool = WarmPoolExecutor(python, preload, jobs, options)
    pool.chosen_because = why
    return pool


EXECUTORS = {"cold": ColdExecutor, "forkserver": ForkServerExecutor, "warm-pool": WarmPoolExecutor, "auto": _auto}


def make_executor(
    kind: str, python: str | None, preload: Sequence[str], jobs: int, options: ExecutorOptions | None = None
) -> Executor:
    """``preload``: the script's own imports; ``options``: what else the executor is told (`ExecutorOptions`).
    "auto": see `_auto`."""
    options = options or ExecutorOptions()
    if kind == "cold":
        return ColdExecutor(python, jobs)
    if kind not in EXECUTORS:
        raise MinreproError(f"unknown executor {kind!r} (known: {', '.join(EXECUTORS)})")
    if kind == "auto":
        return _auto(python, preload, jobs, options)
    if kind == "warm-pool":  # workers warming ahead of need: only the warm pool keeps spares
        return WarmPoolExecutor(python, preload, jobs, options)
    return EXECUTORS[kind](python, preload, jobs, options)
