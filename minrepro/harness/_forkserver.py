"""Warm execution for the reducer: import the heavy libraries once, then run each script in a fresh process.

Executed by path under the target interpreter (standard library only, like `_bootstrap`). Two modes:

  fork    a server: for each job line on stdin it forks a child that runs the script and exits; the
          server reports {"id", "pid"} when it forks and {"pid", "code"} when the child ends.
  single  a pre-warmed worker: reads one job, runs it in this process, exits with its code.

A job is {"id", "script", "args", "cwd", "path0", "report", "stdout", "stderr"}, and "profile" for a profiled run.
CUDA must not be initialized before a fork (a forked child cannot re-initialize it): torch.cuda.is_available() is
answered through NVML, and the ready line says whether CUDA got initialized anyway so the client can fall back.
"""

import importlib
import json
import os
import tempfile
import time
import select
import signal
import sys

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
    child could not use CUDA otherwise; the trial that succeeds carries on as the server and its parent exits. A
    restart per such name cost 12-18 s each on an H100 box (4 starts, 58 s, for the newest set's catalog).
    Should CUDA get initialized anyway (a path around `torch.cuda._lazy_init`), stop and name the culprit so the
    client can start again without it."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    # after "--": a run's recorded modules (thousands), imported here without trials, as before them; with trials
    # on an H100 every reduction's server exited during such a preload (cause not found), the catalog's never did
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
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


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
    # snapshot hangs in its first one (each such candidate timed out, and was refused, while its cold run
    # passed in 3 s). One intra-op thread here and in the children keeps the pool from ever starting.
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)
    _bootstrap.prepare(job["script"], job["args"], job.get("path0"))
    began = time.monotonic()
    # the prefix runs under the candidate's timeout: its jobs wait for it with no process of their own to expire
    # (a candidate that dropped a twin's config built the full-size model here for 345 s, with a 5 s timeout)
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
    # with "Cannot re-initialize CUDA in forked subprocess" (520 of 605 candidates of a GPU training script did,
    # and were refused). Every job sent here is handed back, to run whole, and the client stops snapshotting.
    refused = "slow" if slow else "cuda" if _cuda_initialized() else ""  # why every job is handed back, if so
    shared = sorted(os.listdir(prefix_cwd))  # what the prefix wrote into its cwd: every child shares it
    # and what it wrote anywhere in its directories: a child that changes it (a suffix saving an adapter into the
    # prefix's temp dir) would hand it to every later child, which a cold run never sees. A benchmark reduction kept
    # a script that loads an adapter it no longer saves, and the final cold check refused it.
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


def main():
    mode, modules = sys.argv[1], sys.argv[2]
    if modules.startswith("@"):  # a run's recorded modules: too many for one argument
        with open(modules[1:], encoding="utf-8") as fh:
            modules = fh.read()
    modules = [m for m in modules.replace("\n", ",").split(",") if m]
    _emit(_preload(modules, trials=mode == "fork"))
    serve(on_eof=_close_snapshots) if mode == "fork" else single()


if __name__ == "__main__":
    main()
