#!/usr/bin/env bash
# The study's parts in the README's order, each resuming the sweep directory DIR (finished trials are skipped, so a
# part cut short continues where it stopped when run again). From the repository root, on a GPU machine:
#   bash studies/gdn-adamw-8l/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (spec.yaml names its sha256)
# PART: base   widths 256, SP and GDN-µP, 2^-10 … 2^-7, seeds 0–2
#       wide   width 1024, seed 0 first, then seeds 1 and 2: SP at the base optimum b and b/2, b/4 (where SP's optimum moves with width),
#              GDN-µP at its base optimum g and g/2, 2g (where a transferring optimum stays); b and g are the base
#              width's grid optima (mean over seeds), 2^-8 and 2^-9 (the 4-layer study's) until the base has run
set -eu
trap 'exit 130' INT TERM  # a cut stops every part (the sweep itself records what finished)
DIR=$1; CORPUS=$2; shift 2
SPEC=studies/gdn-adamw-8l/spec.yaml
sweep() { python3 -m deltamup sweep "$SPEC" --out "$DIR" --resume --warm-kernels --progress-every 60 \
            --set task.path="$CORPUS" "$@"; }
base_optimum() {  # log2 of parametrization $1's best LR at width 256 (mean val_loss over seeds), or $2
  python3 - "$DIR" "$1" "$2" <<'PY'
import glob, json, math, statistics, sys
rows = [json.load(open(f)) for f in glob.glob(f"{sys.argv[1]}/results/*.json")]
by_lr = {}
for r in rows:
    if r["parametrization"] == sys.argv[2] and r["width"] == 256 and r["status"] == "ok":
        by_lr.setdefault(r["lr"], []).append(r["val_loss"])
full = {lr: statistics.mean(v) for lr, v in by_lr.items() if len(v) == 3}
print(round(math.log2(min(full, key=full.get))) if len(full) >= 3 else sys.argv[3])
PY
}
lrs() { python3 -c "import sys; print('[' + ', '.join(repr(2.0 ** int(e)) for e in sys.argv[1:]) + ']')" "$@"; }
for PART in "$@"; do
  case $PART in
    base) sweep --set 'widths=[256]' --set 'parametrizations=[sp, gdn-mup]' --set "lrs=$(lrs -10 -9 -8 -7)" ;;
    wide)
      b=$(base_optimum sp -8); g=$(base_optimum gdn-mup -9)
      SP=$(lrs $((b - 2)) $((b - 1)) $b); MUP=$(lrs $((g - 1)) $g $((g + 1)))
      echo "width 1024: SP at $SP (base optimum 2^$b), GDN-µP at $MUP (base optimum 2^$g)"
      for SEEDS in '[0]' '[1, 2]'; do
        if [ "$SP" = "$MUP" ]; then
          sweep --set 'widths=[1024]' --set 'parametrizations=[sp, gdn-mup]' --set "lrs=$SP" --set "seeds=$SEEDS"
        else
          sweep --set 'widths=[1024]' --set 'parametrizations=[gdn-mup]' --set "lrs=$MUP" --set "seeds=$SEEDS"
          sweep --set 'widths=[1024]' --set 'parametrizations=[sp]' --set "lrs=$SP" --set "seeds=$SEEDS"
        fi
      done ;;
    *) echo "unknown part $PART (base, wide)" >&2; exit 2 ;;
  esac
done
