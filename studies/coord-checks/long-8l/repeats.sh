#!/usr/bin/env bash
# How far two runs of the corpus check that differ only in rounding part (seed 0, widths 256 and 512, 300 steps):
# the same command twice (the GPU's bf16 kernels are not bit-reproducible run to run) and once with Adam's ε moved
# from 1e-8 to 1.01e-8, side by side on one GPU; prints the probe-batch loss at t = 0, 25, 100, 200, 300.
#   bash studies/coord-checks/long-8l/repeats.sh OUT CORPUS
set -eu
(( $# == 2 )) || { echo "usage: repeats.sh OUT CORPUS" >&2; exit 2; }
out=$1 corpus=$2
[ -d "$corpus" ] || { echo "repeats.sh: no corpus $corpus" >&2; exit 2; }
options=(-p gdn-mup --optimizer adamw --depth 8 --heads 6 --base-width 256 --widths 256,512 --batch-size 16
         --seq-len 1024 --steps 300 --lr 0.001953125 --schedule cosine --warmup-steps 30 --min-lr-ratio 0.1
         --grad-clip 1.0 --weight-decay 0.1 --every 25 --device cuda --data "$corpus" --seed 0 --raw)
run() { DELTAMUP_AUTOTUNE=0 deltamup coord-check "${options[@]}" "${@:2}" --out "$out/$1" > "$out/$1.log" 2>&1; }
mkdir -p "$out"
run new & run new2 & run eps --adam-eps 1.01e-8 &
wait
python3 - "$out" <<'PY'
import sys

import pyarrow.parquet as pq

for name in ("new", "new2", "eps"):
    rows = pq.read_table(f"{sys.argv[1]}/{name}/coords.parquet").to_pylist()
    loss = {(r["width"], r["step"]): r["rms"] for r in rows if r["probe"] == "loss"}
    print(name, " ".join(f"{w}:{s}:{v:.4f}" for (w, s), v in sorted(loss.items()) if s in (0, 25, 100, 200, 300)))
PY
