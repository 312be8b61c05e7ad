#!/usr/bin/env bash
# Back on the CPU machine after a GPU call with stage "study": fold each study in the call's gpu-results.tgz into its
# committed sweep directory, regenerate its report and the overview of all studies. Run from the repository root:
#   bash experiments/import_study.sh /work/.device/N/gpu-results.tgz [LOG_TAG]
# results/sweeps/study-<name>/ gets the run's trial records (finished trials are never overwritten by a resume, so
# copying over is safe) and the call's log as sweep-<LOG_TAG>.log; reports/study/<name>/ is rewritten (small files
# only: no parquet, no index.html); reports/study/overview.md covers every study with a report.
set -euo pipefail
TGZ=$1; TAG=${2:-$(date -u +%Y-%m-%d-%H%M)}
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
tar -C "$TMP" -xzf "$TGZ"
shopt -s nullglob
dirs=("$TMP"/r/study-*/)
[ ${#dirs[@]} -gt 0 ] || { echo "no study directory in $TGZ" >&2; exit 2; }
for D in "${dirs[@]}"; do
  S=$(basename "$D"); S=${S#study-}
  DEST=results/sweeps/study-$S; mkdir -p "$DEST"
  cp -r "$D". "$DEST"/ && rm -rf "$DEST/ray" "$DEST/driver.lock"
  [ -f "$TMP/r/study-$S.log" ] && cp "$TMP/r/study-$S.log" "$DEST/sweep-$TAG.log"
  chmod -R u+w "$DEST"
  python3 -m scaling report "$DEST" --out "reports/study/$S"
  rm -f "reports/study/$S"/*.parquet "reports/study/$S/index.html"
done
reports=(); for R in reports/study/*/; do [ -f "$R/transfer.csv" ] && reports+=("${R%/}"); done
python3 -m scaling overview "${reports[@]}" --out reports/study/overview.md
