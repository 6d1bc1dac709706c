"""Warm execution for the reducer: import the heavy libraries once, then run each script in a fresh process.

Executed by path under the target interpreter (standard library only, like `_bootstrap`). Two modes:

  fork    a server: for each job line on stdin it forks a child that runs the script and exits; the
          server reports {"id", "pid"} when it forks and {"pid", "code"} when the child ends.
  single  a pre-warmed worker: reads one job, runs it in this process, exits with its code.
  reuse   a pre-warmed worker that runs jobs one after another while each leaves it as a fresh interpreter would
          be (see `reuse`): after each it reports {"code", "answered"} as the run ends, then {"kept", "why"} once it
          has put the run back; one it does not keep, it exits with.

A job is {"id", "script", "args", "cwd", "path0", "report", "stdout", "stderr"}, and "profile" for a profiled run.
CUDA must not be initialized before a fork (a forked child cannot re-initialize it): torch.cuda.is_available() is
answered through NVML, and the ready line says whether CUDA got initialized anyway so the client can fall back.
"""

import atexit
import contextlib
import gc
import importlib
import json
import logging
import os
import tempfile
import threading
import time
import select
import signal
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bootstrap

sys.path.pop(0)


def _emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _cuda_initialized():
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _preload(names, trials=False):
    """Import the names in order. With `trials` (the fork server), where CUDA is visible, each name not yet
    imported is imported in a forked trial first: a name whose import would initialize CUDA (bitsandbytes does,
    and every package that imports it) ends its trial at the attempt and is left to each child, since a forked
    child could not use CUDA otherwise; the trial that succeeds carries on as the server and its parent exits.
    Restarting the server per such name instead would pay its whole start again for each (the server's start per
    set: `docs/benchmarks.md`, "The catalog phase").
    Should CUDA get initialized anyway (a path around `torch.cuda._lazy_init`), stop and name the culprit so the
    client can start again without it."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # after "--": a run's recorded modules (thousands), imported here without trials: with a trial each, a
    # reduction's server could exit during such a preload, where the catalog's own names alone do not
    own, recorded = (names[: names.index("--")], names[names.index("--") + 1 :]) if "--" in names else (names, [])
    own = sorted(own, key=lambda name: name != "torch")  # first: the trials need torch.cuda to watch
    loaded, seconds, refused = [], {}, {}  # seconds per name: the client reports the slow ones
    for index, name in enumerate(own + recorded):
        began = time.monotonic()
        if trials and index < len(own) and name not in sys.modules and _cuda_visible():
            # under a refused name or its culprit package: it would import that again (bitsandbytes.nn, peft.utils)
            blocked = [p for p in {*refused, *refused.values()} if name == p or name.startswith(p + ".")]
            culprit = refused.get(blocked[0], blocked[0]) if blocked else _import_in_trial(name)
            if culprit is not None:
                refused[name] = culprit
                seconds[name] = round(time.monotonic() - began, 2)
                continue
        else:
            try:
                importlib.import_module(name)
            except Exception:  # the script will report its own import error when it runs
                pass
        if name in sys.modules:
            loaded.append(name)
        seconds[name] = round(time.monotonic() - began, 2)
        if _cuda_initialized():
            return {
                "ready": True,
                "loaded": loaded,
                "cuda_initialized": True,
                "initialized_by": name,
                "pid": os.getpid(),
                "seconds": seconds,
                "refused": refused,
            }
    _bootstrap._library_tops()  # once here, inherited by every child (each run's report names what it loaded)
    return {
        "ready": True,
        "loaded": loaded,
        "cuda_initialized": False,
        "pid": os.getpid(),
        "seconds": seconds,
        "refused": refused,
    }


def _cuda_visible():
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available())  # NVML: initializes nothing


def _import_in_trial(name):
    """None in the process that imported `name` without initializing CUDA (it carries on; its parent is gone), or
    in the parent, the package whose import tried to initialize CUDA during the failed trial."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        cuda = sys.modules["torch"].cuda
        lazy_init = cuda._lazy_init

        def refuse(*_args, **_kwargs):  # every CUDA initialization goes through here, the C++ one included
            # the package that asked: the first caller outside torch, by module name as `_bootstrap._frames` reads it
            frame = sys._getframe(1)
            while frame is not None and (frame.f_globals.get("__name__") or "").split(".")[0] == "torch":
                frame = frame.f_back
            caller = (frame.f_globals.get("__name__") or "") if frame is not None else ""
            os.write(write_end, (caller.split(".")[0] or name).encode())
            os._exit(0)

        cuda._lazy_init = refuse
        try:
            importlib.import_module(name)
        except Exception:  # the script will report its own import error when it runs
            pass
        cuda._lazy_init = lazy_init
        os.write(write_end, b"\n")
        os.close(write_end)
        return None
    os.close(write_end)
    answer = b""
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        answer += chunk
    os.close(read_end)
    if answer == b"\n":  # the trial imported it: it is the server from now on
        os._exit(0)
    os.waitpid(pid, 0)
    return answer.decode() or name  # no answer: the trial died importing it; leave it to the children too


