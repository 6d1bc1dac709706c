#!/usr/bin/env bash
# The two accelerate dispatch findings behind explore's `mat2` rows (docs/findings.md), on accelerate 1.13.0, 1.14.0,
# 1.15.0 (WHEELS, default wheelhouse/) and main (.gpu-carry/accelerate.git), each with the image's torch: `minrepro signature
# --placement` per script and version. Needs two GPUs. Output: $OUT/dispatch.tgz.
set -u
OUT=${OUT:-/tmp/out}; work=$(mktemp -d); mkdir -p "$work/out"
for v in 1.13.0 1.14.0 1.15.0; do
  python3 -m pip install -q --no-deps --no-index --find-links "${WHEELS:-wheelhouse}" --target "$work/acc-$v" "accelerate==$v"
done
git -C .gpu-carry/accelerate.git archive --format=tar --prefix=src/ HEAD | tar x -C "$work"
python3 -m pip install -q --no-deps --no-build-isolation --target "$work/acc-main" "$work/src" 2>"$work/out/main-build.log"
git -C .gpu-carry/accelerate.git log -1 --format='main %H %cI' > "$work/out/versions.txt"
for script in benchmarks/public/accelerate_*.py; do
  for acc in "$work"/acc-*; do
    name=$(basename "$script" .py)-$(basename "$acc")
    PYTHONPATH=$PWD:$acc timeout 120 python3 -m minrepro signature "$script" --placement > "$work/out/$name.txt" 2>&1
    PYTHONPATH=$acc python3 -c "import accelerate; print('$name', accelerate.__version__)" >> "$work/out/versions.txt"
  done
done
tar czf "$OUT/dispatch.tgz" -C "$work" out && rm -rf "$work"
