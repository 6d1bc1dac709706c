#!/usr/bin/env bash
# One call on a two-GPU box (`wheelhouse/` and `.gpu-carry/accelerate.git` carried): items docs/findings.md listed
# under "Next, on two GPUs", side by side under one deadline (DEADLINE seconds, default 560):
#   - AB's candidate form (the documented main-device rule) over every other patch, on the `indices` row and AB's case
#     (benchmarks/public/two_gpu_rows.sh, PATCHED=1);
#   - AD's commit bisection over accelerate's first-parent commits (`minrepro bisect --git`);
#   - per set of SETS (default: pinned), `nox -s minrepro -- --record` then `nox -s patched -- --record`, JOBS cases at a
#     time (default 8). Session 48 ran the three sets at once beside the rest: no `patched` session finished in 460 s
#     (`patched(newest)` alone took about 400 s), so one set per call.
# Family AF's case and probe are benchmarks/two_gpu_followup.sh's. Results come back as $OUT/results.tgz, logs as
# $OUT/logs.tgz, the rows as $OUT/rows-patched.tgz.
set -u
OUT=${OUT:-/tmp/out}; DEADLINE=${DEADLINE:-560}; JOBS=${JOBS:-8}; mkdir -p "$OUT/logs"; logs=$OUT/logs
export PYTHONUNBUFFERED=1 MINREPRO_WHEELHOUSE=$PWD/wheelhouse PYTHONPATH=$PWD HF_HUB_OFFLINE=1
step() { echo "[$SECONDS s] $*" | tee -a "$logs/steps.txt"; }
nvidia-smi -L > "$logs/gpus.txt" 2>&1
python3 -m pip install -q --no-index --find-links wheelhouse nox > "$logs/pip.log" 2>&1
( step "AB candidate rows"
  PATCHED=1 WITHOUT=peft/peft-redispatch-drops-input-hook THEN=benchmarks/public/ab_main_device_rule.diff \
    ROWS="newest-indices ab" OUT=$OUT bash benchmarks/public/two_gpu_rows.sh > "$logs/ab-rows.log" 2>&1
  step "AB candidate rows done" ) &
( step "AD bisect"
  timeout $((DEADLINE - 30)) python3 -m minrepro bisect dispatch-main-device-from-set --git accelerate=.gpu-carry/accelerate.git \
    --range a5cb37c1..16cb6eb8 --wheelhouse wheelhouse --results results > "$logs/bisect-ad.log" 2>&1
  step "AD bisect rc=$?" ) &
for s in ${SETS:-pinned}; do (
  step "minrepro($s)"; nox -s "minrepro($s)" -- --record --jobs $JOBS > "$logs/nox-minrepro-$s.log" 2>&1
  step "minrepro($s) rc=$?; patched($s), $((DEADLINE - SECONDS)) s left"
  timeout $((DEADLINE - SECONDS)) nox -s "patched($s)" -- --record --jobs $JOBS > "$logs/nox-patched-$s.log" 2>&1
  step "patched($s) rc=$?" ) &
done
wait
tar czf "$OUT/results.tgz" results docs/catalog.md 2>/dev/null
tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$logs"
