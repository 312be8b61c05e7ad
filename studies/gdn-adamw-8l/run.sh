#!/usr/bin/env bash
# The study's parts in the README's order, each resuming the sweep directory DIR (finished trials are skipped, so a
# part cut short continues where it stopped when run again). From the repository root, on a GPU machine:
#   bash studies/gdn-adamw-8l/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (spec.yaml names its sha256)
# PART: base   width 256, SP and GDN-µP, 2^-10 … 2^-7, seeds 0–2
#       wide   width 1024, seed 0 first, then seeds 1 and 2: SP at the base optimum b and b/2, b/4 (where SP's
#              optimum moves with width), GDN-µP at its base optimum g and g/2, 2g (where a transferring optimum
#              stays); b and g are width 256's optima (mean over 3 seeds), 2^-8 and 2^-9 until it has run
#       edge   one more learning rate, 3 seeds, wherever a (parametrization, width)'s optimum over the learning
#              rates run with 3 seeds is the smallest or the largest of them
#       w2048  width 2048, seed 0 first: SP at b, b/2, b/4, b/8 and GDN-µP at g/2, g, 2g, b and g now width 1024's;
#              then, around each one's seed-0 optimum e at 2048: seed 0 at e/2 and 2e where missing (SP's 2e
#              first), and seeds 1 and 2 at e/2, e, 2e
#       mech   the mechanisms one at a time at widths 256 and 1024, 3 seeds: GDN-µP without the √d before the norm
#              (gdn-mup-nosqrtd), with naive µP's gate rules (gdn-mup-mupgates) and with Adam's ε per role
#              (gdn-mup-adameps), each at GDN-µP's optimum g at that width and g/2, 2g
#       betalr W_β's own AdamW LR (gdn-mup-betalr, × m^-5/4 where GDN-µP's is × 1/m; docs/theory.md item 6) the same
#              way at widths 1024 and 2048 (at the base width 256 it is GDN-µP): a paired comparison by seed
#       code   the paper's code variant alone (gdn-mup-code: c/√d inits, no √d before the norm, the mixer output
#              × 1/m; unlike mech's variants it differs from GDN-µP at the base width too) at widths 256 and 1024,
#              3 seeds, at GDN-µP's optimum there and its neighbours; `others` adds the rest of its cells
#       code-rules  the code variant's rules apart at width 1024, 3 seeds, at GDN-µP's optimum there and its
#              neighbours (the code variant's LRs): its convolutions at their own init (gdn-mup-code-convinit) and
#              GDN-µP with the mixer output × 1/m alone (gdn-mup-mixer1m); a paired comparison by seed with both
#       gates-apart  naive µP's two gate-matrix rules apart at width 1024, 3 seeds, at GDN-µP's optimum there and its
#              neighbours: W_α, W_β's init σ alone (gdn-mup-gateinit) and their AdamW LR × 1 alone (gdn-mup-gatelr);
#              together they are mech's gdn-mup-mupgates, which cost 0.036 nats there
#       hidden-wd  naive µP's third rule alone, at widths 1024 then 2048, 3 seeds, at GDN-µP's optimum there and its
#              neighbours: the hidden matrices' AdamW weight decay × m (gdn-mup-mupwd; GDN-µP's × 1), which with
#              the √d (mech) and the gate rules (mech, gates-apart) makes naive µP; paired by seed with GDN-µP and
#              naive µP, which falls behind GDN-µP from 1024 to 2048
#       gates-2048  naive µP's gate rules whole (gdn-mup-mupgates, as in mech) at width 2048, 3 seeds, at GDN-µP's
#              optimum there and its neighbours: naive µP falls behind GDN-µP there and its seeds scatter seven
#              times as much as the others'; with hidden-wd's 2048 cells it says which rule carries either
#       code-conv  the code variant's convolution init on GDN-µP at widths 1024 then 256, 3 seeds, at GDN-µP's
#              optimum there and its neighbours: alone (gdn-mup-codeconv: a small v, the output norm still
#              normalising) and with no √d (gdn-mup-codeconv-nosqrtd: the code variant's ε regime); code-rules found
#              the code variant's lead going with that init, within its other rules; width 256 says whether the
#              init's lead is a width effect (0.5/√d is 9× below the convs' own init there, 18× at 1024)
#       eps-regime the same ε regime with v at full size at width 1024, 3 seeds, around GDN-µP's optimum: no √d and
#              the output norm's ε × 100 (gdn-mup-epsregime; its own graph: the ε is a constant of the compiled norm)
#       conv-why  why the code's convolution init leads, its two effects apart at widths 256 then 1024, 3 seeds,
#              at GDN-µP's optimum there and its neighbours: the convs at their own init with the relative AdamW
#              step the code's init gives them (gdn-mup-convstep: LR × √(d/3)) and the code's init with their own
#              init's relative step (gdn-mup-codeconv-ownstep: LR × √(3/d)); paired by seed with gdn-mup-codeconv
#       others naive µP and the paper's code variant (gdn-mup-code), 3 seeds: 2^-10 … 2^-7 at width 256,
#              GDN-µP's optimum g at 1024 with g/2, 2g, and at 2048 each one's seed-0 best e among three or more
#              LRs there (GDN-µP's optimum there before that) with e/2, 2e; the cells at 256 and 1024, then those at
#              2048, each seed 0 first and then seeds 1 and 2 around seed 0's optimum
#       mid    widths 512 and 1536, 3 seeds, each parametrization at the mean (in octaves) of its optima at the
#              widths either side and one octave each way (naive µP and the code variant: GDN-µP's); one sweep
#       depth4 the same 1200 steps at depth 4, widths 256 and 1024, SP and GDN-µP, 2^-10 … 2^-7, seeds 0–2, into
#              the sweep directory DIR-4l (the trial ids do not hold the depth): with the 4-layer studies' 300 steps
#              and this study's 8 layers, it tells whether the steps or the depth turn SP's lead at 4 layers around;
#              then one more LR, seeds 0–2, beyond each 3-seed optimum on the edge of its LRs
#       long   4× the steps (4800, 78.6M tokens a trial) at widths 256 and 1024, SP and GDN-µP at each one's
#              optimum at that width and its two neighbours, seed 0, into the sweep directory DIR-4x (the trial ids
#              do not hold the steps): validation loss at 25/50/100% = 19.7M, 39.3M, 78.6M tokens; where the
#              4x optimum is one of the outer two LRs, one more LR beyond it
#       long-seeds  seeds 1 and 2 at the long part's twelve cells (each one's 19.7M-token optimum and its two
#              neighbours at 256 and 1024), into DIR-4x: one seed at 4x the steps leaves every optimum's interval
#              open; first the four cells at each one's seed-0 4x optimum (SP against GDN-µP at own best, 3 seeds)
#       recheck SP and GDN-µP at width 1024, each at its optimum there, seeds 0–2, re-run by the code at hand into
#              DIR-recheck (the same trial ids): `python3 studies/recheck.py DIR DIR-recheck` says how far the code
#              changes since the trials ran, and the run itself, moved them
#       recheck-256  GDN-µP at width 256, 2^-10 … 2^-8, seeds 0–2, re-run the same way: its trials there ran on
#              H200s with the code of 2026-11-30, the conv-why variants' beside them on an H100 with later code
#       recheck-slope  GDN-µP's optima at 256 and 1024 both by the code at hand, into DIR-recheck: 2^-7 at 256 (the
#              re-run's best fell on recheck-256's high edge), 2^-9 and 2^-7 at 1024 beside recheck's 2^-8, seeds 0–2:
#              its drift from 256 to 1024 on one GPU kind and code
#       recheck-2048  GDN-µP at width 2048, 2^-9 … 2^-7, seeds 0–2, re-run the same way into DIR-recheck: its trials
#              there ran on H200s by the study's first code, naive µP's and the code variant's beside them on an
#              H100 by later code; paired with these, their gaps at 2048 compare one GPU kind and code
#       recheck-h200  GDN-µP at width 256, 2^-10 … 2^-7, seeds 0–2, by the code at hand on an H200 (it refuses any
#              other GPU), into DIR-recheck-h200: beside the originals (H200s, earlier code) and recheck-256 and
#              recheck-slope (an H100, this code), it says whether the GPU kind or the code moved recheck-256's 2^-8
#       recheck-seeds  GDN-µP's re-run cells (2^-10 … 2^-7 at width 256, 2^-9 … 2^-7 at 1024 and 2048) at seeds 3–7
#              on an H100 (it refuses any other GPU) into DIR-recheck: widths 256 and 2048 first, seeds 3 and 4
#              before 5–7, then 1024: at the re-runs' scatter 8 seeds call a slope of 0 `transfers` about two times
#              in three, the ends alone as often (studies/interval-coverage/power.py, power-ends.md)
#       recheck-code  the same question on any GPU: GDN-µP at width 256, 2^-9 and 2^-8, seeds 0–2, by the code that
#              trained the originals (commit e59e93a, its spec), into DIR-recheck-original-code; needs that
#              commit's tree, TREE=.gpu/trees/e59e93a (bash maintainers/gpu/tree.sh e59e93a .gpu/trees/e59e93a, carried)
set -eu
trap 'exit 130' INT TERM  # a cut stops every part (the sweep itself records what finished)
DIR=$1; CORPUS=$2; shift 2
SPEC=${SPEC:-studies/gdn-adamw-8l/spec.yaml}  # SPEC=…: a smaller copy, e.g. to try the script on a CPU
source studies/parts.sh  # sweep, sweep_to, optima, lrs, seeds_around, edges
long_groups() {  # X, LONG and groups: the long parts' sweep directory, settings and cells (each one's optimum ±1)
  X="${DIR%/}-4x"; LONG=(--set steps=4800 --set warmup_steps=480); groups=()
  for W in 256 1024; do
    for P in sp gdn-mup; do
      e=$(optima optimum "$W" "$P" -9)
      echo "4x steps: $P at width $W around 2^$e"
      groups+=("$W $P $((e - 1)) $e $((e + 1))")
    done
  done
}
around_gdn_mup() {  # "PARAMETRIZATIONS" WIDTH…: each width at GDN-µP's optimum g there and g/2, 2g, seeds 0–2;
  local PS=$1 W g share; shift  # width 1024 two a GPU (auto: a whole one; 93% busy against 85%, tokens/s alike)
  for W in "$@"; do
    g=$(optima optimum "$W" gdn-mup -9)
    share=auto; [ "$W" = 1024 ] && share=0.5
    echo "$PS at width $W around GDN-µP's optimum 2^$g"
    sweep --set "widths=[$W]" --set "parametrizations=[$PS]" --set "lrs=$(lrs $((g - 1)) "$g" $((g + 1)))" \
          --set 'seeds=[0, 1, 2]' --set "resources.gpu=$share"
  done
}
two() {  # WIDTH SP_LRS MUP_LRS: seed 0 first, then seeds 1 and 2
  for SEEDS in '[0]' '[1, 2]'; do
    sweep --set "widths=[$1]" --set 'parametrizations=[gdn-mup]' --set "lrs=$3" --set "seeds=$SEEDS"
    sweep --set "widths=[$1]" --set 'parametrizations=[sp]' --set "lrs=$2" --set "seeds=$SEEDS"
  done
}
known_parts "base wide edge w2048 mech betalr code code-rules gates-apart hidden-wd gates-2048 code-conv eps-regime conv-why others mid depth4 long long-seeds recheck recheck-256 recheck-slope recheck-2048 recheck-h200 recheck-seeds recheck-code" "$@"
for PART in "$@"; do
  case $PART in
    base) sweep --set 'widths=[256]' --set 'parametrizations=[sp, gdn-mup]' --set "lrs=$(lrs -10 -9 -8 -7)" ;;
    wide)
      b=$(optima optimum 256 sp -8); g=$(optima optimum 256 gdn-mup -9)
      echo "width 1024: base optima SP 2^$b, GDN-µP 2^$g"
      two 1024 "$(lrs $((b - 2)) $((b - 1)) $b)" "$(lrs $((g - 1)) $g $((g + 1)))" ;;
    edge) edges ;;
    w2048)
      b=$(optima optimum 1024 sp -10); g=$(optima optimum 1024 gdn-mup -9)
      echo "width 2048: width 1024's optima SP 2^$b, GDN-µP 2^$g"
      sweep --set 'widths=[2048]' --set 'parametrizations=[gdn-mup]' --set "lrs=$(lrs $((g - 1)) $g $((g + 1)))" \
            --set 'seeds=[0]'
      sweep --set 'widths=[2048]' --set 'parametrizations=[sp]' --set "lrs=$(lrs $b $((b - 1)) $((b - 2)) $((b - 3)))" \
            --set 'seeds=[0]'
      for P in sp gdn-mup; do
        e=$(optima seed0 2048 "$P" "$g")
        echo "width 2048: $P's seed-0 optimum 2^$e; 2^$((e - 1)) … 2^$((e + 1)), seeds 0–2"
        sweep --set 'widths=[2048]' --set "parametrizations=[$P]" --set "lrs=$(lrs $((e + 1)) "$e" $((e - 1)))" \
              --set 'seeds=[0, 1, 2]'
      done ;;
    mech) around_gdn_mup "gdn-mup-nosqrtd, gdn-mup-mupgates, gdn-mup-adameps" 256 1024 ;;
    betalr) around_gdn_mup gdn-mup-betalr 1024 2048 ;;
    code) around_gdn_mup gdn-mup-code 256 1024 ;;
    code-rules) around_gdn_mup "gdn-mup-code-convinit, gdn-mup-mixer1m" 1024 ;;
    gates-apart) around_gdn_mup "gdn-mup-gateinit, gdn-mup-gatelr" 1024 ;;
    hidden-wd) around_gdn_mup gdn-mup-mupwd 1024 2048 ;;
    gates-2048) around_gdn_mup gdn-mup-mupgates 2048 ;;
    code-conv) around_gdn_mup "gdn-mup-codeconv, gdn-mup-codeconv-nosqrtd" 1024 256 ;;
    eps-regime) around_gdn_mup gdn-mup-epsregime 1024 ;;
    conv-why) around_gdn_mup "gdn-mup-convstep, gdn-mup-codeconv-ownstep" 256 1024 ;;
    others)  # widths 256 and 1024 first (their trials are the cheap ones: a verdict over 256–1024 sooner), then 2048
      g1=$(optima optimum 1024 gdn-mup -8); g2=$(optima optimum 2048 gdn-mup -8)
      for WIDTHS in "256 1024" 2048; do
        for SEEDS in 0 1,2; do  # at 2048 each group follows seed 0's optimum once it has three LRs: seed 0 first
          groups=()
          for P in mup gdn-mup-code; do
            for W in $WIDTHS; do
              case $W in
                256) groups+=("256 $P -10 -9 -8 -7") ;;
                1024) groups+=("1024 $P $((g1 - 1)) $g1 $((g1 + 1))") ;;
                2048) e=$(optima seed0 2048 "$P" "$g2"); groups+=("2048 $P $((e - 1)) $e $((e + 1))") ;;
              esac
            done
          done
          plan "$DIR" cells "$SEEDS" "${groups[@]}"
          [ ${#SETS[@]} -eq 0 ] || sweep "${SETS[@]}"
        done
      done ;;
    mid)
      groups=()
      for P in sp gdn-mup mup gdn-mup-code; do
        R=$P; [ "$P" = sp ] || R=gdn-mup  # naive µP and the code variant: around GDN-µP's optima
        a=$(optima optimum 256 "$R" -9); b=$(optima optimum 1024 "$R" -9); c=$(optima optimum 2048 "$R" -9)
        for W in 512 1536; do
          if [ "$W" = 512 ]; then x=$a; y=$b; else x=$b; y=$c; fi
          m=$(python3 -c "print(round(($x + $y) / 2))")
          echo "width $W: $P around 2^$m"
          groups+=("$W $P $((m - 1)) $m $((m + 1))")
        done
      done
      plan "$DIR" cells 0,1,2 "${groups[@]}"
      sweep "${SETS[@]}" ;;
    depth4)  # the grid, then one sweep over the LRs beyond its 3-seed optima on an edge
      X="${DIR%/}-4l"
      sweep_to "$X" --set model.depth=4 --set 'widths=[256, 1024]' \
               --set 'parametrizations=[sp, gdn-mup]' --set "lrs=$(lrs -10 -9 -8 -7)" --set 'seeds=[0, 1, 2]'
      plan "$X" edges
      [ ${#SETS[@]} -eq 0 ] || sweep_to "$X" --set model.depth=4 "${SETS[@]}" ;;
    long)  # one sweep over the four groups' cells, then one over the LRs beyond the 4x optima on an edge
      long_groups
      plan "$X" cells 0 "${groups[@]}"
      sweep_to "$X" "${LONG[@]}" "${SETS[@]}"
      plan "$X" edges0
      [ ${#SETS[@]} -eq 0 ] || sweep_to "$X" "${LONG[@]}" "${SETS[@]}" ;;
    long-seeds)  # seeds 1 and 2 at each group's 4x optimum first (the head-to-head), then at the rest of its cells
      long_groups; best=()
      for W in 256 1024; do
        for P in sp gdn-mup; do best+=("$W $P $(python3 studies/optima.py "$X" seed0 "$W" "$P" -9)"); done
      done
      for CELLS in best groups; do
        declare -n G=$CELLS
        plan "$X" cells 1,2 "${G[@]}"
        sweep_to "$X" "${LONG[@]}" "${SETS[@]}"
      done ;;
    recheck)
      b=$(optima optimum 1024 sp -10); g=$(optima optimum 1024 gdn-mup -8)
      for PE in "sp $b" "gdn-mup $g"; do
        read -r P E <<< "$PE"
        sweep_to "${DIR%/}-recheck" --set 'widths=[1024]' --set "parametrizations=[$P]" --set "lrs=$(lrs "$E")"
      done ;;
    recheck-256)
      sweep_to "${DIR%/}-recheck" --set 'widths=[256]' --set 'parametrizations=[gdn-mup]' --set "lrs=$(lrs -10 -9 -8)" ;;
    recheck-slope)
      for WE in "256 -10 -9 -8 -7" "1024 -9 -8 -7"; do
        read -r W E <<< "$WE"
        # shellcheck disable=SC2086  # E: the exponents, one word each
        sweep_to "${DIR%/}-recheck" --set "widths=[$W]" --set 'parametrizations=[gdn-mup]' --set "lrs=$(lrs $E)"
      done ;;
    recheck-2048)
      sweep_to "${DIR%/}-recheck" --set 'widths=[2048]' --set 'parametrizations=[gdn-mup]' --set "lrs=$(lrs -9 -8 -7)" ;;
    recheck-h200)
      only_on H200 recheck-h200
      sweep_to "${DIR%/}-recheck-h200" --set 'widths=[256]' --set 'parametrizations=[gdn-mup]' \
        --set "lrs=$(lrs -10 -9 -8 -7)" ;;
    recheck-seeds)
      only_on H100 recheck-seeds " (the cells' GPU kind)"
      for SEEDS in 3,4 5,6,7; do  # the ends first: they carry the slope (power-ends.md); 1024 last
        plan "$DIR" cells "$SEEDS" "256 gdn-mup -10 -9 -8 -7" "2048 gdn-mup -9 -8 -7"
        sweep_to "${DIR%/}-recheck" "${SETS[@]}"
      done
      plan "$DIR" cells 3,4,5,6,7 "1024 gdn-mup -9 -8 -7"
      sweep_to "${DIR%/}-recheck" "${SETS[@]}" ;;
    recheck-code)
      T=${TREE:-.gpu/trees/e59e93a}
      [ -f "$T/deltamup/__init__.py" ] && [ -f "$T/studies/gdn-adamw-8l/spec.yaml" ] || {
        echo "part recheck-code needs commit e59e93a's tree at $T: bash maintainers/gpu/tree.sh e59e93a $T" >&2
        exit 2; }
      if [ -n "${PLAN:-}" ]; then
        echo "recheck-code: 6 trials at width 256 by $T's code (which has no --plan)"; continue
      fi
      here=$PWD; out=$(realpath -m "${DIR%/}-recheck-original-code"); corpus=$(realpath "$CORPUS"); sets=()
      for kv in ${PART_SETS:-}; do sets+=(--set "$kv"); done
      # from the tree's folder, so that Ray's workers import its deltamup (maintainers/gpu/run_tree.py)
      (cd "$T" && python3 "$here/maintainers/gpu/run_tree.py" . sweep studies/gdn-adamw-8l/spec.yaml --out "$out" \
        --resume --warm-kernels --progress-every 60 --set task.path="$corpus" --set 'widths=[256]' \
        --set 'parametrizations=[gdn-mup]' --set "lrs=$(lrs -9 -8)" "${sets[@]}") ;;
  esac
done
