#!/usr/bin/env bash
# Families AC and AD (the accelerate dispatch findings behind explore's two-GPU rows, docs/findings.md) on accelerate
# 1.13.0, 1.14.0, 1.15.0 (wheels from WHEELS, default wheelhouse/) and main (.gpu-carry/accelerate.git), each with the
# image's torch, without and with the catalog's patches for it: `minrepro signature --placement` per case and
# version. With TESTS=1, accelerate main's own tests/test_big_modeling.py and tests/test_hooks.py, without and with
# the patches (the proof that they change nothing where their bug's precondition is absent). Needs two GPUs.
# Output: $OUT/dispatch.tgz.
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); mkdir -p "$work/out"; WHEELS=${WHEELS:-wheelhouse}
. benchmarks/public/patch_into.sh
for v in 1.13.0 1.14.0 1.15.0; do
  python3 -m pip install -q --no-deps --no-index --find-links "$WHEELS" --target "$work/acc-$v" "accelerate==$v"
done
git -C .gpu-carry/accelerate.git archive --format=tar --prefix=src/ HEAD | tar x -C "$work"
python3 -m pip install -q --no-deps --no-build-isolation --target "$work/acc-main" "$work/src" 2>"$work/out/main-build.log"
git -C .gpu-carry/accelerate.git log -1 --format='main %H %cI' > "$work/out/versions.txt"
for v in 1.13.0 1.14.0; do
  cp -r "$work/acc-$v" "$work/acc-$v+AC"
  patch_into "$work/acc-$v+AC" patches/accelerate/dispatch-nested-entry-keeps-root-hook.diff 2>> "$work/out/patching.log"
done
for v in 1.15.0 main; do
  cp -r "$work/acc-$v" "$work/acc-$v+AC+AD"
  patch_into "$work/acc-$v+AC+AD" patches/accelerate/dispatch-{nested-entry-keeps-root-hook,main-device-from-set}.diff \
    2>> "$work/out/patching.log"
done
cases="minrepro/catalog/cases/dispatch_nested_entry_keeps_root_hook.py minrepro/catalog/cases/dispatch_main_device_from_set.py"
for script in $cases; do
  for acc in "$work"/acc-*; do
    name=$(basename "$script" .py)-$(basename "$acc")
    PYTHONPATH=$PWD:$acc timeout 120 python3 -m minrepro signature "$script" --placement > "$work/out/$name.txt" 2>&1 &
  done
  wait
done
if [ "${TESTS:-0}" = 1 ]; then
  python3 -m pip install -q --no-deps --no-index --find-links "$WHEELS" --target "$work/testdeps" parameterized pytest-subtests
  # one after the other: the tied-weights memory tests fill GPU 0 up to what mem_get_info says is free, so two runs
  # side by side fail each other's (2026-11-26: a different one of them failed in each run)
  for acc in acc-main acc-main+AC+AD; do
    (cd "$work/src" && PYTHONPATH="$work/$acc:$work/testdeps" timeout 200 python3 -m pytest -q -p no:cacheprovider \
      -o addopts= tests/test_big_modeling.py tests/test_hooks.py > "$work/out/tests-$acc.txt" 2>&1)
  done
fi
tar czf "$OUT/dispatch.tgz" -C "$work" out && rm -rf "$work"
