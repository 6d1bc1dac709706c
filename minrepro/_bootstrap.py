"""Run a script as ``__main__`` and record how it ended, as JSON, for minrepro's runner.

Executed by path (``python _bootstrap.py SCRIPT ARGS...``) under whatever interpreter the user names, so it
uses the standard library only and never imports minrepro. The record goes to the file named by
``MINREPRO_REPORT``; the script itself sees an ordinary ``sys.argv`` and ``sys.path``.
"""

import faulthandler
import json
import os
import runpy
import signal
import sys
import traceback


def _library_tops():
    """Top-level import names that belong to installed distributions (minrepro itself excluded)."""
    try:
        from importlib.metadata import packages_distributions

        return set(packages_distributions()) - {"minrepro"}
    except Exception:  # a broken metadata dir must not hide the user's failure
        return set()


def _type_name(exc):
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _frames(tb, tops):
    out = []
    for frame, lineno in traceback.walk_tb(tb):
        module = frame.f_globals.get("__name__") or ""
        code = frame.f_code
        out.append(
            {
                "file": code.co_filename,
                "line": lineno,
                "module": module,
                "function": getattr(code, "co_qualname", code.co_name),
                "library": module.split(".")[0] in tops and module != "__main__",
            }
        )
    return out


def _describe(exc, tops):
    try:
        message = str(exc)
    except Exception:
        message = "<unprintable>"
    causes, seen, link = [], {id(exc)}, exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        causes.append(_type_name(link))
        link = link.__cause__ or (None if link.__suppress_context__ else link.__context__)
    return {
        "type": _type_name(exc),
        "message": message,
        "frames": _frames(exc.__traceback__, tops),
        "causes": causes,
    }


def _write(path, record):
    if path:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(record, fh)


def execute(script, args, report, path0=None):
    """Run ``script`` as __main__ with ``args``; record how it ended in ``report``; return the exit code.

    Also used in-process by the fork server's children and the warm workers."""
    sys.argv = [script, *args]
    sys.path.insert(0, path0 or os.path.dirname(os.path.abspath(script)))
    faulthandler.enable()  # segfaults and aborts leave a Python stack on stderr
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=False)  # the runner asks for a stack on timeout
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        _write(report, {"exit": code})
        return code
    except BaseException as exc:
        _write(report, {"exception": _describe(exc, _library_tops())})
        traceback.print_exc()
        return 1
    _write(report, {"exit": 0})
    return 0


def main():
    report = os.environ.pop("MINREPRO_REPORT", None)
    sys.path.pop(0)  # this file's directory: the script's own directory goes first instead
    code = execute(sys.argv[1], sys.argv[2:], report, os.environ.pop("MINREPRO_PATH0", None))
    sys.stdout.flush()
    sys.stderr.flush()
    if code:
        os._exit(code)  # skip atexit/finalizers of a possibly corrupted library state


if __name__ == "__main__":
    main()
