#!/usr/bin/env bash
# Two gpu_session.sh runs side by side on a machine with two GPUs, one GPU each (e.g. the kernel benchmarks on GPU 0
# while a study resumes on GPU 1). A variable suffixed 0 or 1 (STAGES0, STUDY1, BUDGET1, STUDY_EXTRA1 …) goes, without
# the suffix, to that run; each run writes $OUT/g0 or $OUT/g1 (session.log, gpu-results.tgz).
#   source .devbundle/setup.sh && export PYTHONPATH=$PWD:$PYTHONPATH && \
#   STAGES0="gpu-tests kernels" STAGES1="warm study" STUDY1=gdn-adamw OUT=$OUT bash experiments/two_gpus.sh
set -u
for g in 0 1; do
  mkdir -p "$OUT/g$g"
  (
    for v in $(compgen -v | grep -E "^[A-Z][A-Z_]*${g}\$"); do export "${v%$g}=${!v}"; done
    export CUDA_VISIBLE_DEVICES=$g OUT="$OUT/g$g"
    exec bash experiments/gpu_session.sh
  ) > "$OUT/g$g/session.log" 2>&1 &
done
wait
tail -n 30 "$OUT"/g0/session.log "$OUT"/g1/session.log
