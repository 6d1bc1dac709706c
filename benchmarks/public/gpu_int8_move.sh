#!/usr/bin/env bash
# Family AE (explore's newest `indices ... (cuda:1)` row, docs/findings.md) on bitsandbytes 0.49.2 and 0.50.2 (wheels
# from WHEELS, default wheelhouse/), each with the image's torch, without and with the catalog's patch:
# benchmarks/public/int8_parent_move_probe.py (every way of moving an 8-bit layer) and the case under
# `minrepro signature --placement`. With TESTS=1, bitsandbytes main's own tests/test_linear8bitlt.py
# (.gpu-carry/bitsandbytes.git) over 0.50.2 without and with the patch, one after the other: the proof that the patch
# changes nothing where its bug's precondition is absent. Two GPUs show the case; one shows the probe's cpu rows.
# Output: $OUT/int8-move.tgz.
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); mkdir -p "$work/out"; WHEELS=${WHEELS:-wheelhouse}
patch=patches/bitsandbytes/int8-parent-move-stale-scb.diff; . benchmarks/public/patch_into.sh
for v in 0.49.2 0.50.2; do
  python3 -m pip install -q --no-deps --no-index --find-links "$WHEELS" --target "$work/bnb-$v" "bitsandbytes==$v"
  cp -r "$work/bnb-$v" "$work/bnb-$v+AE"
  patch_into "$work/bnb-$v+AE" "$patch" 2>> "$work/out/patching.log"
done
for bnb in "$work"/bnb-*; do
  name=$(basename "$bnb")
  PYTHONPATH=$bnb timeout 120 python3 benchmarks/public/int8_parent_move_probe.py > "$work/out/probe-$name.txt" 2>&1
  PYTHONPATH=$PWD:$bnb timeout 120 python3 -m minrepro signature minrepro/catalog/cases/int8_parent_move_stale_scb.py \
    --placement > "$work/out/case-$name.txt" 2>&1
done
if [ "${TESTS:-0}" = 1 ]; then
  git -C .gpu-carry/bitsandbytes.git archive --format=tar --prefix=src/ HEAD | tar x -C "$work"
  git -C .gpu-carry/bitsandbytes.git log -1 --format='main %H %cI' > "$work/out/versions.txt"
  for bnb in bnb-0.50.2 bnb-0.50.2+AE; do
    (cd "$work/src" && rm -rf bitsandbytes && PYTHONPATH="$work/$bnb" timeout 240 python3 -m pytest -q \
      -p no:cacheprovider -o addopts= tests/test_linear8bitlt.py > "$work/out/tests-$bnb.txt" 2>&1)
  done
fi
tar czf "$OUT/int8-move.tgz" -C "$work" out && rm -rf "$work"
