#!/usr/bin/env bash
# Explore's two-GPU rows that no session diagnosed (docs/findings.md, issue 37), and family AB's case: each script
# under `minrepro signature --placement` on every set, side by side. Each output says the failure (or the pass), the
# map each load and dispatch made, the hooks, and the devices of the modules and tensors on the failing stack.
# Needs the sets' nox envs (.nox/minrepro-SET, made by `nox -s minrepro`). Output: $OUT/rows.tgz.
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); export MINREPRO_SCENARIO_CACHE=$work/cache PYTHONPATH=$PWD
found=results/explore; min=candidates/runtimeerror
rows="reporter-mat2:$found/cuda2-tiny-reporter/$min-expected-all-tensors-to-be-on-the-s.min.py
newest-mat2:$found/cuda2-tiny-newest/$min-expected-all-tensors-to-be-on-the-s.min.py
newest-indices:$found/cuda2-tiny-newest/$min-indices-should-be-either-on-cpu-or-.min.py
ab:minrepro/catalog/cases/peft_redispatch_drops_input_hook.py"
for row in $rows; do
  for s in pinned reporter newest; do
    [ -x .nox/minrepro-$s/bin/python ] || continue
    timeout ${ROW_SECONDS:-300} .nox/minrepro-$s/bin/python -m minrepro signature "${row#*:}" --placement \
      > "$work/${row%%:*}-$s.txt" 2>&1 &
  done
done
wait
tar czf "$OUT/rows.tgz" -C "$work" --exclude cache . && rm -rf "$work"
