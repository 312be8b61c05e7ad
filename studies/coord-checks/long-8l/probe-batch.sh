#!/usr/bin/env bash
# Which data did a check read? The width-256 model's probe batch at t = 0, on the CPU in fp32, by two codes on one
# corpus build: the embedding's output RMS (the initial table looked up at the batch's tokens; no code change moves
# it) and the probe loss. Compare them with a GPU check's t = 0 rows: the same RMS, the same tokens.
#   bash studies/coord-checks/long-8l/probe-batch.sh CORPUS [BEFORE]
# from the repository root; the other code is the last commit before BEFORE (default 2026-12-01 11:09, the code of
# the first long-8l check)
set -eu
(( $# >= 1 && $# <= 2 )) || { echo "usage: probe-batch.sh CORPUS [BEFORE]" >&2; exit 2; }
corpus=$1 before=${2:-2026-12-01 11:09 +0000}
[ -d "$corpus" ] || { echo "probe-batch.sh: no corpus $corpus" >&2; exit 2; }
commit=$(git rev-list -1 --before="$before" HEAD)
[ -n "$commit" ] || { echo "probe-batch.sh: no commit before $before" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bash maintainers/gpu/tree.sh "$commit" "$work/tree" > /dev/null
options=(coord-check -p gdn-mup --optimizer adamw --depth 8 --heads 6 --base-width 256 --widths 128,256
         --batch-size 16 --seq-len 1024 --steps 1 --lr 0.001953125 --schedule cosine --warmup-steps 0
         --min-lr-ratio 0.1 --grad-clip 1.0 --weight-decay 0.1 --every 1 --device cpu --data "$corpus" --seed 0 --raw)
deltamup "${options[@]}" --out "$work/installed" > "$work/installed.log" 2>&1 &
installed=$!
python3 maintainers/gpu/run_tree.py "$work/tree" "${options[@]}" --out "$work/$commit" > "$work/$commit.log" 2>&1 &
earlier=$!
failed() { echo "probe-batch.sh: $1's check failed:" >&2; tail -3 "$2" >&2; exit 1; }
wait "$installed" || failed "the installed code" "$work/installed.log"
wait "$earlier" || failed "the earlier code" "$work/$commit.log"
python3 - "$work" "$commit" "$corpus" "$(git log -1 --format=%cd --date=format:'%Y-%m-%d %H:%M' "$commit")" <<'PY'
import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

work, commit, corpus, dated = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
print(f"corpus {corpus}: tokens sha256 {json.loads((corpus / 'manifest.json').read_text())['tokens_sha256'][:16]}")
for name, label in (("installed", "the installed code"), (commit, f"the code of {dated}")):
    rows = pq.read_table(work / name / "coords.parquet").to_pylist()
    at0 = {r["probe"]: r["rms"] for r in rows if r["width"] == 256 and r["step"] == 0}
    print(f"{label:>32}, width 256, t = 0: embed RMS {at0['embed']:.7f}, probe loss {at0['loss']:.4f}")
PY
