#!/usr/bin/env bash
# The second call of a two-GPU round (after benchmarks/two_gpu_round.sh), on a fresh box: carry `.gpu-carry/wh3` (the
# sets' wheels and the kit's test requirements, without nox's) and `.gpu-carry/peft1.git` (peft main, depth 1).
#   - family AF: its case and benchmarks/public/two_gpu_ple_probe.py on AF_SETS (default newest; pinned needs
#     `.gpu-carry/whp`, the pinned wheels, copied into wh3: the carry limit), unpatched and with its patch;
#   - Q's and V's proofs on newest with their controls (the control that met family AB on a GPU box now hides the GPUs);
#   - AB's kit on one GPU with the file's tests that need no hub (HUB_TESTS deselected: they fail alike on both sides
#     offline, and sleep through retries).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/logs"; logs=$OUT/logs; wh=$PWD/.gpu-carry/wh3
export PYTHONUNBUFFERED=1 MINREPRO_WHEELHOUSE=$wh PYTHONPATH=$PWD HF_HUB_OFFLINE=1
HUB_TESTS="TestGetModuleNamesTiedWithEmbedding or revision_warning or different_modules_to_save or TestTargetingAuxiliaryTrainingWrapper or TestGetNoSplitModules"
step() { echo "[$SECONDS s] $*" | tee -a "$logs/steps.txt"; }
nvidia-smi -L > "$logs/gpus.txt" 2>&1
af_case=minrepro/catalog/cases/gemma4_per_layer_inputs_other_gpu.py
for s in ${AF_SETS:-newest}; do (
  env=/tmp/af-$s
  python3 -m minrepro env create --set $s --wheelhouse "$wh" $env > "$logs/af-$s.log" 2>&1
  for state in unpatched patched; do
    [ $state = patched ] && python3 -m minrepro patch apply --set $s --into $env transformers/gemma4-per-layer-inputs-other-gpu >> "$logs/af-$s.log" 2>&1
    step "AF $s $state"
    timeout 120 $env/bin/python -m minrepro signature $af_case --placement > "$logs/af-case-$s-$state.log" 2>&1
    timeout 200 $env/bin/python benchmarks/public/two_gpu_ple_probe.py > "$logs/af-probe-$s-$state.log" 2>&1
  done; step "AF $s done" ) &
done
( step "Q and V proofs on newest"
  timeout 400 python3 -m minrepro patch prove --set newest --envs /tmp/prove --wheelhouse "$wh" --jobs 8 \
    --results results/patched/cases/newest-cuda-q-v-controls.json peft-redispatch-disk-base peft-offload-tied-weight \
    > "$logs/prove-q-v.log" 2>&1; step "proofs rc=$?" ) &
( step "AB kit"
  CUDA_VISIBLE_DEVICES=0 timeout 450 python3 -m minrepro kit peft-redispatch-drops-input-hook --repo peft=.gpu-carry/peft1.git \
    --pytest-args "-W ignore::FutureWarning -k 'not ($HUB_TESTS)'" --timeout 300 > "$logs/kit-ab.log" 2>&1
  step "kit rc=$?" ) &
wait
tar czf "$OUT/results.tgz" results/patched/cases results/kits 2>/dev/null
