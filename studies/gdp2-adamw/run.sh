#!/usr/bin/env bash
# The study's remaining parts, each resuming the sweep directory DIR (finished trials are skipped, so a part cut
# short continues where it stopped when run again). From the repository root, on a GPU machine:
#   bash studies/gdp2-adamw/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (spec.yaml names its sha256)
# PART: w1536  width 1536, SP and GDN-µP, the spec's 7 LRs, seed 0 (the grid's missing column)
#       seeds  seeds 1 and 2 at each (width, parametrization)'s seed-0 optimum e and its neighbours e/2, 2e
#       neg    β ∈ [0, 2] (allow_neg_eigval), widths 256 and 1024, SP and GDN-µP, the 7 LRs, seed 0, into the
#              sweep directory DIR-neg (the trial ids do not hold β's range)
#       neg-seeds  β ∈ [0, 2]: seeds 1 and 2 at each (width, parametrization)'s seed-0 optimum e in DIR-neg and
#              e/2, 2e, into DIR-neg (after neg)
set -eu
trap 'exit 130' INT TERM  # a cut stops every part (the sweep itself records what finished)
DIR=$1; CORPUS=$2; shift 2
SPEC=${SPEC:-studies/gdp2-adamw/spec.yaml}  # SPEC=…: a smaller copy, e.g. to try the script on a CPU
source studies/parts.sh  # sweep, sweep_to, optima, lrs, seeds_around(_in), edges
known_parts "w1536 seeds neg neg-seeds" "$@"
for PART in "$@"; do
  case $PART in
    w1536) sweep --set 'widths=[1536]' ;;
    seeds) seeds_around "256 512 1024 1536" "sp gdn-mup" -9 ;;
    neg) sweep_to "${DIR%/}-neg" --set 'model.allow_neg_eigval=true' --set 'widths=[256, 1024]' ;;
    neg-seeds) seeds_around_in "${DIR%/}-neg" "256 1024" "sp gdn-mup" -9 --set 'model.allow_neg_eigval=true' ;;
  esac
done
