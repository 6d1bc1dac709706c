#!/usr/bin/env bash
# Issue 37's two-GPU work in one call on a box of two GPUs (offline, `wheelhouse/` carried):
#   1. explore's unreduced two-GPU findings: `minrepro explore --reduce-only` on each recorded report under
#      results/explore/cuda2-tiny-SET, in a plain env of that set (the three side by side);
#   2. family L's release bisection, on two GPUs and on one: `minrepro bisect CASE --package transformers` between
#      BAD and GOOD (default 5.8.1 and 5.9.0: the pair a diff of modeling_gemma4.py over every release from 5.6.2 to
#      5.23.0 points at; both wheels must be in the wheelhouse). Its record goes to results/bisect/.
# Envs in the cache under $W (default /tmp/w), where a reduced finding's outcome on every set is measured, made when
# missing; logs to $OUT/logs. `bash benchmarks/two_gpu.sh envs`: only the envs.
# REPORTS (default "pinned reporter newest") picks the reports; BISECT=0 skips step 2 (recorded on 2026-11-25: 5.9.0).
# REDUCE_SECONDS (default 150) bounds each finding's reduction (explore --reduce-seconds): on 2026-11-25 the three
# reports side by side, unbounded, needed more than one 470 s call. CPUS: a taskset list for the reductions.
set -u
W=${W:-/tmp/w}; OUT=${OUT:-/tmp/out}; mkdir -p "$W" "$OUT/logs"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD MINREPRO_WHEELHOUSE=$PWD/wheelhouse MINREPRO_CACHE=$W/cache
E=$MINREPRO_CACHE/envs
for s in pinned reporter newest; do
  [ -x "$E/$s/bin/python" ] || python3 -m minrepro env create "$E/$s" --set $s --wheelhouse wheelhouse \
    >> "$OUT/logs/envs.log" 2>&1 &
done
wait
[ "${1:-}" = envs ] && exit 0
for s in ${REPORTS:-pinned reporter newest}; do
  ${CPUS:+taskset -c "$CPUS"} python3 -m minrepro explore --reduce-only --reduce 5 --results results/explore/cuda2-tiny-$s \
    --python "$E/$s/bin/python" --jobs "${JOBS:-4}" --reduce-seconds "${REDUCE_SECONDS:-150}" \
    > "$OUT/logs/reduce-only-$s.log" 2>&1 &
done
[ "${BISECT:-1}" = 1 ] && for case in gemma4-multimodal-mask-second-gpu gemma4-multimodal-mask-device; do  # same envs
  python3 -m minrepro bisect $case --package transformers --bad "${BAD:-5.8.1}" --good "${GOOD:-5.9.0}" \
    --wheelhouse wheelhouse --envs "$W/bisect-envs" --results results > "$OUT/logs/bisect-$case.log" 2>&1
  echo "bisect $case: rc=$?" >> "$OUT/logs/steps.txt"
done
wait
tar czf "$OUT/results.tgz" results/explore results/bisect  # what the reports and bisections recorded
tar czf "$OUT/logs.tgz" -C "$OUT" logs  # the lending tool brings back a few files per call: the logs in one
