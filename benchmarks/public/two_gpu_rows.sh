#!/usr/bin/env bash
# Explore's two-GPU rows (docs/findings.md, issue 37) and family AB's case: each script under
# `minrepro signature --placement` on every set, side by side. Each output says the failure (or the pass), the map
# each load and dispatch made, the hooks, and the devices of the modules and tensors on the failing stack.
# Without PATCHED, the sets' nox envs run them (.nox/minrepro-SET, made by `nox -s minrepro`).
# PATCHED=1: an env per set made by `minrepro env create` (offline from $MINREPRO_WHEELHOUSE) with every catalog
#   patch that applies to the set (`minrepro patch apply`), less the ids in WITHOUT, then the diff THEN if given.
#   The rows a diagnosis tied to a family must then pass, or show what lies behind their first failure.
# ROWS: which rows (default: all). AB's candidate form (docs/findings.md) against the row that met its gap:
#   PATCHED=1 WITHOUT=peft/peft-redispatch-drops-input-hook THEN=benchmarks/public/ab_main_device_rule.diff \
#   ROWS="newest-indices ab" bash benchmarks/public/two_gpu_rows.sh
# Output: $OUT/rows.tgz (rows-patched.tgz with PATCHED=1).
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); export MINREPRO_SCENARIO_CACHE=$work/cache PYTHONPATH=$PWD
. benchmarks/public/patch_into.sh
found=results/explore; min=candidates/runtimeerror
declare -A script=(
  [reporter-mat2]=$found/cuda2-tiny-reporter/$min-expected-all-tensors-to-be-on-the-s.min.py
  [newest-mat2]=$found/cuda2-tiny-newest/$min-expected-all-tensors-to-be-on-the-s.min.py
  [newest-indices]=$found/cuda2-tiny-newest/$min-indices-should-be-either-on-cpu-or-.min.py
  [ab]=minrepro/catalog/cases/peft_redispatch_drops_input_hook.py)
python_of() {  # python_of SET: the interpreter the rows run under
  if [ "${PATCHED:-0}" = 1 ]; then echo "$work/env-$1/bin/python"; else echo ".nox/minrepro-$1/bin/python"; fi
}
if [ "${PATCHED:-0}" = 1 ]; then
  ids=$(python3 -c "import sys; from minrepro.catalog.manifest import load_catalog, stacking_order
print(' '.join(p for p in stacking_order(load_catalog()) if p not in sys.argv[1:]))" ${WITHOUT:-})
  for s in pinned reporter newest; do
    ( python3 -m minrepro env create --set $s --wheelhouse "$MINREPRO_WHEELHOUSE" "$work/env-$s" \
      && python3 -m minrepro patch apply --set $s --into "$work/env-$s" $ids \
      && if [ -n "${THEN:-}" ]; then patch_into "$("$work/env-$s/bin/python" -c \
           "import sysconfig; print(sysconfig.get_paths()['purelib'])")" "$THEN"; fi ) > "$work/patching-$s.txt" 2>&1 &
  done
  wait
fi
for row in ${ROWS:-${!script[@]}}; do
  for s in pinned reporter newest; do
    py=$(python_of $s); [ -x "$py" ] || continue
    timeout ${ROW_SECONDS:-300} "$py" -m minrepro signature "${script[$row]}" --placement > "$work/$row-$s.txt" 2>&1 &
  done
done
wait
suffix=$([ "${PATCHED:-0}" = 1 ] && echo -patched)
tar czf "$OUT/rows$suffix.tgz" -C "$work" --exclude cache --exclude 'env-*' . && rm -rf "$work"
