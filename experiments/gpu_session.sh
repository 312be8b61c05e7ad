#!/usr/bin/env bash
# One H200 call (2026-11-29): everything this project measures on a GPU, in priority order, each part writing as it
# goes so that a cut-off still returns what finished. Run from the repository root with the bundle:
#   source .devbundle/setup.sh && export PYTHONPATH=$PWD:$PYTHONPATH && OUT=$OUT bash experiments/gpu_session.sh
set -u
R=${OUT:-out}/r; mkdir -p "$R"
T0=$(date +%s); left() { echo $(( ${BUDGET:-530} - ($(date +%s) - T0) )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$R/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$R/gpu.txt"

# 1. Compile the Triton kernels for the study's head dims (K = 0.75·d/6 at d = 256, 512, 1024, 1536), in parallel.
timeout 180 python3 experiments/warm_triton.py 32 64 128 192 > "$R/warm.log" 2>&1 &
WARM=$!

# 2. Coordinate checks far past the CPU's widths: fp32, PyTorch chunked kernel (no compile), widths 128…4096.
timeout 250 bash -c '
R=$0
for c in "gdn gdn-mup adamw" "gdn gdn-mup sgd" "gdn mup adamw" "gdn sp adamw" "deltaproduct gdn-mup adamw"; do
  set -- $c
  python3 -m scaling coord-check --model $1 -p $2 --optimizer $3 --widths 128,256,512,1024,2048,4096 \
    --fp32 --kernel-backend torch --raw --out "$R/cc-fp32-$1-$2-$3" > "$R/cc-fp32-$1-$2-$3.log" 2>&1
done' "$R" &
CC=$!
wait $WARM; echo "warm done at $(( $(date +%s) - T0 )) s"; cat "$R/warm.log"

# 3. The same check in bf16 through the Triton kernels at the study's widths.
timeout 100 python3 -m scaling coord-check --model gdn -p gdn-mup --optimizer adamw --widths 256,512,1024,1536 \
  --kernel-backend triton --raw --out "$R/cc-bf16-triton-gdn-gdn-mup-adamw" > "$R/cc-bf16.log" 2>&1

# 4. Model level: the Triton path trains like the PyTorch path.
timeout 120 python3 experiments/triton_vs_torch.py --width 512 --depth 4 --steps 200 2>&1 | tee "$R/triton_vs_torch.log"
wait $CC; echo "coordinate checks done at $(( $(date +%s) - T0 )) s"

# 5. The paper's AdamW grid at a reduced budget, small widths packed on the GPU (resumable; what is left is listed).
timeout -s INT $(left) python3 -m sweeps sweeps/specs/gdn-adamw.yaml --out "$R/sweep-gdn-adamw" \
  --set task=sample --set steps=100 --set warmup_steps=10 --set log_every=25 \
  --set "parametrizations=[gdn-mup]" --set "lrs={log_range: [1.0e-3, 8.0e-3], num: 4}" --set eval.batches=4 \
  --progress-every 20 2>&1 | tee "$R/sweep.log"
echo "all done at $(( $(date +%s) - T0 )) s"
tar -C "${OUT:-out}" -czf "${OUT:-out}/gpu-results.tgz" r && rm -rf "$R"
