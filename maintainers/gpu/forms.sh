#!/usr/bin/env bash
# On the GPU machine, from the repository root, with carry [".gpu/sbundle"]: the forms of the state passes
# (docs/kernels.md: split, FUSE_O, one stage, FUSE_U / FUSE_W, the forward alone) and of the UT solve (in registers,
# BLOCKWISE) checked and timed on a new GPU or Triton, in parts of one call each (each a few minutes; a call has ten):
#   bash maintainers/gpu/forms.sh check   → $OUT/tests.log (the kernel tests with every candidate),
#                                          $OUT/check.log (deltamup kernels check of the state passes' candidates,
#                                          with a backward, --forward-only, --qk-norm-in-kernel, DeltaProduct_2;
#                                          the head dims of widths 512-1536), all side by side
#   bash maintainers/gpu/forms.sh forms   → $OUT/state-forms.md (studies/kernel-checks/state_forms.py, n_h 1 and 2)
#   bash maintainers/gpu/forms.sh solve   → $OUT/solve-tests.log, $OUT/solve-check.log (the per-chunk pass's fp64
#                                          test and deltamup kernels check of the UT solve's candidates, BLOCKWISE
#                                          among them), then $OUT/solve-forms.md (solve_forms.py: the register,
#                                          `rows` and blockwise forms timed at K 64, 128 and fla's standard shape)
#   bash maintainers/gpu/forms.sh prepare → $OUT/prepare-forms.md (studies/kernel-checks/prepare_forms.py: the
#                                          per-chunk pass's forms, fused-blockwise among them, without and with
#                                          the training forward's q/k norm inside, n_h 1)
#   bash maintainers/gpu/forms.sh bench [SHAPE…] → $OUT/kernels.md, $OUT/kernels.log (benchmarks/kernels.py;
#                                          SHAPE: its --only indices, e.g. 1 3 2 4 then 0 5 6 7 in two calls
#                                          where all eight do not fit one: the report keeps every finished shape)
set -uo pipefail
PART=${1:-}
shift || true
case "$PART" in check|forms|solve|prepare|bench) ;;
  *) echo "forms.sh: PART must be check, forms, solve, prepare or bench" >&2; exit 2 ;; esac
source .gpu/sbundle/setup.sh
python3 -m pip install --no-deps --no-build-isolation --no-index -q -e . > /tmp/pip-install.log 2>&1 \
  || { cat /tmp/pip-install.log; exit 1; }
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
case "$PART" in
  check)  # the tests and the state passes' candidates in the check's three forward modes, side by side
    dims="64x128 96x192 128x256 192x384"
    timeout -k 10 500 python3 -m pytest -q -n 8 tests/test_triton_kernels.py \
      -k "every_candidate or every_state_config or fused_state or alone" > "$OUT/tests.log" 2>&1 &
    i=0
    for run in "--kernel chunk_state_fwd_kernel" "--kernel chunk_state_bwd_kernel" \
               "--kernel chunk_state_fwd_kernel --forward-only" "--kernel chunk_state_fwd_kernel --qk-norm-in-kernel" \
               "--kernel chunk_state_fwd_kernel --householder 2 --head-dims 128x256"; do  # (the last --head-dims wins)
      timeout -k 10 500 deltamup kernels check --head-dims $dims $run > "/tmp/check-$i.log" 2>&1 &
      i=$((i + 1))
    done
    wait
    for j in 0 1 2 3 4; do cat "/tmp/check-$j.log"; done > "$OUT/check.log"
    tail -n 3 "$OUT/tests.log"; grep "configs within" "$OUT/check.log" ;;
  solve)
    dims="64x128 96x192 128x256 192x384"
    timeout -k 10 300 python3 -m pytest -q -n 4 tests/test_triton_kernels.py -k "chunk_pass_matches" \
      > "$OUT/solve-tests.log" 2>&1 &
    i=0
    for run in "" "--forward-only" "--qk-norm-in-kernel" "--householder 2 --head-dims 128x256"; do
      timeout -k 10 300 deltamup kernels check --head-dims $dims --kernel chunk_kkt_solve_fwd_kernel $run \
        > "/tmp/solve-check-$i.log" 2>&1 &
      i=$((i + 1))
    done
    wait
    for j in 0 1 2 3; do cat "/tmp/solve-check-$j.log"; done > "$OUT/solve-check.log"
    tail -n 3 "$OUT/solve-tests.log"; grep "configs within\|BLOCKWISE" "$OUT/solve-check.log"
    for shape in "8 2048 6 64" "8 2048 6 128" "4 4096 16 128"; do
      timeout -k 10 100 python3 studies/kernel-checks/solve_forms.py --forms blocks rows blockwise --bf16-only \
        --shape $shape
    done 2>&1 | tee "$OUT/solve-forms.md" ;;
  forms)
    { timeout -k 10 400 python3 studies/kernel-checks/state_forms.py
      timeout -k 10 130 python3 studies/kernel-checks/state_forms.py --nh 2; } 2>&1 | tee "$OUT/state-forms.md" ;;
  prepare)
    { timeout -k 10 270 python3 studies/kernel-checks/prepare_forms.py
      timeout -k 10 270 python3 studies/kernel-checks/prepare_forms.py --norm; } 2>&1 | tee "$OUT/prepare-forms.md" ;;
  bench)  # every candidate's time in the log (tuning.launch), for pruning the candidates that never win
    DELTAMUP_AUTOTUNE_LOG=1 timeout -k 10 560 python3 benchmarks/kernels.py ${1:+--only "$@"} --out "$OUT/kernels.md" \
      > "$OUT/kernels.log" 2>&1
    tail -n 12 "$OUT/kernels.md" ;;
esac
