#!/usr/bin/env bash
# The study in parts, most decisive first, each resuming the sweep directory DIR (finished trials are skipped, so a
# part cut short continues where it stopped when run again). From the repository root, on a GPU machine:
#   bash studies/gdn-sgd-noclip/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (the default byte corpus)
# PART: coarse  seed 0 over the whole grid: 4 widths × SP, naive µP, GDN-µP × the 10 LRs
#       seeds   seeds 1 and 2 at each (width, parametrization)'s seed-0 optimum e and its neighbours e/2, 2e
#       edge    one more LR, seeds 0–2, wherever a 3-seed optimum is the smallest or largest LR run
#       clip20  GDN-µP with a clipping threshold of 20 (does it bind?), seed 0, the whole grid, into DIR-clip20
#               (the trial ids do not hold the threshold); each trial records its clipped_fraction
set -eu
trap 'exit 130' INT TERM  # a cut stops every part (the sweep itself records what finished)
DIR=$1; CORPUS=$2; shift 2
SPEC=studies/gdn-sgd-noclip/spec.yaml
sweep() { python3 -m deltamup sweep "$SPEC" --resume --warm-kernels --progress-every 60 --set task.path="$CORPUS" "$@"; }
optima() { python3 studies/optima.py "$DIR" "$@"; }  # MODE [WIDTH PARAM DEFAULT]: see studies/optima.py
lrs() { python3 -c "import sys; print('[' + ', '.join(repr(2.0 ** int(e)) for e in sys.argv[1:]) + ']')" "$@"; }
for PART in "$@"; do
  case $PART in
    coarse) sweep --out "$DIR" --set 'seeds=[0]' ;;
    seeds)
      for W in 256 512 768 1024; do
        for P in sp mup gdn-mup; do
          e=$(optima seed0 "$W" "$P" -5)
          echo "seeds 1-2: $P at width $W around its seed-0 optimum 2^$e"
          sweep --out "$DIR" --set "widths=[$W]" --set "parametrizations=[$P]" \
                --set "lrs=$(lrs "$e" $((e - 1)) $((e + 1)))" --set 'seeds=[1, 2]'
        done
      done ;;
    edge)
      optima edges | while read -r WIDTH PARAM E; do
        echo "edge: $PARAM at width $WIDTH, 2^$E"
        sweep --out "$DIR" --set "widths=[$WIDTH]" --set "parametrizations=[$PARAM]" --set "lrs=$(lrs "$E")" \
              --set 'seeds=[0, 1, 2]'
      done ;;
    clip20) sweep --out "${DIR%/}-clip20" --set grad_clip=20 --set 'parametrizations=[gdn-mup]' --set 'seeds=[0]' ;;
    *) echo "unknown part $PART (coarse, seeds, edge, clip20)" >&2; exit 2 ;;
  esac
done