def _redirect(job):
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(job["cwd"])
    # temp files the script makes go into its scratch directory, which the executor removes
    tmp = os.path.join(job["cwd"], ".tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["TMPDIR"] = tmp
    tempfile.tempdir = tmp


def _run_job(job):
    """In the process that will exit with the script's code: never returns."""
    code = 70
    try:
        _redirect(job)
        if job.get("profile"):  # the reducer's facts run: module-level timing and values (see _bootstrap)
            os.environ["MINREPRO_PROFILE"] = job["profile"]
        code = _bootstrap.execute(job["script"], job["args"], job["report"], job.get("path0"))
        _flush_streams()
    finally:
        os._exit(code)


def _flush_streams():
    """The run's streams and the interpreter's own (what it printed before it replaced sys.stdout is still in their
    buffers): os._exit flushes nothing, where a fresh interpreter's exit flushes both."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()


def serve(source=0, handle=None, on_eof=lambda: None):
    """Read job lines from `source` and hand each to `handle` (default: fork a child for it), reaping children
    and reporting their exit codes, until `source` closes; then wait for the children still running."""
    handle = handle or _dispatch
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        try:
            ready, _, _ = select.select([source, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
            _reap()
        if source in ready:
            chunk = os.read(source, 65536)
            if not chunk:
                on_eof()
                _drain()
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                handle(json.loads(line))


def _drain():
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return
        _emit({"pid": pid, "code": os.waitstatus_to_exitcode(status)})


# --- prefix snapshots -------------------------------------------------------------------------------------
# A job with a "prefix_key" and a "cut" shares its first `cut` top-level statements with other candidates.
# The first such job starts a snapshot: a child of this server that runs that prefix once and then serves the
# jobs forwarded to it, forking, for each, a child that runs only the rest (the suffix) in the namespace the
# prefix left. The prefix's files live as long as the snapshot; the client evicts the oldest beyond a few.

SNAPSHOTS = {}  # prefix key -> (pid, write end of its job pipe), oldest first
MAX_SNAPSHOTS = 3


def _dispatch(job):
    key = job.get("prefix_key")
    if key is None:
        _fork(job)
        return
    if key not in SNAPSHOTS:
        if len(SNAPSHOTS) >= MAX_SNAPSHOTS:
            os.close(SNAPSHOTS.pop(next(iter(SNAPSHOTS)))[1])  # its job pipe closes: it finishes its children, exits
        SNAPSHOTS[key] = _start_snapshot(job)
    os.write(SNAPSHOTS[key][1], (json.dumps(job) + "\n").encode())


def _close_snapshots():
    while SNAPSHOTS:
        os.close(SNAPSHOTS.popitem()[1][1])


def _start_snapshot(job):
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(write_end)
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for _, (_, other) in SNAPSHOTS.items():
            os.close(other)
        _reseed()
        code = 70
        try:
            code = _snapshot(job, read_end)
        finally:
            os._exit(code)
    os.close(read_end)
    return pid, write_end


REFUSED = 75  # a snapshot's exit code for a job it hands back (see `snapshot_refused`)


def _snapshot(job, jobs):
    """Run the prefix, then serve the suffix jobs; if the prefix itself fails, that is every such job's failure."""
    scratch = tempfile.mkdtemp(prefix="snapshot-", dir=job.get("scratch_root") or os.path.dirname(job["cwd"]) or None)
    # the prefix's working directory and its TMPDIR apart: what it writes into the former is a write into the cwd
    prefix_cwd, prefix_tmp = os.path.join(scratch, "cwd"), os.path.join(scratch, "tmp")
    os.makedirs(prefix_cwd)
    os.makedirs(prefix_tmp)
    os.chdir(prefix_cwd)
    os.environ["TMPDIR"] = tempfile.tempdir = prefix_tmp
    null = os.open(os.devnull, os.O_WRONLY)
    saved_out, saved_err = os.dup(1), os.dup(2)
    log = os.open(os.path.join(scratch, "prefix.err"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(null, 1)
    os.dup2(log, 2)
    prefix, _ = _bootstrap.split_module(job["script"], job["cut"])
    namespace = {"__name__": "__main__", "__file__": job["script"], "__builtins__": __builtins__}
    prefix_report = os.path.join(scratch, "prefix.json")
    # GNU OpenMP is not fork-safe: once the prefix has run a parallel torch op, every child forked from this
    # snapshot hangs in its first one (each such candidate times out, and is refused, while its cold run passes
    # at once). One intra-op thread here and in the children keeps the pool from ever starting.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    _bootstrap.prepare(job["script"], job["args"], job.get("path0"))
    began = time.monotonic()
    # the prefix runs under the candidate's timeout: its jobs wait for it with no process of their own to expire
    # (a candidate that drops a twin's config builds the full-size model here, far past its timeout)
    slow = []

    def too_slow(*_):
        slow.append(True)
        raise TimeoutError("the shared prefix ran past the candidate's timeout")

    signal.signal(signal.SIGALRM, too_slow)
    signal.setitimer(signal.ITIMER_REAL, float(job.get("timeout") or 0))
    failed = _bootstrap.guarded(lambda: exec(prefix, namespace), prefix_report)
    signal.setitimer(signal.ITIMER_REAL, 0)
    prefix_seconds = time.monotonic() - began
    # a prefix that initialized CUDA (a model loaded onto the GPU) cannot serve forked children: each would fail
    # with "Cannot re-initialize CUDA in forked subprocess", and be refused. Every job sent here is handed back,
    # to run whole, and the client stops snapshotting.
    refused = "slow" if slow else "cuda" if _cuda_initialized() else ""  # why every job is handed back, if so
    shared = sorted(os.listdir(prefix_cwd))  # what the prefix wrote into its cwd: every child shares it
    # and what it wrote anywhere in its directories: a child that changes it (a suffix saving an adapter into the
    # prefix's temp dir) would hand it to every later child, which a cold run never sees: the reduction could keep a
    # script that loads an adapter it no longer saves, which the final cold check refuses.
    files = _tree_state(scratch)
    if refused:  # this process only hands jobs back from now on: let go of what the prefix built (a model on the GPU)
        namespace.clear()
        import gc

        gc.collect()
        torch = sys.modules.get("torch")  # a no-op where CUDA was never initialized (a prefix ran too long)
        getattr(getattr(torch, "cuda", None), "empty_cache", lambda: None)()
    with open(prefix_report, encoding="utf-8") as fh:
        if json.load(fh).get("system_exit"):
            failed = failed or -1  # the prefix exited: so does every candidate sharing it (replayed below)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved_out, 1)  # the job lines go to the client through the server's stdout
    os.dup2(saved_err, 2)

    def handle(suffix_job):
        pid = os.fork()
        if pid == 0:
            os.setsid()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 70
            try:
                if refused:
                    with open(os.path.join(os.path.dirname(suffix_job["report"]), "snapshot_refused"), "w") as fh:
                        fh.write(refused)
                    os._exit(REFUSED)
                _redirect(suffix_job)
                # a candidate's cost includes the prefix it skipped: the reducer's time budget must see it (else a
                # change that makes the prefix 10x slower passes as cheap, and the result is slow cold)
                job_dir = os.path.dirname(suffix_job["report"])
                if suffix_job["report"] != job["report"]:  # the job that built the snapshot has paid it already
                    with open(os.path.join(job_dir, "prefix_seconds"), "w") as fh:
                        fh.write(repr(prefix_seconds))
                with open(os.path.join(job_dir, "prefix_cwd_writes"), "w") as fh:
                    fh.write("\n".join(shared))
                for name in shared:  # a relative path the prefix wrote reads the same as in a cold run
                    os.symlink(os.path.join(prefix_cwd, name), name)
                if failed:  # the prefix raised: so does every candidate that shares it, at the same place
                    with open(os.path.join(scratch, "prefix.err"), encoding="utf-8", errors="replace") as fh:
                        sys.stderr.write(fh.read())
                    with open(prefix_report, encoding="utf-8") as src, open(suffix_job["report"], "w") as dst:
                        dst.write(src.read())
                    code = max(failed, 0)
                else:
                    _, suffix = _bootstrap.split_module(suffix_job["script"], suffix_job["cut"])
                    namespace["__file__"] = suffix_job["script"]
                    code = _bootstrap.guarded(lambda: exec(suffix, namespace), suffix_job["report"])
                sys.stdout.flush()
                sys.stderr.flush()
                if _tree_state(scratch) != files:  # this child or one beside it changed the shared files: run it whole
                    with open(os.path.join(job_dir, "snapshot_refused"), "w") as fh:
                        fh.write("files")
                    code = REFUSED
            finally:
                os._exit(code)
        _emit({"id": suffix_job["id"], "pid": pid})

    serve(jobs, handle)
    return 0


def _tree_state(root):
    """Every file and directory under `root` with its size and modification time: what a child may have changed."""
    state = set()
    for top, dirs, names in os.walk(root):
        for name in dirs + names:
            path = os.path.join(top, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            state.add((path, info.st_size, info.st_mtime_ns))
    return state


def _reseed():
    """Give a forked child a fresh torch seed, as a new interpreter gets. Inherited, every child would draw the
    same "random" weights: a script that lost its manual_seed line would look deterministic here and then not
    reproduce cold. (random and numpy reseed themselves after a fork; torch does not.)"""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()  # CUDA is not initialized in the server, so its generators seed on first use as usual


def _fork(job):
    pid = os.fork()
    if pid == 0:
        os.setsid()  # its own group: the client kills the child and anything it spawned together
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        _reseed()
        _run_job(job)
    _emit({"id": job["id"], "pid": pid})


def _reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _emit({"pid": pid, "code": os.waitstatus_to_exitcode(status)})


def single():
    line = sys.stdin.readline()
    if line:
        _run_job(json.loads(line))


# --- reused workers ------------------------------------------------------------------------------------------
# A warm worker's imports take many times a twin's candidate run (`docs/benchmarks.md`, "Executors on a twin"):
# used once, the workers' imports bound the search. Reused, a worker runs candidates one after another
# while each leaves it as a fresh interpreter would be. What a run may change and that can be put back is put back
# (the environment, argv, sys.path and the import hooks, the script's own modules, the seeds, warnings filters and
# loggers, the garbage collector's settings, torch's dtype, grad mode and threads, torch.compile's caches); a run that
# leaves anything else (a thread or a child process still running, a signal handler, another torch switch, another
# CUDA device, CUDA started under other CUDA settings, a CUDA error, GPU memory held beyond the libraries' caches, an
# out-of-memory or CUDA error as its failure) retires its worker, which exits with the run's code. Library state that a
# call changes (a registered config class, a progress bar disabled, a once-only warning shown) is not seen here. A
# run under tracing or profiling (they wrap the libraries) always retires it. The client only reuses a worker for
# scripts that patch no imported module (`reducers.source.patches_imports`): a monkeypatch would outlive its run.

REUSE_LIMIT = 64  # runs per worker: what a run leaves that no check here sees (caches, fragmentation) stays bounded
_CUDA_FAILURE = ("CUDA error", "CUBLAS_STATUS", "cuDNN error", "device-side assert", "illegal memory access")


def _switches(torch):
    """torch's process-wide switches a script may set. Compared after each run; only dtype, grad mode, the thread
    count and anomaly detection are put back (their setters are plain), any other change retires the worker."""
    if torch is None:
        return {}
    b = torch.backends
    found = {
        "dtype": torch.get_default_dtype(),
        "grad": torch.is_grad_enabled(),
        "threads": torch.get_num_threads(),
        "anomaly": torch.is_anomaly_enabled(),
        "device": str(getattr(torch, "get_default_device", lambda: "cpu")()),
        "deterministic": (
            torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled(),
        ),
        "matmul": torch.get_float32_matmul_precision(),
        "inference": torch.is_inference_mode_enabled(),
    }
    with contextlib.suppress(Exception):  # switches an older torch lacks
        found["backends"] = (
            b.cuda.matmul.allow_tf32,
            b.cuda.matmul.allow_fp16_reduced_precision_reduction,
            b.cudnn.enabled,
            b.cudnn.benchmark,
            b.cudnn.deterministic,
            b.cudnn.allow_tf32,
            b.cuda.flash_sdp_enabled(),
            b.cuda.mem_efficient_sdp_enabled(),
            b.cuda.math_sdp_enabled(),
        )
    if torch.cuda.is_initialized():
        found["cuda_device"] = torch.cuda.current_device()
    return found


def _put_back(torch, before, after):
    """The switches with plain setters put back; the names of the others that changed."""
    setters = {
        "dtype": torch.set_default_dtype,
        "grad": torch.set_grad_enabled,
        "threads": torch.set_num_threads,
        "anomaly": torch.autograd.set_detect_anomaly,
    }
    changed = []
    if "cuda_device" in after and "cuda_device" not in before:  # CUDA started in the run: on its default device?
        before = {**before, "cuda_device": 0}
    for name, value in before.items():
        if after.get(name) == value:
            continue
        if name in setters:
            setters[name](value)
        else:
            changed.append(name)
    return changed


def _children():
    """Processes this one started that still run (a DataLoader's workers, a server the script launched)."""
    found = []
    for task in os.listdir(f"/proc/{os.getpid()}/task") if os.path.isdir("/proc/self/task") else ():
        with contextlib.suppress(OSError), open(f"/proc/{os.getpid()}/task/{task}/children", encoding="ascii") as fh:
            found += fh.read().split()
    return found


class _Fresh:
    """What this worker looked like before a run: put back after it, or the reason the worker must retire."""

    def __init__(self):
        self.torch = sys.modules.get("torch")
        self.environ = dict(os.environ)
        self.argv, self.path, self.meta_path = list(sys.argv), list(sys.path), list(sys.meta_path)
        self.path_hooks, self.modules = list(sys.path_hooks), set(sys.modules)
        self.streams = (sys.stdin, sys.stdout, sys.stderr, sys.excepthook)
        self.warnings = (list(warnings.filters), warnings.showwarning)
        self.loggers = {name: _logger_state(lg) for name, lg in _loggers()}
        self.disabled = logging.root.manager.disable
        self.recursion = sys.getrecursionlimit()
        self.umask = os.umask(0)
        os.umask(self.umask)
        self.signals = _handlers()
        self.threads = {t.ident for t in threading.enumerate()}
        self.gc = (gc.isenabled(), gc.get_threshold())
        self.switches = _switches(self.torch)
        self.cuda_started = _cuda_initialized()
        if _GPU_BASELINE[0] is None:  # the worker's first run: what the GPU held before any run
            _GPU_BASELINE[0] = sum(_gpu_allocated(self.torch) or [0])

    def restore(self, report):
        """Put back what can be; the reason this worker must retire instead, or ""."""
        why = self._unkeepable(report)
        os.environ.clear()
        os.environ.update(self.environ)
        sys.argv[:], sys.path[:], sys.meta_path[:], sys.path_hooks[:] = (
            self.argv,
            self.path,
            self.meta_path,
            self.path_hooks,
        )
        sys.path_importer_cache.clear()
        sys.stdin, sys.stdout, sys.stderr, sys.excepthook = self.streams
        tops = _bootstrap._library_tops()
        for name in set(sys.modules) - self.modules:  # the script's own modules: imported afresh by the next run
            top = name.split(".")[0]
            if top not in tops and top not in sys.stdlib_module_names:
                del sys.modules[name]
        warnings.filters[:], warnings.showwarning = self.warnings
        # a new filters version empties every module's once-only registry: a warning shows again, as when fresh
        getattr(warnings, "_filters_mutated", getattr(warnings, "_filters_mutated_lock_held", lambda: None))()
        for name, logger in _loggers():  # one the run made is put back as a fresh getLogger makes it
            level, handlers, propagate, disabled = self.loggers.get(name, (logging.NOTSET, [], True, False))
            logger.setLevel(level)
            logger.handlers[:], logger.propagate, logger.disabled = handlers, propagate, disabled
        logging.disable(self.disabled)
        sys.setrecursionlimit(self.recursion)
        os.umask(self.umask)
        (gc.enable if self.gc[0] else gc.disable)()
        gc.set_threshold(*self.gc[1])
        dynamo = sys.modules.get("torch._dynamo")
        if dynamo is not None:  # compiled graphs and recompile counts are a fresh interpreter's to make
            with contextlib.suppress(Exception):
                dynamo.reset()
        if self.torch is not None:
            why = why or ", ".join(_put_back(self.torch, self.switches, _switches(self.torch)))
        _reseed_all()
        # a warm worker never runs atexit hooks (it ends with os._exit, as every warm run does): what a run
        # registered (each run of E4B's twin registered one) would only keep its objects alive
        getattr(atexit, "_clear", lambda: None)()
        return why

    def _unkeepable(self, report):
        """Every reason found, joined (what retires workers is then known whole from one run's log), or ""."""
        failure = (report or {}).get("exception") or {}
        # a daemon thread too: it runs on into the next run, and may print into its files (tqdm's monitor only sleeps)
        threads = [
            t.name
            for t in threading.enumerate()
            if t.ident not in self.threads and t.is_alive() and type(t).__name__ != "TMonitor"
        ]
        # CUDA reads these once, when it starts: a run that started it under other values fixed them for the next
        cuda_env = (
            not self.cuda_started and _cuda_initialized() and _cuda_settings(os.environ) != _cuda_settings(self.environ)
        )
        checks = [
            (
                os.environ.get("MINREPRO_TRACE") or os.environ.get("MINREPRO_PROFILE") or _bootstrap._EMULATED,
                "a traced, profiled or emulating run",
            ),
            (any(kind in failure.get("type", "") for kind in ("OutOfMemoryError", "AcceleratorError")), "a GPU error"),
            (any(text in failure.get("message", "") for text in _CUDA_FAILURE), "a CUDA error"),
            (sys.gettrace() is not None or sys.getprofile() is not None, "a trace function"),
            (threads, f"a thread still running ({', '.join(sorted(set(threads)))})"),
            (_children(), "a child process still running"),
            (_handlers() != self.signals, "a signal handler"),
            (cuda_env, "CUDA started under the run's own CUDA settings"),
        ]
        found = [why for failed, why in checks if failed]
        gpu = _gpu_leftover(self.torch, _GPU_BASELINE[0])
        return "; ".join(found + ([gpu] if gpu else []))


def _cuda_settings(environ):
    return {k: v for k, v in environ.items() if k.startswith(("CUDA_", "PYTORCH_", "NCCL_", "NVIDIA_"))}


def _loggers():
    return [("", logging.root)] + [(n, lg) for n, lg in logging.root.manager.loggerDict.items() if hasattr(lg, "level")]


def _logger_state(logger):
    return logger.level, list(logger.handlers), logger.propagate, logger.disabled


def _handlers():
    found = {}
    for number in signal.valid_signals():
        with contextlib.suppress(ValueError, OSError):
            found[number] = signal.getsignal(number)
    return found


def _gpu_allocated(torch):
    if torch is None or not torch.cuda.is_initialized():
        return None
    return [torch.cuda.memory_allocated(d) for d in range(torch.cuda.device_count())]


# bytes the runs in one worker may leave on the GPU, all together, as the libraries' caches (bitsandbytes keeps its
# 1 KiB quantization map there: the E4B twin's runs held exactly that after each); beyond it the worker retires
GPU_CACHE_ALLOWANCE = 64 * 2**20
_GPU_BASELINE = [None]


def _gpu_leftover(torch, before):
    """ "" where the GPU is as the worker's first run found it (no error pending, its memory given back but for the
    allowance), else what is not. `before`: what was allocated before that first run."""
    if torch is None or not torch.cuda.is_initialized():
        return ""
    try:
        for device in range(torch.cuda.device_count()):
            torch.cuda.synchronize(device)
    except Exception:  # a sticky error: every later kernel of this process would fail
        return "a CUDA error"
    gc.collect()
    # cuBLAS keeps a workspace per handle in the caching allocator: a fresh run makes its own
    getattr(torch._C, "_cuda_clearCublasWorkspaces", lambda: None)()
    torch.cuda.empty_cache()
    grown = sum(_gpu_allocated(torch)) - before
    if grown > GPU_CACHE_ALLOWANCE:
        return f"GPU memory still held ({grown / 2**20:.0f} MiB)"
    for device in range(torch.cuda.device_count()):
        torch.cuda.reset_peak_memory_stats(device)
    return ""


def _reseed_all():
    """Fresh seeds, as a new interpreter draws them (random, numpy's global state, torch's generators)."""
    import random

    random.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()
    _reseed()


def reuse():
    """Serve jobs until a run leaves what `_Fresh` cannot put back (the worker retires, exiting with the run's code),
    REUSE_LIMIT is reached, or the job lines end. Each run's answer (its code) is sent as soon as the run has ended,
    and whether the worker stays once it has put the run's leftovers back: on a GPU the put-back (a garbage
    collection, the CUDA cache emptied) took a share of each twin's run that the search would otherwise wait for."""
    # the job lines' pipes and the worker log, apart from each run's files (a run's stdin is /dev/null)
    jobs, protocol, log = os.fdopen(os.dup(0), "r", encoding="utf-8"), os.dup(1), os.dup(2)
    home = os.getcwd()  # where the worker waits: the client removes a run's directory once it has the answer
    for runs in range(1, REUSE_LIMIT + 1):
        line = jobs.readline()
        if not line:
            os._exit(0)
        job = json.loads(line)
        fresh = _Fresh()
        code, report, why = 70, None, ""
        try:
            _redirect(job)
            if job.get("profile"):
                os.environ["MINREPRO_PROFILE"] = job["profile"]
            code = _bootstrap.execute(job["script"], job["args"], job["report"], job.get("path0"))
            _flush_streams()
            with contextlib.suppress(OSError, ValueError), open(job["report"], encoding="utf-8") as fh:
                report = json.load(fh)
        except BaseException as exc:  # the run did not end as runs do: this process is in no known state
            why = f"its run ended abnormally ({type(exc).__name__})"
        with contextlib.suppress(OSError):
            os.chdir(home)
        os.write(protocol, (json.dumps({"code": code, "answered": True}) + "\n").encode())
        if not why:
            try:
                why = fresh.restore(report) or ("its run limit" if runs == REUSE_LIMIT else "")
            except BaseException as exc:  # putting back failed: this process is in no known state
                why = f"restoring it failed ({type(exc).__name__})"
        os.dup2(protocol, 1)
        os.dup2(log, 2)
        os.write(protocol, (json.dumps({"kept": not why, "why": why}) + "\n").encode())
        if why:
            os._exit(code)


# a warm worker's priority below the cold runs': where the cores are short (a twin's cold runs beside the pools'
# imports), the runs the reduction waits for (the original's, the twin's, the guard's, the verification's) go first
WORKER_NICENESS = 10


def main():
    with contextlib.suppress(OSError, AttributeError):  # a platform without nice: the default priority
        os.nice(WORKER_NICENESS)
    mode, modules = sys.argv[1], sys.argv[2]
    if modules.startswith("@"):  # a run's recorded modules: too many for one argument
        with open(modules[1:], encoding="utf-8") as fh:
            modules = fh.read()
    modules = [m for m in modules.replace("\n", ",").split(",") if m]
    started = _preload(modules, trials=mode == "fork")
    # what the imports made lives as long as the worker: no collection walks it again (a reused worker collects after
    # each run to see what GPU memory the run left; walking the libraries made that collection most of the put-back)
    gc.collect()
    gc.freeze()
    _emit(started)
    if mode == "fork":
        serve(on_eof=_close_snapshots)
    elif mode == "reuse":
        reuse()
    else:
        single()


if __name__ == "__main__":
    main()
