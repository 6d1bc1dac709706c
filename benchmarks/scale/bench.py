#!/usr/bin/env python
"""Reduce at real scale, end to end, as a user would: a setup script leaves a local checkpoint, the user's own job
script (argparse, a local checkpoint directory, an eval loop, a server, a training step) fails on it, and
`minrepro reduce SCRIPT --python ENV` runs on a copy with its DEFAULTS (no --jobs, no --max-seconds: a row that sets
one says so). Prints the row, the time per phase and what each pass removed per minute; `--results FILE` appends
the row as a JSON line, and `--table FILE...` prints the tables again from recorded rows.

    python benchmarks/scale/bench.py --case cpu-gemma3-eval --python PINNED/bin/python
    python benchmarks/scale/bench.py --case gpu-gemma4-e4b-serve --python NEWEST/bin/python --fixed-python FIXED/bin/py
    python benchmarks/scale/bench.py --table benchmarks/results/scale/defaults.jsonl [--doc docs/benchmarks.md]

The checkpoint is built once per --workdir (by the case's setup, with --python). The user's script is copied, never
edited; minrepro's output goes beside the copy. The output is then run cold where it was reduced (it must fail the
same way) and, with --fixed-python (an env where the bug is fixed), there too: it must pass (exit 0). Those runs
go side by side with a cold run of the original as it is, which the output's failure is compared with."""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
from minrepro.dirs import scrubbed  # noqa: E402
from minrepro.harness.resources import cores  # noqa: E402
from minrepro.harness.runner import run_script  # noqa: E402
from minrepro.harness import signature as signature_module  # noqa: E402
from minrepro.reducers.source import code_lines, code_tokens  # noqa: E402
from minrepro.reduction.summary import slots_busy  # noqa: E402

# case -> (setup arch, the user's script, the env var its checkpoint default reads, the user's other env)
CASES = {
    "cpu-gemma3-eval": ("gemma3-100m", "eval_adapter.py", "EVAL_CKPT", {}),
    "cpu-gemma3-serve": ("gemma3-100m", "serve_adapter_cpu.py", "EVAL_CKPT", {}),
    # E2B fits the scripts' default budget (1 GiB GPU, 8 GiB RAM) without disk: it passed 3 of 3 runs on two H200s.
    # 6 GiB of RAM, the budget docs/scenarios.md measured for E2B's spill, is how its user runs it.
    "gpu-gemma4-e2b-eval": ("gemma4-e2b", "eval_gemma4_gpu.py", "GEMMA4_CKPT", {"GEMMA4_CPU_BUDGET": "6GiB"}),
    "gpu-gemma4-e4b-eval": ("gemma4-e4b", "eval_gemma4_gpu.py", "GEMMA4_CKPT", {}),
    "gpu-gemma4-e4b-serve": ("gemma4-e4b", "serve_gemma4_gpu.py", "GEMMA4_CKPT", {}),
    "gpu-gemma4-e4b-qlora": ("gemma4-e4b", "qlora_step_gemma4_gpu.py", "GEMMA4_CKPT", {}),
    # scripts from outside the project's own jobs: on the good path they read what the failing run never reached
    "gpu-gemma4-e4b-smoke": ("gemma4-e4b", "corpus_gpu/serve_prompts_gemma4.py", "GEMMA4_CKPT", {}),
}
CORPUS = ROOT / "benchmarks" / "corpus"  # scripts from outside the project's own jobs: `corpus:NAME` cases


def corpus_cases() -> dict[str, dict]:
    """The corpus's scripts as cases, `corpus:NAME` -> its corpus.toml entry."""
    import tomllib

    data = tomllib.loads((CORPUS / "corpus.toml").read_text(encoding="utf-8"))
    return {f"corpus:{entry['name']}": entry for entry in data["script"]}


