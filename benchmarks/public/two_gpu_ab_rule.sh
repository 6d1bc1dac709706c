#!/usr/bin/env bash
# The candidate form of family AB's patch (benchmarks/public/ab_main_device_rule.diff: dispatch_model's documented
# main-device rule, cpu for an all-cpu map) on two GPUs: per set, an env `minrepro env create` makes (offline from
# $MINREPRO_WHEELHOUSE) with every catalog patch but AB's, then the candidate; in it, explore's newest `indices` row
# (which met AB's gap on pinned and reporter) and AB's case, under `minrepro signature --placement`.
# If the row passes on every set and AB's case still passes, the candidate replaces AB's patch (then its kit again).
# Output: $OUT/ab-rule.tgz.
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); export MINREPRO_SCENARIO_CACHE=$work/cache PYTHONPATH=$PWD
scripts="row:results/explore/cuda2-tiny-newest/candidates/runtimeerror-indices-should-be-either-on-cpu-or-.min.py
ab:minrepro/catalog/cases/peft_redispatch_drops_input_hook.py"
ids=$(python3 -c "from minrepro.catalog.manifest import load_catalog, stacking_order
print(' '.join(p for p in stacking_order(load_catalog()) if p != 'peft/peft-redispatch-drops-input-hook'))")
for s in pinned reporter newest; do
  ( python3 -m minrepro env create --set $s --wheelhouse "$MINREPRO_WHEELHOUSE" "$work/env-$s" \
    && python3 -m minrepro patch apply --set $s --into "$work/env-$s" $ids \
    && site=$("$work/env-$s/bin/python" -c "import os, peft; print(os.path.dirname(os.path.dirname(peft.__file__)))") \
    && sed '1,/^---$/d' benchmarks/public/ab_main_device_rule.diff | sed 's|src/peft/|peft/|g' | patch -p1 -d "$site" \
  ) > "$work/patching-$s.txt" 2>&1 &
done
wait
for s in pinned reporter newest; do
  for entry in $scripts; do
    timeout ${ROW_SECONDS:-300} "$work/env-$s/bin/python" -m minrepro signature "${entry#*:}" --placement \
      > "$work/${entry%%:*}-$s.txt" 2>&1 &
  done
done
wait
tar czf "$OUT/ab-rule.tgz" -C "$work" --exclude cache --exclude 'env-*' . && rm -rf "$work"
