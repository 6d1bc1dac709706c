#!/usr/bin/env bash
# One call on an offline GPU box (`wheelhouse/` carried, built by `nox -s wheelhouse -- --direct-only --cuda 130`):
#   1. the README's GPU job, recorded: `nox -s minrepro -- --record` (every set; two-GPU cases run where two GPUs are);
#   2. every case with the libraries at the commits of the repositories under REPOS (LIB.git each: `--repo`), which
#      gives the CUDA rows of the "still fails on main" table;
#   3. the public reports adapted under benchmarks/public/, on each set;
#   4. with KITS="CASE:LIB ...", each case's PR kit against LIB's carried main (`minrepro kit`: GPU-only tests);
#   5. `nox -s patched -- --record` in what time is left (DEADLINE seconds in all, default 560).
# Results and logs come back as $OUT/results.tgz and $OUT/logs.tgz. With SETUP_E4B=1, the scale-down round's envs and
# E4B checkpoint are made beside it (benchmarks/scale/gpu_round.sh --setup), for a following call on the same machine.
# Usage: bash benchmarks/gpu_box.sh [REPOS]   (default REPOS: .gpu-carry)
set -u
OUT=${OUT:-/tmp/out}; REPOS=${1:-.gpu-carry}; DEADLINE=${DEADLINE:-560}; mkdir -p "$OUT/logs"
export PYTHONUNBUFFERED=1 MINREPRO_WHEELHOUSE=$PWD/wheelhouse
step() { echo "[$SECONDS s] $*" | tee -a "$OUT/logs/steps.txt"; }
nvidia-smi -L > "$OUT/logs/gpus.txt" 2>&1
python3 -m pip install -q --no-index --find-links wheelhouse nox > "$OUT/logs/pip.log" 2>&1
[ "${SETUP_E4B:-0}" = 1 ] && { CUDA_VISIBLE_DEVICES=1 bash benchmarks/scale/gpu_round.sh --setup /tmp/w "gpu-gemma4-e4b newest" \
  > "$OUT/logs/setup-e4b.log" 2>&1 & }
step "nox -s minrepro -- --record"
nox -s minrepro -- --record > "$OUT/logs/nox-minrepro.log" 2>&1; step "rc=$?"
repos=(); for g in "$REPOS"/*.git; do [ -d "$g" ] && repos+=(--repo "$(basename "$g" .git)=$g"); done
if [ ${#repos[@]} -gt 0 ]; then
  step "every case at the repositories' commits: ${repos[*]}"
  mkdir -p results/main
  PYTHONPATH=$PWD .nox/minrepro-newest/bin/python -m minrepro run --set newest "${repos[@]}" --jobs 16 \
    --results results/main/newest-cuda.json --doc "$OUT/logs/main-cuda.md" > "$OUT/logs/main.log" 2>&1; step "rc=$?"
fi
for script in benchmarks/public/*.py; do
  for s in pinned newest; do
    step "$script on $s"; .nox/minrepro-$s/bin/python "$script" > "$OUT/logs/$(basename "$script" .py)-$s.log" 2>&1
    step "rc=$?"
  done
done
for kit in ${KITS:-}; do  # CASE:LIB (e.g. peft-redispatch-drops-input-hook:peft): a GPU-only regression test's kit
  step "kit ${kit%%:*} on ${kit##*:} main"
  python3 -m minrepro kit "${kit%%:*}" --repo "${kit##*:}=$REPOS/${kit##*:}.git" > "$OUT/logs/kit-${kit%%:*}.log" 2>&1
  step "rc=$?"
done
left=$((DEADLINE - SECONDS)); step "nox -s patched -- --record, $left s left"
[ $left -gt 60 ] && { timeout $left nox -s patched -- --record > "$OUT/logs/nox-patched.log" 2>&1; step "rc=$?"; }
wait
tar czf "$OUT/results.tgz" results docs/catalog.md 2>/dev/null  # results/kits/ included
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$OUT/logs"
