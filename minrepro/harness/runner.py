"""Run a script in a fresh process under a timeout and answer with its outcome and signature.

Every run gets its own process (and process group, killed whole on expiry), so a crashed or
monkeypatched script cannot affect the next. The interpreter is a parameter: one minrepro installation
drives venvs that hold other library versions.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from minrepro.harness.bytecode import child_environ
from minrepro.errors import MinreproError
from minrepro.harness.signature import (
    Signature,
    classify,
    frames_from_records,
    frames_from_text,
    message_identity,
    parse_traceback,
    raiser_of_records,
)
import contextlib

BOOTSTRAP = Path(__file__).with_name("_bootstrap.py")
HARNESS_FILES = {"_bootstrap.py", "_forkserver.py"}
DEFAULT_TIMEOUT = 120.0
_LIVE: set[subprocess.Popen] = set()  # runs under way (each in its own process group), for `stop_live_runs`


def stop_live_runs() -> None:
    """Kill every run under way, whole process groups: a reduction stopped by a signal must not wait out a
    real-size checkpoint's load in each worker thread before it writes the best script so far."""
    for proc in list(_LIVE):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


STACK_GRACE = 1.0  # seconds a timed-out script gets to dump its stack before SIGKILL


@dataclass(frozen=True)
class RunResult:
    """What one run produced. ``signature`` is None when the script passed."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    signature: Signature | None
    raw_headline: str  # "Type: message" before normalization, for the catalog's regexes
    trace: tuple[dict[str, Any], ...] = ()  # placement records (`run_script(..., trace=True)`), in call order
    script_lines: tuple[int, ...] = ()  # lines of the script's own frames on the failing stack, outermost first
    loaded: tuple[str, ...] = ()  # top-level names of installed packages imported by the end of the run
    cwd_writes: tuple[str, ...] = ()  # what the run left in its working directory (temp files go elsewhere)
    modules: tuple[str, ...] = ()  # every module of an installed package it imported, in order (fork server preload)
    peak_rss_mb: float = 0.0  # the run's peak resident memory (0: not recorded)
    peak_gpu_mb: float = 0.0  # what torch reserved on its busiest GPU at most (0: no CUDA, or not recorded)
    emulated_absent: tuple[
        str, ...
    ] = ()  # CPU features whose absence was emulated and took effect (MINREPRO_EMULATE_ABSENT)

    @property
    def failed(self) -> bool:
        return self.signature is not None


def run_to_dict(run: RunResult) -> dict[str, Any]:
    """A run as JSON-ready data (an interrupted reduction keeps its original's runs: a resume need not redo them)."""
    data = {f.name: getattr(run, f.name) for f in fields(RunResult)}
    data["signature"] = run.signature.to_dict() if run.signature is not None else None
    return data


def run_from_dict(data: dict[str, Any]) -> RunResult:
    values = dict(data)
    values["signature"] = Signature.from_dict(data["signature"]) if data.get("signature") else None
    for f in fields(RunResult):
        if isinstance(values.get(f.name), list):
            values[f.name] = tuple(values[f.name])
    return RunResult(**values)


def resolve_python(python: str | None) -> str:
    """An executable path for ``python`` (default: this interpreter), or a one-line error."""
    if python is None:
        return sys.executable
    if Path(python).is_dir():
        hint = Path(python) / "bin" / "python"
        raise MinreproError(
            f"--python names a directory ({python}); give the interpreter" + (f", e.g. {hint}" if hint.exists() else "")
        )
    # a relative path is made absolute here: the run's cwd is a scratch dir, where `.venv/bin/python` is not
    found = (
        shutil.which(python)
        if os.sep not in python
        else (os.path.abspath(python) if os.access(python, os.X_OK) else None)
    )
    if not found:
        raise MinreproError(f"interpreter not found: {python}")
    return found


# the subprocess boundary: each keyword-only option is one setting of the child process, as subprocess.run's are
def run_script(  # noqa: PLR0913
    script: str | os.PathLike[str],
    *,
    python: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    path0: str | os.PathLike[str] | None = None,
    trace: bool = False,
    profile: Path | None = None,
    isolated: bool = False,
) -> RunResult:
    """Run ``script`` under ``python`` via the bootstrap and classify how it ended.

    It runs in ``cwd`` (default: its own directory) and imports first from ``path0`` (default: its own
    directory): a candidate stands in for an original that lives elsewhere. With ``trace`` the result carries
    every accelerate ``dispatch_model`` call the run made (see ``_bootstrap``). ``isolated`` runs it in an empty
    scratch directory instead: a standalone case needs no directory of its own, and a library bug that writes into
    the working directory (peft's offload copy under an absolute path, family I) then cannot touch the checkout."""
    if isolated and cwd is not None:
        raise MinreproError("run_script: give cwd or isolated, not both")
    script = Path(script)
    if not script.is_file():
        raise MinreproError(f"no such script: {script}")
    interpreter = resolve_python(python)
    with tempfile.TemporaryDirectory(prefix="minrepro-run-") as tmp:
        report_path = Path(tmp) / "report.json"
        scratch_tmp = Path(tmp) / "tmp"
        scratch_tmp.mkdir()
        if isolated:
            cwd = Path(tmp) / "cwd"
            cwd.mkdir()
        # the script's own temp files (checkpoints, offload folders) go where they are removed after the run
        child_env = {
            **child_environ({**os.environ, **(env or {})}, interpreter),
            "MINREPRO_REPORT": str(report_path),
            "PYTHONUNBUFFERED": "1",
            "TMPDIR": str(scratch_tmp),
        }
        if path0 is not None:
            child_env["MINREPRO_PATH0"] = str(Path(path0).resolve())
        trace_path = Path(tmp) / "trace.jsonl"
        if trace:
            child_env["MINREPRO_TRACE"] = str(trace_path)
        if profile is not None:  # module-level timing and the values of `name.attr` reads (see _bootstrap)
            child_env["MINREPRO_PROFILE"] = str(profile)
        command = [interpreter, str(BOOTSTRAP), str(script.resolve()), *args]
        start = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=cwd or script.resolve().parent,
            env=child_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: a timeout kills everything it spawned
        )
        _LIVE.add(proc)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            stdout, stderr = _kill_group(proc)
            timed_out = True
        finally:
            _LIVE.discard(proc)
        seconds = time.monotonic() - start
        report = read_report(report_path)
        records = read_trace(trace_path)
        written = cwd_entries(cwd) if cwd is not None else ()
    signature, headline = classify_run(proc.returncode, stderr, report, timed_out, timeout)
    return RunResult(
        proc.returncode,
        stdout,
        stderr,
        seconds,
        signature,
        headline,
        records,
        script_lines(report),
        tuple(report.get("loaded", ())),
        written,
        tuple(report.get("modules", ())),
        report.get("peak_rss_mb", 0.0),
        report.get("peak_gpu_mb", 0.0),
        tuple(report.get("emulated_absent", ())),
    )


