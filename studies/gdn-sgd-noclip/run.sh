#!/usr/bin/env bash
# The study in parts, most decisive first, each resuming the sweep directory DIR (finished trials are skipped, so a
# part cut short continues where it stopped when run again). From the repository root, on a GPU machine:
#   bash studies/gdn-sgd-noclip/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (the default byte corpus)
# PART: coarse  seed 0 over the whole grid: 4 widths × SP, naive µP, GDN-µP × the 10 LRs
#       seeds   seeds 1 and 2 at each (width, parametrization)'s seed-0 optimum e and its neighbours e/2, 2e
#       edge    one more LR, seeds 0–2, wherever a 3-seed optimum is the smallest or largest LR run
#       clip20  GDN-µP with a clipping threshold of 20 (does it bind?), seed 0, the whole grid, into DIR-clip20
#               (the trial ids do not hold the threshold); each trial records its clipped_fraction
#       gates   gdn-mup-sgdgates (W_α, W_β's SGD LR × 1/m instead of × 1/√m), seed 0, 2^-9 … 2^-4 (every optimum
#               of coarse lies in 2^-7 … 2^-4 and every trial at 2^-3 and above diverged)
#       gates-seeds  seeds 1 and 2 at gdn-mup-sgdgates' seed-0 optimum e at each width and e/2, 2e (one seed of SGD
#               moves 0.1–0.2 nats between neighbouring LRs)
#       hidden  gdn-mup-sgdhidden (the hidden matrices' SGD LR × 1/√m instead of × 1), seed 0, 2^-9 … 2^-4
#       mech    what costs GDN-µP against naive µP under SGD, one difference at a time: gdn-mup-mupgates (naive µP's
#               gate rules: W_α, W_β at LR × m instead of × 1/√m, A_log, dt_bias at × 1 instead of × √m) and
#               gdn-mup-nosqrtd (no √d before the output norm), widths 256 and 1024, 2^-8 … 2^-4, seeds 0–2
#       nosqrtd gdn-mup-nosqrtd at widths 512 and 768 as well (2^-8 … 2^-4, seeds 0–2): does the √d's cost grow with
#               width, and does the variant's optimum transfer over all four widths
set -eu
trap 'exit 130' INT TERM  # a cut stops every part (the sweep itself records what finished)
DIR=$1; CORPUS=$2; shift 2
SPEC=${SPEC:-studies/gdn-sgd-noclip/spec.yaml}  # SPEC=…: a smaller copy, e.g. to try the script on a CPU
source studies/parts.sh  # sweep, sweep_to, optima, lrs, seeds_around, edges
known_parts "coarse seeds edge clip20 gates gates-seeds hidden mech nosqrtd" "$@"
for PART in "$@"; do
  case $PART in
    coarse) sweep --set 'seeds=[0]' ;;
    seeds) seeds_around "256 512 768 1024" "sp mup gdn-mup" -5 ;;
    edge) edges ;;
    clip20) sweep_to "${DIR%/}-clip20" --set grad_clip=20 --set 'parametrizations=[gdn-mup]' --set 'seeds=[0]' ;;
    gates) sweep --set 'parametrizations=[gdn-mup-sgdgates]' --set "lrs=$(lrs -9 -8 -7 -6 -5 -4)" --set 'seeds=[0]' ;;
    gates-seeds) seeds_around "256 512 768 1024" gdn-mup-sgdgates -5 ;;
    hidden) sweep --set 'parametrizations=[gdn-mup-sgdhidden]' --set "lrs=$(lrs -9 -8 -7 -6 -5 -4)" \
                  --set 'seeds=[0]' ;;
    mech) sweep --set 'parametrizations=[gdn-mup-mupgates, gdn-mup-nosqrtd]' --set 'widths=[256, 1024]' \
                --set "lrs=$(lrs -8 -7 -6 -5 -4)" --set 'seeds=[0, 1, 2]' ;;
    nosqrtd) sweep --set 'parametrizations=[gdn-mup-nosqrtd]' --set 'widths=[512, 768]' \
                   --set "lrs=$(lrs -8 -7 -6 -5 -4)" --set 'seeds=[0, 1, 2]' ;;
  esac
done
