#!/usr/bin/env bash
# The GPU box's scale-down round (one H100, offline, the wheelhouse carried): envs for newest and pinned, each with
# a patched twin (the family's fixed world), then bench.py on each "CASE SET" given after $1 (default: E4B newest).
# CPUS: a taskset list for the reduce (one GPU's share of a bigger box). JOBS (default 4), LIMIT (SIGTERM the reduce after LIMIT s) and MAX_SECONDS (reduce's own time budget) and EXECUTOR go to bench.py. Writes under $1 (default /tmp/w). With --setup first: only the envs, each job's checkpoint and its original's run (for a later call).
set -u
SETUP_ONLY=0; [ "${1:-}" = --setup ] && { SETUP_ONLY=1; shift; }
W=${1:-/tmp/w}; mkdir -p "$W"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD MINREPRO_WHEELHOUSE=$PWD/wheelhouse
E=$W/cache/envs  # shared with benchmarks/two_gpu.sh and executor_cost.py's runs in the same call
envs() {  # only the sets a job names, when it starts: each pair costs minutes of device time
  [ -x "$E/$1/bin/python" ] || python3 -m minrepro env create "$E/$1" --set "$1" --wheelhouse wheelhouse
  [ -x "$E/$1-fixed/bin/python" ] || { python3 -m minrepro env create "$E/$1-fixed" --set "$1" --wheelhouse wheelhouse \
      && python3 -m minrepro patch apply --set "$1" --into "$E/$1-fixed"; }
}
shift || true
[ $# -gt 0 ] || set -- "gpu-gemma4-e4b newest"
for job in "$@"; do
  set -- $job
  envs "$2" >> "$W/envs.log" 2>&1
  if [ $SETUP_ONLY = 1 ]; then
    python3 benchmarks/scale/bench.py --setup --case "$1" --python "$E/$2/bin/python" --workdir "$W" >> "$W/envs.log" 2>&1
    continue
  fi
  ${CPUS:+taskset -c "$CPUS"} python3 benchmarks/scale/bench.py --case "$1" --python "$E/$2/bin/python" --good-python "$E/$2-fixed/bin/python" \
    --jobs "${JOBS:-4}" ${LIMIT:+--limit "$LIMIT"} ${MAX_SECONDS:+--max-seconds "$MAX_SECONDS"} ${EXECUTOR:+--executor "$EXECUTOR"} --workdir "$W" --results "$W/scale.jsonl" > "$W/bench-$1-$2.log" 2>&1
  cp "$W/jobs/$1/"*.min.py "$W/$1-$2.min.py" 2>/dev/null
done
touch "$W/DONE"
# the lending tool brings back a few files per call (8 on 2026-11-25): one archive of what the round wrote
[ -n "${OUT:-}" ] && (cd "$W" && tar czf "$OUT/round-$(basename "$W").tgz" --ignore-failed-read *.log *.jsonl *.min.py jobs/*/*.min.py 2>/dev/null)