def cwd_entries(cwd: str | os.PathLike[str]) -> tuple[str, ...]:
    """What a run left in its working directory, by name (the fork server's `.tmp` is its TMPDIR, not a write)."""
    try:
        return tuple(sorted(e.name for e in os.scandir(cwd) if e.name != ".tmp"))
    except OSError:
        return ()


def _kill_group(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Ask for a stack dump (the bootstrap registers SIGUSR1), then kill the whole group."""
    for sig, wait in ((getattr(signal, "SIGUSR1", None), STACK_GRACE), (signal.SIGKILL, None)):
        if sig is None:
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else os.kill(proc.pid, sig)
        if wait:
            time.sleep(wait)
    return proc.communicate()


def script_lines(report: dict[str, Any]) -> tuple[int, ...]:
    """Where the failing stack passed through the script itself (its `__main__` frames)."""
    frames = report.get("exception", {}).get("frames", [])
    return tuple(
        f["line"]
        for f in frames
        if f.get("module") == "__main__" and f.get("line") and Path(f.get("file", "")).name not in HARNESS_FILES
    )  # they run as __main__ too


def read_trace(path: Path) -> tuple[dict[str, Any], ...]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return ()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a record cut short by a kill
    return tuple(records)


def read_report(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def classify_run(
    returncode: int, stderr: str, report: dict[str, Any], timed_out: bool, timeout: float
) -> tuple[Signature | None, str]:
    """(signature or None if it passed, raw headline) from what a finished run left behind."""
    if timed_out:
        frames = frames_from_text(_last_dump(stderr), most_recent_first=True)
        return Signature("timeout", "Timeout", "", frames), f"Timeout: no exit after {timeout:g} s"
    if returncode < 0:
        name = _signal_name(-returncode)
        frames = frames_from_text(_last_dump(stderr), most_recent_first=True)
        return Signature("signal", name, "", frames), f"{name}: killed by signal {-returncode}"
    if "exception" in report:
        exc = report["exception"]
        signature = Signature(
            classify(exc["type"], exc["message"]),
            exc["type"],
            message_identity(exc["type"], exc["message"]),
            frames_from_records(exc["frames"]),
            tuple(exc.get("causes", ())),
            raiser_of_records(exc["frames"]),
        )
        return signature, f"{exc['type']}: {exc['message']}"
    if returncode == 0:
        return None, ""
    # Non-zero exit without an uncaught exception: a script that logged a traceback and exited.
    parsed = parse_traceback(stderr)
    if parsed is not None:
        last = stderr[stderr.rfind("Traceback (most recent call last):") :]
        headline = next((ln for ln in last.splitlines() if ln.startswith(parsed.type)), parsed.headline)
        return parsed, headline
    return Signature("exit", f"exit {returncode}", ""), f"exit {returncode}"


def traceback_tail(stderr: str, lines: int = 16) -> str:
    """The end of the last traceback (or faulthandler dump) in stderr: where a failure happened, with line
    numbers, for tables and reports (a signature keeps no line numbers on purpose)."""
    start = max(stderr.rfind("Traceback (most recent call last):"), stderr.rfind("(most recent call first)"))
    block = stderr[start:] if start >= 0 else stderr
    return "\n".join(block.strip().splitlines()[-lines:])


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _last_dump(stderr: str) -> str:
    """The last faulthandler dump ('Current thread ... (most recent call first)') in stderr."""
    marker = max(stderr.rfind("(most recent call first)"), 0)
    return stderr[marker:]
