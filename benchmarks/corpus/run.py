#!/usr/bin/env python
"""Run the corpus' scripts cold, as their users do (`python script.py`, the checkpoint named by an environment
variable), and compare each outcome with corpus.toml.

    python benchmarks/corpus/run.py --python PINNED/bin/python --set pinned --checkpoints OUT
    python benchmarks/corpus/run.py --python FIXED/bin/python --set pinned-patched --checkpoints OUT gemma3_chat
    python benchmarks/corpus/run.py --python ENV/bin/python --checkpoints OUT --results runs.jsonl   # no comparison

One script at a time (each run loads a 80-115M model and pages part of it to disk). Per script: the exit code, the
failure's last line and the family it matches, the script's own line the failure was raised under, and the seconds.
Exits 1 if any outcome differs from the one declared for --set. Standard library only: any interpreter runs it."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


def load_corpus(path: Path = HERE / "corpus.toml") -> dict:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def final_line(stderr: str) -> str:
    """The exception line of the last traceback (the last unindented line after 'Traceback'), or ''."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if not starts:
        return ""
    tail = [line for line in lines[starts[-1] + 1 :] if line and not line[0].isspace()]
    return tail[-1] if tail else ""


def script_frame(stderr: str, script: Path) -> str:
    """The script's own deepest frame in the last traceback: 'func:line: code'."""
    lines = stderr.splitlines()
    found = ""
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            found = ""
        match = FRAME.match(line)
        if match and Path(match["file"]).name == script.name:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found = f"{match['func']}:{match['line']}: {code}"
    return found


def family_of(line: str, signatures: dict[str, str]) -> str:
    for family, text in signatures.items():
        if line.strip() == text:
            return family
    return "other" if line else "no traceback"


def run_one(entry: dict, python: str, checkpoints: Path, timeout: float, signatures: dict[str, str]) -> dict:
    script = HERE / entry["path"]
    env = dict(os.environ)
    env.update({key: value.replace("{out}", str(checkpoints)) for key, value in entry.get("env", {}).items()})
    env.setdefault("PYTHONUNBUFFERED", "1")
    began = time.monotonic()
    try:
        proc = subprocess.run(
            [python, str(script), *entry.get("args", [])],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=script.parent,
        )
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = None
        stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
    seconds = time.monotonic() - began
    last = final_line(stderr) if rc != 0 else ""
    outcome = "pass" if rc == 0 else ("timeout" if rc is None else family_of(last, signatures))
    return {
        "name": entry["name"],
        "rc": rc,
        "outcome": outcome,
        "last_line": last,
        "at": script_frame(stderr, script) if rc != 0 else "",
        "seconds": round(seconds, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="scripts to run (default: all)")
    parser.add_argument("--python", required=True, help="the interpreter of the environment to run them in")
    parser.add_argument("--checkpoints", required=True, type=Path, help="make_checkpoints.py's --out")
    parser.add_argument("--set", dest="set_name", help="compare with corpus.toml's expected outcome for this set")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--results", type=Path, help="append one JSON line per run here")
    args = parser.parse_args()

    corpus = load_corpus()
    signatures = corpus["signature"]
    entries = corpus["script"]
    known = {e["name"] for e in entries}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"not in corpus.toml: {', '.join(unknown)}")
    if args.names:
        entries = [e for e in entries if e["name"] in args.names]
    checkpoints = args.checkpoints.resolve()
    missing = sorted({e["arch"] for e in entries if not (checkpoints / e["arch"] / "adapter").is_dir()})
    if missing:
        parser.error(f"no checkpoint for {', '.join(missing)} under {checkpoints}: run make_checkpoints.py first")

    differ = 0
    for entry in entries:
        row = run_one(entry, args.python, checkpoints, args.timeout, signatures)
        if args.set_name:
            row["set"] = args.set_name
            row["expected"] = entry["expected"].get(args.set_name, "")
            row["ok"] = row["expected"] == row["outcome"]
            differ += not row["ok"]
        mark = "" if "ok" not in row else ("ok " if row["ok"] else "DIFFERS ")
        detail = row["last_line"] or "exit 0"
        print(f"{mark}{row['name']:<24} rc={row['rc']} {row['outcome']:<6} {row['seconds']:>6.1f}s  {detail[:110]}")
        if row["at"]:
            print(f"{'':>{len(mark) + 25}}at {row['at'][:110]}")
        sys.stdout.flush()
        if args.results:
            with open(args.results, "a") as fh:
                fh.write(json.dumps(row) + "\n")
    if args.set_name:
        print(f"{len(entries) - differ} of {len(entries)} as declared for {args.set_name}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
