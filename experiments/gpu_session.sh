#!/usr/bin/env bash
# Everything this project measures on a GPU, in stages, each writing as it goes so that a cut-off still returns what
# finished. Run from the repository root with the bundle (../shared/gpu/make-bundle):
#   source .devbundle/setup.sh && export PYTHONPATH=$PWD:$PYTHONPATH && OUT=$OUT bash experiments/gpu_session.sh
#   STAGES="warm cc-bf16 sweep" ... runs only those stages (2026-11-29: call 1 ran warm cc-fp32 triton-vs-torch,
#   call 2 warm cc-bf16 sweep). SWEEP_EXTRA adds --set overrides, e.g. SWEEP_EXTRA="--set widths=[256,512]".
#   Stage "gpu-tests" runs tests/test_triton_kernels.py on the GPU. Stages "throughput" (whole model, ours eager and
#   compiled vs fla's model, in one run) and "kernels" (kernels.bench, ours and fla in one run) need the bundle.
#   What they cost on an H200 (2026-11-29): gpu-tests 226 s (session 3); throughput with fla ≈ 6 min (fla's model
#   autotunes for 347 s before its first step), ours-compile alone ≈ 100 s; kernels with fla (session 4, ours
#   compiling every candidate config): 120–200 s of parallel compilation for three to six shapes, then 30–50 s a
#   shape — one call takes about six shapes with fla (KERNELS_ARGS="--only ...").
set -u
STAGES=${STAGES:-"warm cc-fp32 cc-bf16 triton-vs-torch sweep"}
R=${OUT:-out}/r; mkdir -p "$R"; R=$(cd "$R" && pwd)
T0=$(date +%s); left() { echo $(( ${BUDGET:-530} - ($(date +%s) - T0) )); }
has() { [[ " $STAGES " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$R/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$R/gpu.txt"

# The kernel tests on the real GPU (the CI runs them in the CPU interpreter, which cannot show miscompiles or races).
# Three pytest processes side by side: compilation is CPU time and the machine has 16 cores. The tests take each
# pass's first candidate config (DELTAMUP_AUTOTUNE=0), so the configs kernels.bench does not pick are checked too.
if has gpu-tests; then
  F=tests/test_triton_kernels.py; i=0; export DELTAMUP_AUTOTUNE=${TESTS_AUTOTUNE:-0}
  for sel in "$F::test_rule_matches_reference" "$F::test_delta_product" \
             "$F --deselect $F::test_rule_matches_reference --deselect $F::test_delta_product["; do
    i=$((i + 1))
    timeout 300 python3 -m pytest -q --tb=short -p no:cacheprovider $sel > "$R/gpu-tests-$i.log" 2>&1 &
  done
  wait; unset DELTAMUP_AUTOTUNE; cat "$R"/gpu-tests-*.log; echo "gpu tests done at $(( $(date +%s) - T0 )) s"
fi

# The whole model against fla's (TP_VARIANTS picks, TP_ARGS adds options, e.g. "--mlp-hidden 2816": fla's MLP
# rounding), then the kernels against fp64 and fla in the same run (KERNELS_ARGS adds options, e.g. "--only 4 8" or
# "--no-fla --fla-table benchmarks/kernels-DATE.md").
has throughput && timeout $(left) python3 experiments/model_throughput.py \
  --variants ${TP_VARIANTS:-ours ours-compile fla} ${TP_ARGS:-} --profile --out "$R/throughput.json" 2>&1 \
  | tee "$R/throughput.log"
# KERNELS_BASELINE (a tarball of an earlier kernels/ folder: git archive REV kernels | gzip > .gpu/kernels-REV.tgz)
# first times that version (ours only) on the same shapes: before and after in one call.
if has kernels && [ -n "${KERNELS_BASELINE:-}" ]; then
  mkdir -p /tmp/baseline && tar -C /tmp/baseline -xzf "$KERNELS_BASELINE"
  (cd /tmp/baseline && timeout $(left) python3 -m kernels.bench --no-fla --profile ${KERNELS_ARGS:-} \
    --out "$R/kernels-baseline.md") 2>&1 | tee "$R/kernels-baseline.log"
fi
has kernels && timeout $(left) python3 -m kernels.bench --profile ${KERNELS_ARGS:-} \
  --out "$R/kernels.md" 2>&1 | tee "$R/kernels.log"

# Compile the Triton kernels for the study's head dims (K = 0.75·d/6 at d = 256, 512, 1024, 1536), in parallel.
WARM_PID=
# WARM_DIMS picks head dims (default all four); WARM_ARGS adds options, e.g. "--householder 1 2" before the
# DeltaProduct study (n_h = 2) and a Gated DeltaNet one in the same call.
if has warm; then
  timeout 180 python3 experiments/warm_triton.py ${WARM_DIMS:-32 64 128 192} ${WARM_ARGS:-} > "$R/warm.log" 2>&1 &
  WARM_PID=$!
fi
# Which config crashes with half-precision inputs (experiments/diag_half.py), while the warm-up compiles.
has diag && timeout 240 python3 experiments/diag_half.py 2>&1 | tee "$R/diag.log"

# Coordinate checks far past the CPU's widths: fp32, PyTorch chunked kernel (no compile), widths 128…4096.
CC_PID=
if has cc-fp32; then
  timeout 250 bash -c '
  for c in "gdn gdn-mup adamw" "gdn gdn-mup sgd" "gdn mup adamw" "gdn sp adamw" "deltaproduct gdn-mup adamw"; do
    set -- $c
    python3 -m scaling coord-check --model $1 -p $2 --optimizer $3 --widths 128,256,512,1024,2048,4096 \
      --fp32 --kernel-backend torch --raw --out "$0/cc-fp32-$1-$2-$3" > "$0/cc-fp32-$1-$2-$3.log" 2>&1
  done' "$R" & CC_PID=$!
fi
[ -n "$WARM_PID" ] && wait $WARM_PID && echo "warm done at $(( $(date +%s) - T0 )) s" && cat "$R/warm.log"

# The same check in bf16 through the Triton kernels at the study's widths.
if has cc-bf16; then
  for opt in adamw sgd; do
    timeout 90 python3 -m scaling coord-check --model gdn -p gdn-mup --optimizer $opt --widths 256,512,1024,1536 \
      --kernel-backend triton --raw --out "$R/cc-bf16-triton-gdn-gdn-mup-$opt" > "$R/cc-bf16-$opt.log" 2>&1
  done
  echo "bf16 coordinate checks done at $(( $(date +%s) - T0 )) s"
fi

# Model level: the Triton path trains like the PyTorch path.
has triton-vs-torch && [ "$(left)" -gt 60 ] && timeout $(( $(left) < 120 ? $(left) : 120 )) \
  python3 experiments/triton_vs_torch.py --width 512 --depth 4 --steps 200 2>&1 | tee "$R/triton_vs_torch.log"
[ -n "$CC_PID" ] && wait $CC_PID && echo "fp32 coordinate checks done at $(( $(date +%s) - T0 )) s"

# The paper's AdamW grid at a reduced budget, small widths packed on the GPU (resumable; what is left is listed).
if has sweep; then
  timeout -s INT $(left) python3 -m sweeps sweeps/specs/gdn-adamw.yaml --out "$R/sweep-gdn-adamw" \
    --set task=sample --set steps=${SWEEP_STEPS:-120} --set warmup_steps=12 --set 'parametrizations=[gdn-mup]' \
    --set 'lrs={log_range: [1.0e-3, 2.0e-2], num: 4}' ${SWEEP_EXTRA:-} --progress-every 30 2>&1 | tee "$R/sweep.log"
fi
# A study of issue 7 (reports/study/$STUDY.yaml), resumed from its committed directory, on the corpus prepared on
# the CPU machine and carried along (carry [".devbundle", ".gpu"]); make it there once with
#   python3 -m scaling data prepare --out /tmp/pack/corpus && mkdir -p .gpu \
#     && tar -C /tmp/pack -cJf .gpu/corpus.tar.xz corpus
# and check that /tmp/pack/corpus/manifest.json's text_sha256 is the one in the study's spec.
if has study; then
  mkdir -p /tmp/deltamup && tar -C /tmp/deltamup -xJf .gpu/corpus.tar.xz
  for S in $STUDY; do  # several studies in turn (STUDY="gdn-sgd gdp2-adamw"), each while a minute is left
    [ "$(left)" -gt 60 ] || break
    # STUDY_EXTRA applies to every study; STUDY_EXTRA_<name> (dashes as underscores) to that one only, e.g.
    # STUDY_EXTRA_gdp2_adamw="--set widths=[256,512]" (Ray starts the widest trials first: narrow widths first
    # gives a partial study its base width).
    X="STUDY_EXTRA_${S//-/_}"
    D="$R/study-$S"; mkdir -p "$D"
    [ -d "results/sweeps/study-$S" ] && cp -r "results/sweeps/study-$S/." "$D/"
    timeout -s INT $(left) python3 -m sweeps "reports/study/$S.yaml" --out "$D" --resume \
      --set task.path=/tmp/deltamup/corpus ${STUDY_EXTRA:-} ${!X:-} --progress-every 30 2>&1 | tee "$R/study-$S.log"
    rm -rf "$D/ray" "$D/driver.lock"
  done
fi
echo "all done at $(( $(date +%s) - T0 )) s"
tar -C "${OUT:-out}" -czf "${OUT:-out}/gpu-results.tgz" r && rm -rf "$R"
