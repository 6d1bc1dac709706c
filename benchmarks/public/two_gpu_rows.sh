#!/usr/bin/env bash
# Explore's two-GPU rows (docs/findings.md, issue 37) and family AB's case: each script under
# `minrepro signature --placement` on every set, side by side. Each output says the failure (or the pass), the map
# each load and dispatch made, the hooks, and the devices of the modules and tensors on the failing stack.
# Needs the sets' nox envs (.nox/minrepro-SET, made by `nox -s minrepro`).
# With PATCHED=1, each set's env is a minrepro-made one (`minrepro env create`, offline from $MINREPRO_WHEELHOUSE)
# with every catalog patch that applies to the set (`minrepro patch apply`): the rows that a diagnosis tied to a
# family (AB, AC, AE) must then pass, or fail otherwise. Output: $OUT/rows.tgz (rows-patched.tgz with PATCHED=1).
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); export MINREPRO_SCENARIO_CACHE=$work/cache PYTHONPATH=$PWD
found=results/explore; min=candidates/runtimeerror
rows="reporter-mat2:$found/cuda2-tiny-reporter/$min-expected-all-tensors-to-be-on-the-s.min.py
newest-mat2:$found/cuda2-tiny-newest/$min-expected-all-tensors-to-be-on-the-s.min.py
newest-indices:$found/cuda2-tiny-newest/$min-indices-should-be-either-on-cpu-or-.min.py
ab:minrepro/catalog/cases/peft_redispatch_drops_input_hook.py"
python_of() {  # python_of SET: the interpreter the rows run under
  if [ "${PATCHED:-0}" = 1 ]; then echo "$work/env-$1/bin/python"; else echo ".nox/minrepro-$1/bin/python"; fi
}
if [ "${PATCHED:-0}" = 1 ]; then
  for s in pinned reporter newest; do
    ( python3 -m minrepro env create --set $s --wheelhouse "$MINREPRO_WHEELHOUSE" "$work/env-$s" \
      && python3 -m minrepro patch apply --set $s --into "$work/env-$s" ) > "$work/patching-$s.txt" 2>&1 &
  done
  wait
fi
for row in $rows; do
  for s in pinned reporter newest; do
    py=$(python_of $s); [ -x "$py" ] || continue
    timeout ${ROW_SECONDS:-300} "$py" -m minrepro signature "${row#*:}" --placement > "$work/${row%%:*}-$s.txt" 2>&1 &
  done
done
wait
suffix=$([ "${PATCHED:-0}" = 1 ] && echo -patched)
tar czf "$OUT/rows$suffix.tgz" -C "$work" --exclude cache --exclude 'env-*' . && rm -rf "$work"
