"""Benchmark: `minrepro reduce` with default settings on inputs written as users run them: an argparse job that needs
its arguments, a job whose settings are in a YAML file, a notebook exported from Colab, a module run
with `-m`, a script meant for `accelerate launch` with one process, and a chat job that loads a tokenizer from its
local checkpoint. Each fails on the pinned set with a library
bug on CPU (family C: Gemma 4's shared-KV KeyError after PEFT's redispatch), at tiny size.

    python benchmarks/inputs.py run --python PINNED/bin/python --good-python NEWEST/bin/python [--rows a,b]
        [--results benchmarks/results/inputs/cpu.json]
    python benchmarks/inputs.py table --results benchmarks/results/inputs/cpu.json

`run` reduces each row one at a time (`python -m minrepro reduce ... --python PINNED --json`, nothing else), from
benchmarks/inputs/ as the working folder, writing each output into a scratch folder; then judges each output cold:
`verified` is the reduction's own cold check (it exits 0 only when its result fails the same way again), `faithful`
that the output passes under --good-python, where the bug is fixed. `table` prints the Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INPUTS = ROOT / "benchmarks" / "inputs"
sys.path.insert(0, str(ROOT))

from minrepro.harness.runner import run_script  # noqa: E402
from minrepro.reducers.source import code_lines  # noqa: E402

# name -> (what it is, the input files, the reduce command's arguments after `reduce`)
ROWS = {
    "argparse": (
        "argparse job with required arguments",
        ["adapter_smoke.py"],
        [
            "adapter_smoke.py",
            "--",
            "--hidden",
            "64",
            "--layers",
            "4",
            "--kv-shared",
            "2",
            "--target",
            "q_proj",
            "--offload",
            "lm_head=disk",
            "--new-tokens",
            "2",
        ],
    ),
    "yaml-config": (
        "settings in a YAML file",
        ["offload_eval.py", "offload_eval.yaml"],
        ["offload_eval.py", "--", "--config", "offload_eval.yaml"],
    ),
    "notebook": (
        "Colab-style notebook (installs, %env, magics, outputs)",
        ["colab_offload.ipynb"],
        ["colab_offload.ipynb"],
    ),
    "module": (
        "`-m` module with a relative import",
        ["evalpkg/__init__.py", "evalpkg/settings.py", "evalpkg/generate.py"],
        ["-m", "evalpkg.generate", "--", "--preset", "tiny"],
    ),
    "accelerate-launch": (
        "script for `accelerate launch`, one process",
        ["launch_eval.py"],
        ["--", "accelerate", "launch", "--cpu", "--num_processes", "1", "launch_eval.py", "--tokens", "2"],
    ),
    "tokenizer": (
        "a local checkpoint with its tokenizer (made first by make_chat_checkpoint.py)",
        ["chat_eval.py"],
        ["chat_eval.py", "--", "--checkpoint", "chat_ckpt"],
    ),
}
# rows whose input needs files made first, in its folder, with the env it fails in
SETUP = {"tokenizer": ["make_chat_checkpoint.py", "--out", "chat_ckpt"]}


def input_lines(files: list[str]) -> int:
    """Code lines of what the user wrote: the Python files, a notebook's code cells."""
    total = 0
    for name in files:
        path = INPUTS / name
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text())["cells"]
            total += sum(code_lines_of("".join(c["source"])) for c in cells if c["cell_type"] == "code")
        elif path.suffix == ".py":
            total += code_lines(path.read_text())
    return total


def code_lines_of(text: str) -> int:
    """Non-blank, non-comment lines (a notebook cell may hold magics, which `code_lines` cannot parse)."""
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def run_row(name: str, python: str, good: str | None, work: Path) -> dict:
    what, files, argv = ROWS[name]
    folder = work / name
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(INPUTS, folder, ignore=shutil.ignore_patterns("__pycache__", "*.min.py"))
    if name in SETUP:
        subprocess.run([python, *SETUP[name]], cwd=folder, check=True, capture_output=True)
    out = folder / f"{name}.min.py"
    split = argv.index("--") if "--" in argv else len(argv)
    command = [
        sys.executable,
        "-m",
        "minrepro",
        "reduce",
        *argv[:split],
        "--python",
        python,
        "--json",
        "-o",
        str(out),
        "--workdir",
        str(work / f"{name}-state"),
        "--fresh",
        *argv[split:],
    ]
    started = time.monotonic()
    environ = _environ()
    paths = os.pathsep.join(filter(None, [str(ROOT), environ.get("PYTHONPATH")]))
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, env={**environ, "PYTHONPATH": paths})
    seconds = time.monotonic() - started
    row = {
        "name": name,
        "what": what,
        # minrepro's options go before `--`: what follows belongs to the user's run
        "command": " ".join(["minrepro reduce", *argv[:split], "--python PINNED", *argv[split:]]),
        "input_lines": input_lines(files),
        "seconds": round(seconds, 1),
        "exit": done.returncode,
        "error": done.stderr.strip().splitlines()[-1] if done.returncode else "",
    }
    if done.returncode == 0:
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        row.update(
            output_lines=summary["output_lines"],
            verified=True,
            signature=summary["signature"],
            guard=summary["guard_why"],
            output=out.read_text(),
        )
        if good:
            with tempfile.TemporaryDirectory() as scratch:
                copy = Path(scratch) / out.name
                copy.write_text(out.read_text())
                passed = [run_script(copy, python=good, timeout=600, isolated=True).signature is None for _ in range(2)]
            row["faithful"] = all(passed)
    else:
        row.update(output_lines=None, verified=False)
    return row


def _environ() -> dict:
    return dict(os.environ)


def table(rows: list[dict]) -> str:
    lines = [
        "| input | what | input lines | output lines | seconds | verified | faithful |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        faithful = {True: "yes", False: "NO", None: "not run"}[r.get("faithful")]
        lines.append(
            f"| `{r['command']}` | {r['what']} | {r['input_lines']} | {r.get('output_lines') or '-'} | "
            f"{r['seconds']:.0f} | {'yes' if r['verified'] else 'NO: ' + r['error'][:80]} | {faithful} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--python", required=True, help="the env the inputs fail in (the pinned set)")
    run.add_argument("--good-python", help="an env where the bug is fixed (the newest set): judges `faithful`")
    run.add_argument("--rows", help=f"comma-separated, of {', '.join(ROWS)} (default: all)")
    run.add_argument("--results", help="write the rows here as JSON")
    run.add_argument("--work", default=str(ROOT / ".minrepro" / "bench-inputs"), help="scratch folder")
    show = sub.add_parser("table")
    show.add_argument("--results", required=True)
    args = parser.parse_args()
    if args.command == "table":
        print(table(json.loads(Path(args.results).read_text())["rows"]))
        return 0
    names = args.rows.split(",") if args.rows else list(ROWS)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        rows.append(run_row(name, args.python, args.good_python, work))
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "output"}), file=sys.stderr, flush=True)
    if args.results:
        Path(args.results).parent.mkdir(parents=True, exist_ok=True)
        Path(args.results).write_text(
            json.dumps({"python": args.python, "good_python": args.good_python, "rows": rows}, indent=1) + "\n"
        )
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
