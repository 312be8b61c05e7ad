#!/usr/bin/env bash
# The depth-8 long check on the corpus (README's command) with every matrix's probes (dWx., dW., in., align.,
# srank.), seeds side by side on one GPU: a process a seed, each finished width kept in its coords.parquet, so a
# time limit costs the width it cuts and nothing before it.
#   bash studies/coord-checks/long-8l/matrix.sh OUT CORPUS SECONDS [SEED…]      (default seeds 0 1 2)
set -eu
(( $# >= 3 )) || { echo "usage: matrix.sh OUT CORPUS SECONDS [SEED…]" >&2; exit 2; }
out=$1 corpus=$2 seconds=$3
shift 3
[ -d "$corpus" ] || { echo "matrix.sh: no corpus $corpus" >&2; exit 2; }
mkdir -p "$out"
seeds=("$@")
(( ${#seeds[@]} )) || seeds=(0 1 2)
for seed in "${seeds[@]}"; do
  (
    rc=0
    DELTAMUP_AUTOTUNE=0 timeout -k 15 "$seconds" deltamup coord-check -p gdn-mup --optimizer adamw --depth 8 \
      --heads 6 --base-width 256 --widths 256,512,1024,2048 --batch-size 16 --seq-len 1024 --steps 300 \
      --lr 0.001953125 --schedule cosine --warmup-steps 30 --min-lr-ratio 0.1 --grad-clip 1.0 --weight-decay 0.1 \
      --every 25 --device cuda --data "$corpus" --seed "$seed" --matrix-probes --raw \
      --out "$out/h200-bf16-corpus-matrix-s$seed" > "$out/s$seed.log" 2>&1 || rc=$?
    echo "seed $seed: exit $rc at $(date -u +%T)"
  ) &
done
wait