TARGET_LINES = 20  # a maintainer's repro: the table says when the reduce first held one this short
OLD_NAMES = {
    "cpu-gemma3": "cpu-gemma3-eval",
    "gpu-gemma4-e2b": "gpu-gemma4-e2b-eval",
    "gpu-gemma4-e4b": "gpu-gemma4-e4b-eval",
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=sorted(CASES) + sorted(OLD_NAMES) + sorted(corpus_cases()))
    parser.add_argument("--python", help="the env the script fails in")
    parser.add_argument("--fixed-python", help="an env where the bug is fixed: the output must pass there")
    parser.add_argument("--label", default="", help="a name for the env in the table (e.g. 'pinned')")
    parser.add_argument("--workdir", default=str(ROOT / ".minrepro" / "scale-bench"))
    parser.add_argument("--limit", type=float, default=None, help="stop reduce (SIGTERM) after this many seconds")
    parser.add_argument("--results", help="append the row as a JSON line here")
    parser.add_argument("--resume", action="store_true", help="continue a stopped reduce (its work dir is kept)")
    parser.add_argument("--setup", action="store_true", help="only build the checkpoint and run the original once")
    parser.add_argument("--table", nargs="+", metavar="FILE", help="print the tables from recorded rows and exit")
    parser.add_argument("--doc", type=Path, help="with --table: write the tables into this page's generated region")
    parser.add_argument(
        "--box-note", default="", help="said of the box in the row (e.g. 'one of two GPUs, beside another reduce')"
    )
    parser.add_argument(
        "--from-log",
        nargs="+",
        metavar="LOG",
        help="rebuild the rows of these runs' logs (their rows file lost) into --results, and exit",
    )
    parser.add_argument("reduce_args", nargs="*", help="after --: flags for `minrepro reduce` (not the defaults)")
    args = parser.parse_args()
    if args.table:
        rows = [json.loads(line) for f in args.table for line in Path(f).read_text().splitlines() if line.strip()]
        text = tables(rows, history=not args.doc)
        if args.doc:
            write_doc(args.doc, args.table, text)
        else:
            print(text)
        return 0
    if args.from_log:
        if not args.results:
            parser.error("--from-log needs --results FILE")
        with open(args.results, "a") as fh:
            for log in args.from_log:
                row = row_from_log(Path(log).read_text(errors="replace"))
                row["box"] = _noted(row["box"], args.box_note)
                fh.write(json.dumps(scrubbed(row)) + "\n")
        return 0
    if not args.case or not args.python:
        parser.error("--case and --python are required (or --table FILE, or --from-log LOG)")
    case = OLD_NAMES.get(args.case, args.case)
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if case.startswith("corpus:"):  # the corpus's checkpoints, all in one folder, built by its own script
        entry = corpus_cases()[case]
        arch, source, root = entry["arch"], CORPUS / entry["path"], work / "corpus"
        builder = [args.python, str(CORPUS / "make_checkpoints.py"), "--arch", arch, "--out", str(root)]
        checkpoint, user_env = root / arch, {k: v.format(out=root) for k, v in entry["env"].items()}
    else:
        arch, script_name, env_var, user_env = CASES[case]
        checkpoint, source = work / arch, HERE / script_name
        builder = [args.python, str(HERE / "make_checkpoint.py"), "--arch", arch, "--out", str(checkpoint)]
        user_env = {env_var: str(checkpoint), **user_env}
    with open(work / f"{arch}.lock", "w") as lock:  # two cases on one checkpoint, side by side: one builds it
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (checkpoint / "adapter" / "adapter_config.json").exists():
            began = time.monotonic()
            subprocess.run(builder, check=True)
            print(f"checkpoint {arch} built in {time.monotonic() - began:.0f} s", file=sys.stderr)
    job = work / "jobs" / f"{case.replace(':', '-')}-{hashlib.sha256(args.python.encode()).hexdigest()[:8]}"
    job.mkdir(parents=True, exist_ok=True)
    script = job / source.name
    shutil.copy(source, script)
    os.environ.update(user_env)
    if args.setup:
        original = _original(script, args.python, job)
        print(f"original: {_first_line(original)} in {original.seconds:.0f} s")
        return 0
    command = [
        sys.executable,
        "-m",
        "minrepro",
        "reduce",
        str(script),
        "--python",
        args.python,
        "--json",
        *([] if args.resume else ["--fresh"]),
        "--workdir",
        str(job / "work"),
        *args.reduce_args,
    ]
    began = time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        stdout, _ = proc.communicate(timeout=args.limit)
    except subprocess.TimeoutExpired:
        proc.terminate()  # what a scheduler does: the best so far must be written
        stdout, _ = proc.communicate()
    seconds = time.monotonic() - began
    print(stdout, end="")
    summary = next((json.loads(line) for line in reversed(stdout.splitlines()) if line.startswith("{")), {})
    out = script.with_name(f"{script.stem}.min.py")
    reduced = out.read_text() if out.exists() else ""
    # the checks after the reduce, side by side: the original as it is (what the output must fail like), the output
    # cold where it was reduced, and where the bug is fixed
    with ThreadPoolExecutor(3) as pool:
        checks = [
            pool.submit(_original, script, args.python, job),
            pool.submit(run_script, out, python=args.python, timeout=1800, isolated=True) if reduced else None,
            pool.submit(run_script, out, python=args.fixed_python, timeout=1800, isolated=True)
            if reduced and args.fixed_python
            else None,
        ]
        original, rerun, fixed = (None if check is None else check.result() for check in checks)
    row = {
        "case": case,
        "env": args.label,
        "box": _noted(_box(), args.box_note),
        "flags": " ".join(args.reduce_args) or "defaults",
        "jobs": summary.get("jobs"),
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "input_lines": code_lines(script.read_text()),
        "output_lines": code_lines(reduced) if reduced else None,
        "input_tokens": code_tokens(script.read_text()),
        "output_tokens": code_tokens(reduced) if reduced else None,
        "original": _first_line(original),
        "original_run_s": round(original.seconds, 1),
        "output_run_s": round(rerun.seconds, 1) if rerun else None,
        "output_fails_same": bool(rerun and rerun.signature == original.signature),
        "output_in_fixed_env": None
        if fixed is None
        else ("passes" if fixed.returncode == 0 and not fixed.signature else _first_line(fixed)),
        "verified": bool(summary) and "NOT VERIFIED" not in reduced,
        **_from_summary(summary),
        "output": reduced,  # the script itself, for what the numbers do not say (what it kept, how it reads)
    }
    print(tables([row]))
    if args.results:
        with open(args.results, "a") as fh:
            fh.write(json.dumps(scrubbed(row)) + "\n")  # a record names no path of the machine it was made on
    return 0 if proc.returncode == 0 else 1


