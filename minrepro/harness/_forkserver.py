"""Warm execution for the reducer: import the heavy libraries once, then run each script in a fresh process.

Executed by path under the target interpreter (standard library only, like `_bootstrap`). Two modes:

  fork    a server: for each job line on stdin it forks a child that runs the script and exits; the
          server reports {"id", "pid"} when it forks and {"pid", "code"} when the child ends.
  single  a pre-warmed worker: reads one job, runs it in this process, exits with its code.

A job is {"id", "script", "args", "cwd", "path0", "report", "stdout", "stderr"}. CUDA must not be initialized
before a fork (a forked child cannot re-initialize it): torch.cuda.is_available() is answered through
NVML, and the ready line says whether CUDA got initialized anyway so the client can fall back.
"""

import importlib
import json
import os
import tempfile
import select
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _bootstrap  # noqa: E402

sys.path.pop(0)


def _emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _cuda_initialized():
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _preload(names):
    """Import the names in order; stop at the first that initializes CUDA (bitsandbytes does on a GPU box) and
    name it, so the client can start again without it: a forked child could not use CUDA otherwise."""
    os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")
    loaded = []
    for name in names:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except Exception:  # the script will report its own import error when it runs
            pass
        if _cuda_initialized():
            return {"ready": True, "loaded": loaded, "cuda_initialized": True, "initialized_by": name, "pid": os.getpid()}
    return {"ready": True, "loaded": loaded, "cuda_initialized": False, "pid": os.getpid()}


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
        code = _bootstrap.execute(job["script"], job["args"], job["report"], job.get("path0"))
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve():
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    pending = b""
    while True:
        try:
            ready, _, _ = select.select([0, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in ready:
            os.read(wake_r, 4096)
            _reap()
        if 0 in ready:
            chunk = os.read(0, 65536)
            if not chunk:
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                _fork(json.loads(line))


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
    mode, modules = sys.argv[1], [m for m in sys.argv[2].split(",") if m]
    _emit(_preload(modules))
    serve() if mode == "fork" else single()


if __name__ == "__main__":
    main()
