#!/usr/bin/env bash
# The study's remaining parts, each resuming the sweep directory DIR (finished trials are skipped, so a part cut
# short continues where it stopped when run again). From the repository root, on a GPU machine:
#   bash studies/gdp2-adamw/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (spec.yaml names its sha256)
# PART: w1536  width 1536, SP and GDN-µP, the spec's 7 LRs, seed 0 (the grid's missing column)
#       seeds  seeds 1 and 2 at each (width, parametrization)'s seed-0 optimum e and its neighbours e/2, 2e
#       neg    β ∈ [0, 2] (allow_neg_eigval), widths 256 and 1024, SP and GDN-µP, the 7 LRs, seed 0, into the
#              sweep directory DIR-neg (the trial ids do not hold β's range)
set -eu
trap 'exit 130' INT TERM  # a cut stops every part (the sweep itself records what finished)
DIR=$1; CORPUS=$2; shift 2
SPEC=studies/gdp2-adamw/spec.yaml
sweep() { python3 -m deltamup sweep "$SPEC" --resume --warm-kernels --progress-every 60 --set task.path="$CORPUS" "$@"; }
optima() { python3 studies/optima.py "$DIR" "$@"; }  # MODE [WIDTH PARAM DEFAULT]: see studies/optima.py
lrs() { python3 -c "import sys; print('[' + ', '.join(repr(2.0 ** int(e)) for e in sys.argv[1:]) + ']')" "$@"; }
for PART in "$@"; do
  case $PART in
    w1536) sweep --out "$DIR" --set 'widths=[1536]' ;;
    seeds)
      for W in 256 512 1024 1536; do
        for P in sp gdn-mup; do
          e=$(optima seed0 "$W" "$P" -9)
          echo "seeds 1-2: $P at width $W around its seed-0 optimum 2^$e"
          sweep --out "$DIR" --set "widths=[$W]" --set "parametrizations=[$P]" \
                --set "lrs=$(lrs "$e" $((e - 1)) $((e + 1)))" --set 'seeds=[1, 2]'
        done
      done ;;
    neg) sweep --out "${DIR%/}-neg" --set 'model.allow_neg_eigval=true' --set 'widths=[256, 1024]' ;;
    *) echo "unknown part $PART (w1536, seeds, neg)" >&2; exit 2 ;;
  esac
done