def _noted(box: str, note: str) -> str:
    """The box, with what the run shared it with (once)."""
    return f"{box} ({note})" if note and note not in box else box


def _from_summary(summary: dict) -> dict:
    """What a row takes from the reduce's JSON summary as it is."""
    return {
        "executor": summary.get("executor"),
        "jobs_why": summary.get("jobs_why"),
        "workers": summary.get("workers", ""),
        "maybe_not_minimal": summary.get("maybe_not_minimal"),
        "guard": summary.get("guard_why"),
        "passes_in_good_env": summary.get("passes_in_good_env"),
        "good_run": summary.get("good_run"),
        "phases": summary.get("phases", []),
        "passes": summary.get("passes", []),
        "timeline": summary.get("timeline", []),
        "notes": summary.get("notes", []),
        "twin": summary.get("twin", ""),  # the step of the twin's ladder the search stood on ("": real scale)
        "twin_refused": summary.get("twin_refused", []),  # the steps refused where the bug is fixed, and why
    }


def row_from_log(text: str) -> dict:
    """A row as far as a run's log holds it: the reduce's summary (its JSON line) and the summary table's row that
    the run printed (the box, the wall time, the checks of the output). The output script and the original's run
    are not in the log: those fields are None, and `from_log` says so."""
    lines = text.splitlines()
    summary = next((json.loads(line) for line in reversed(lines) if line.startswith('{"input_lines"')), None)
    # the summary table with a row (a run with flags prints an empty current table first, its row under "Earlier")
    header = next(
        (
            i
            for i, line in enumerate(lines[:-2])
            if line.startswith("| case | env | box | flags |") and lines[i + 2].startswith("|")
        ),
        None,
    )
    if summary is None or header is None:
        raise SystemExit("not a bench.py log: it has no reduce summary or no summary table")
    cells = [c.strip() for c in lines[header + 2].strip("|").split("|")]
    case, env, box, flags, total, in_out, verified, _, fails_same, where_fixed, jobs, _ = cells
    yes = {"yes": True, "NO": False}
    return {
        "case": case,
        "env": env,
        "box": box,
        "flags": flags,
        "jobs": int(jobs) if jobs.isdigit() else summary.get("jobs"),
        "exit": None,
        "seconds": float(total),
        "input_lines": int(in_out.split("->")[0]),
        "output_lines": int(in_out.split("->")[1]),
        "input_tokens": None,
        "output_tokens": None,
        "original": None,
        "original_run_s": None,
        "output_run_s": None,
        "output_fails_same": yes.get(fails_same),
        "output_in_fixed_env": None if where_fixed == "not run" else where_fixed,
        "verified": yes.get(verified),
        **_from_summary(summary),
        "output": None,
        "from_log": True,
    }


