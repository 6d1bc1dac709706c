#!/usr/bin/env python
"""The fork server's shared-prefix timeout, on a real candidate: the CPU bench's output with its twin's config dropped
(`AutoConfig.for_model('gemma3_text')`: the full-size Gemma 3, what `drop_arguments` proposed) in three candidates
that share that prefix, 5 s timeout each. The second asks for a snapshot of the prefix; before the fix it waited
for the prefix (358 s and 342 s in the bench), now it is given up at the timeout and run whole.

    python benchmarks/scale/snapshot_prefix.py OUTPUT.min.py --python PINNED/bin/python [--root CHECKOUT]

--root: the minrepro checkout whose fork server runs it (another commit's worktree, to compare)."""

from __future__ import annotations

import argparse
import ast
import sys
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("output", type=Path)
parser.add_argument("--python", required=True)
parser.add_argument("--root", default=str(Path(__file__).resolve().parents[2]))
args = parser.parse_args()
sys.path.insert(0, args.root)
from minrepro.harness.executors import ForkServerExecutor  # noqa: E402

source = "\n".join(line for line in args.output.read_text().splitlines() if not line.startswith("#"))
full = source.replace(
    "transformers.AutoConfig.for_model('gemma3_text', **{'hidden_size': 64, 'num_hidden_layers': 2})",
    "transformers.AutoConfig.for_model('gemma3_text')",
)
assert full != source, "not the CPU bench's output: no twin config to drop"
folder = Path(tempfile.mkdtemp(prefix="snapshot-prefix-"))
variants = [full, full.replace("offload_dir=tempfile.mkdtemp(), ", ""), full.replace("'disk'}", "'cpu'}")]
heavy = [
    ast.unparse(s)
    for s in ast.parse(full).body
    if any(k in ast.unparse(s) for k in ("from_pretrained", "save_pretrained", "Gemma3ForCausalLM("))
]
executor = ForkServerExecutor(args.python, ["accelerate", "peft", "transformers", "tempfile"], 2)
executor.set_heavy(heavy)
print("| candidate | seconds | outcome |\n|---|---|---|")
for i, text in enumerate(variants):
    path = folder / f"c{i}.py"
    path.write_text(text)
    began = time.monotonic()
    run = executor.run_many([path], 5.0, folder)[0]
    print(
        f"| {i + 1} | {time.monotonic() - began:.1f} | {run.signature.kind if run.signature else 'passes'} |",
        flush=True,
    )
print(f"\nprefixes given up: {len(getattr(executor, 'refused_prefixes', ()))}")
executor.close()
