#!/usr/bin/env bash
# Issue 37, family AB on a GPU box (beside benchmarks/scale/gpu_round.sh, which makes the envs): the case's signature
# on pinned and newest, with every patch of the set (AB's included) and without; the two-GPU hooks print (the
# explore row and the placement control) with every patch; the explore row's reduced script on each.
# Usage: bash benchmarks/public/two_gpu_redispatch_hook.sh PINNED_ENVS NEWEST_ENVS OUTDIR   (ENVS: gpu_round's cache/envs)
set -u
P=$1; N=$2; O=$3; mkdir -p "$O"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
for e in "$P/pinned" "$P/pinned-fixed" "$N/newest" "$N/newest-fixed"; do  # the -fixed envs are patched last
  until [ -f "$e/minrepro-env.json" ] && { [[ $e != *-fixed ]] || grep -q peft-redispatch-drops-input-hook "$e/minrepro-env.json"; }; do sleep 3; done
done
sleep 5
case=minrepro/catalog/cases/peft_redispatch_drops_input_hook.py
row=results/explore/cuda2-tiny-pinned/candidates/runtimeerror-expected-all-tensors-to-be-on-the-s.min.py
for e in "$P/pinned" "$P/pinned-fixed" "$N/newest" "$N/newest-fixed"; do
  n=$(basename "$e")
  CUDA_VISIBLE_DEVICES=0 timeout 120 python3 -m minrepro signature "$case" --python "$e/bin/python" --json > "$O/case-$n.json" 2>&1
  timeout 120 "$e/bin/python" "$case" > "$O/case-$n.log" 2>&1; echo "rc=$?" >> "$O/case-$n.log"
  timeout 120 python3 -m minrepro signature "$row" --python "$e/bin/python" --json > "$O/row-$n.json" 2>&1
done
for e in "$P/pinned-fixed" "$N/newest-fixed"; do
  for c in finding control; do
    timeout 150 "$e/bin/python" benchmarks/public/two_gpu_embedding_hooks.py --case $c > "$O/hooks-$(basename "$e")-$c.jsonl" 2>&1
  done
done