def _box() -> str:
    """What the reduction ran on: its cores and the GPU it saw."""
    try:
        names = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.split("\n")
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        names = [n for i, n in enumerate(names) if n and (not visible or str(i) in visible.split(","))]
    except (OSError, subprocess.SubprocessError):
        names = []
    return f"{cores()} cores" + (f", {len(names)} x {names[0]}" if names else ", no GPU")


def _first_line(run) -> str:
    return run.raw_headline.splitlines()[0][:120] if run.raw_headline else "pass"


BEGIN = "<!-- scale tables: generated by `python benchmarks/scale/bench.py --table {files} --doc {doc}` -->"
END = "<!-- end of scale tables -->"


def _summary_table(rows: list[dict]) -> list[str]:
    out = [
        "| case | env | box | flags | total s | lines in -> out | verified | maybe not minimal | output fails the same "
        f"| output where fixed | at once | {TARGET_LINES} lines at |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        out.append(
            f"| {row['case']} | {row.get('env', '')} | {row.get('box', '')} | {row.get('flags', '')} | "
            f"{row['seconds']:.0f} | "
            f"{row['input_lines']} -> {row['output_lines']} | {_yes(row['verified'])} | "
            f"{_yes(row.get('maybe_not_minimal'))} | {_yes(row['output_fails_same'])} | "
            f"{row.get('output_in_fixed_env') or 'not run'} | {row.get('jobs')} | {_reached(row)} |"
        )
    return out


def tables(rows: list[dict], history: bool = True) -> str:
    """The rows of the current defaults (flags "defaults"): one per reduction, then per phase (with what the warm
    pool did with its workers), then what each pass removed per minute, these three also for the latest row of each
    case and env with no current row; then the rows of earlier versions, each saying what has changed since. Without
    `history` (a page), the current rows alone: the superseded ones stay in the rows file."""
    current = [row for row in rows if row.get("flags") == "defaults"]
    earlier = [row for row in rows if row.get("flags") != "defaults"]
    # a case with no row of the current defaults shows its latest row's details (its flags say what changed since)
    measured = {(row["case"], row.get("env")) for row in current}
    latest = {(row["case"], row.get("env")): row for row in earlier if (row["case"], row.get("env")) not in measured}
    # in the detail tables its env says so: "newest (then)"
    then = [{**row, "env": f"{row.get('env', '')} (then)"} for row in latest.values()]
    detailed = [*current, *then]
    summary = _summary_table(current if history else detailed)  # a page: the latest row of each case, said "then"
    out = [*summary, "", "| case | env | phase | seconds | candidates | s per candidate | at once | slots busy |"]
    out.append("|---|---|---|---|---|---|---|---|")
    for row in detailed:
        for phase in row.get("phases", []):
            per = f"{phase['seconds'] / phase['candidates']:.1f}" if phase["candidates"] else ""
            busy = slots_busy(phase)
            out.append(
                f"| {row['case']} | {row.get('env', '')} | {phase['phase']} | {phase['seconds']:.0f} | "
                f"{phase['candidates']} | {per} | {phase['jobs']} | {'' if busy is None else f'{busy:.0%}'} |"
            )
    twins = [row for row in detailed if "twin" in row]
    if twins:  # the step of the twin's ladder each reduce stood on, and why the steps before it were refused
        out += ["", "| case | env | twin | refused where the bug is fixed |", "|---|---|---|---|"]
        out += [
            f"| {r['case']} | {r.get('env', '')} | {r['twin'] or 'none: real scale'} | "
            f"{'; '.join(r.get('twin_refused') or []) or '-'} |"
            for r in twins
        ]
    workers = [row for row in detailed if row.get("workers")]
    if workers:
        out += ["", "| case | env | box | the warm pool's workers |", "|---|---|---|---|"]
        out += [f"| {r['case']} | {r.get('env', '')} | {r.get('box', '')} | {r['workers']} |" for r in workers]
    totals: dict[str, list[float]] = {}
    for row in detailed:
        for record in row.get("passes", []):
            seen = totals.setdefault(record["name"], [0, 0.0, 0, 0])
            seen[0] += record["lines_removed"]
            seen[1] += record["seconds"]
            seen[2] += record["candidates"]
            seen[3] += record["turns"]
    if totals:
        out += ["", "| pass | lines removed | seconds | candidates | turns | lines per minute |"]
        out.append("|---|---|---|---|---|---|")
        for name, (lines, secs, candidates, turns) in sorted(
            totals.items(), key=lambda kv: -kv[1][0] / max(kv[1][1], 1)
        ):
            out.append(
                f"| {name} | {lines} | {secs:.0f} | {candidates} | {turns} | {60 * lines / max(secs, 1e-9):.1f} |"
            )
    if earlier and history:
        out += ["", "Earlier versions of the defaults (the flags column says what has changed since):", ""]
        out += _summary_table(earlier)
    return "\n".join(out)


def write_doc(doc: Path, files: list[str], text: str) -> None:
    """Replace the generated region of `doc` (between its BEGIN and END lines) with `text`."""
    page = doc.read_text(encoding="utf-8")
    begin = BEGIN.format(files=" ".join(files), doc=doc.as_posix())
    try:
        head, rest = page.split(begin, 1)
        _, tail = rest.split(END, 1)
    except ValueError:
        raise SystemExit(f"{doc} has no region from {begin!r} to {END!r}") from None
    doc.write_text(f"{head}{begin}\n\n{text}\n\n{END}{tail}", encoding="utf-8")


def _reached(row: dict) -> str:
    """When the reduce first held a script of at most TARGET_LINES code lines (its summary's timeline; "" for a row
    recorded without one)."""
    if row["input_lines"] <= TARGET_LINES:
        return "0 s"
    return next((f"{s:.0f} s" for s, lines in row.get("timeline", []) if lines <= TARGET_LINES), "")


def timeline_from_progress(text: str) -> list[tuple[float, int]]:
    """(seconds since the start, code lines) at the end of each phase and pass, from a reduce's progress lines
    (`[NAME] done in N s: ...; L code lines`): the timeline of a row recorded before summaries held one, coarser (a
    pass's accepted candidates count at its end)."""
    points, elapsed = [], 0.0
    for match in re.finditer(r"^\s*\[[\w -]+\] done in (\d+) s: .*?; (\d+) code lines", text, re.MULTILINE):
        elapsed += float(match[1])
        points.append((elapsed, int(match[2])))
    return points


def _yes(value) -> str:
    return {True: "yes", False: "NO", None: "?"}.get(value, str(value))


def _original(script: Path, python: str, job: Path):
    """The user's script run once as it is; kept beside the job for the same script, interpreter and signature code
    (a kept run's signature was computed when it ran: a change in what a signature keeps must run it again)."""
    naming = Path(signature_module.__file__).read_text()
    key = hashlib.sha256(f"{script.read_text()}\0{python}\0{naming}".encode()).hexdigest()[:16]
    kept = job / f"original-{key}.pickle"
    if kept.exists():
        return pickle.loads(kept.read_bytes())
    result = run_script(script, python=python, timeout=1800, isolated=True)
    kept.write_bytes(pickle.dumps(result))
    return result


if __name__ == "__main__":
    sys.exit(main())
