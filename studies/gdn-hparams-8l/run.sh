#!/usr/bin/env bash
# The study's parts in order, each resuming the sweep directory DIR (finished trials are skipped). From the
# repository root, on a GPU machine:
#   bash studies/gdn-hparams-8l/run.sh DIR CORPUS PART…     CORPUS: a prepared corpus (deltamup data prepare)
# PART: base      width 256, GDN-µP, output_mult ∈ {1/4, 1, 4, 16} × init_mult ∈ {1/2, 1, 2}, 2^-10 … 2^-8, seed 0
#       seeds     seeds 1 and 2 for the three best variants of `base` (at seed 0) other than the default, and the
#                 default (1, 1), same LRs
#       edge      seeds 0–2 one octave beyond each 3-seed optimum that is the highest or lowest LR run
#       transfer  width 1024, seeds 0–2: the best variant over 3 seeds at its width-256 optimum g and g/2, 2g;
#                 SP (no hparams) at 2^-8 (its width-256 optimum in the 8-layer study) and 2^-10 (its 1024 optimum)
#       transfer-edge  width 1024, seeds 0–2: one octave beyond the variant's 3-seed optimum there if that is the
#                 highest or lowest LR `transfer` ran
#       default   width 1024, seeds 0–2, 2^-9 and 2^-8 (the two deciding LRs): the default (1, 1) and the tuned
#                 variant side by side in DIR-default, trained by one code on one build of the corpus (the
#                 default's width-1024 trials so far are the 8-layer study's, on another), so that the report
#                 pairs them by seed
set -eu
trap 'exit 130' INT TERM
DIR=$1; CORPUS=$2; shift 2
SPEC=${SPEC:-studies/gdn-hparams-8l/spec.yaml}  # SPEC=…: a smaller copy, e.g. to try the script on a CPU
source studies/parts.sh  # sweep, lrs
# `seeds` and `edge` each run their variants as one sweep (an `only` cell a variant): one driver run, the trials of
# every variant packed on the GPU together
ranked() {  # SEEDS [edge [WIDTH]]: "output_mult init_mult log2(best lr)" per variant at WIDTH (256), best first, by the mean
  # val_loss over the seeds run (all of them: SEEDS; SEEDS=1 ranks on seed 0 alone, so that the choice of `seeds`
  # stays the same while its trials land) at its best LR; with edge, only the variants whose best is the highest or
  # lowest such LR, and the octave beyond it in place of the best
  python3 - "$DIR" "$1" "${2:-}" "${3:-256}" <<'PY'
import glob, json, math, statistics, sys
out, need, edge, width = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "edge", int(sys.argv[4])
runs = {}
for f in glob.glob(f"{out}/results/*.json"):
    r = json.load(open(f))
    if r["status"] == "ok" and r["width"] == width and r["parametrization"] == "gdn-mup" and (need > 1 or r["seed"] == 0):
        h = dict(kv.split("=") for kv in r["hparams"].split(",")) if r["hparams"] else {}
        key = (float(h.get("output_mult", 1)), float(h.get("init_mult", 1)))
        runs.setdefault(key, {}).setdefault(round(math.log2(r["lr"])), []).append(r["val_loss"])
best = {}
for key, lrs in runs.items():
    means = {e: statistics.mean(v) for e, v in lrs.items() if len(v) >= need}
    if len(means) >= (3 if edge else 1):
        e = min(means, key=means.get)
        if edge and e not in (min(means), max(means)):
            continue
        best[key] = (means[e], e if not edge else e + 1 if e == max(means) else e - 1)
for (o, i), (_, e) in sorted(best.items(), key=lambda kv: kv[1][0]):
    print(f"{o:g} {i:g} {e}")
PY
}
variants() {  # SEEDS: one sweep over the variants on stdin ("output_mult init_mult [log2 lr]" lines): SETS=(--set …)
  # with each variant an `only` cell (at the spec's LRs, or at the one given), at seeds SEEDS (e.g. 1,2); none: empty
  local o i e cells="" lrs_run=""
  SETS=()
  while read -r o i e; do
    echo "seeds $1: output_mult $o, init_mult $i${e:+ at 2^$e}" >&2
    cells+="${cells:+, }{output_mult: [$o], init_mult: [$i]${e:+, lrs: $(lrs "$e")}}"
    [ -z "$e" ] || lrs_run+=" $e"
  done
  [ -n "$cells" ] || return 0
  SETS=(--set 'widths=[256]' --set "seeds=[$1]" --set "only=[$cells]")
  [ -z "$lrs_run" ] || SETS+=(--set "lrs=$(lrs $(printf '%s\n' $lrs_run | sort -un))")
}
best_variant() {  # the first line of `ranked 3`; none (no variant has 3 seeds at width 256 in DIR): one line, exit 2
  local line
  line=$(ranked 3 | head -1)
  [ -n "$line" ] || { echo "run.sh: no variant in $DIR has 3 seeds at width 256 to rank (parts base and seeds make them)" >&2; exit 2; }
  echo "$line"
}
known_parts "base seeds edge transfer transfer-edge default" "$@"
for PART in "$@"; do
  case $PART in
    base) sweep --set 'widths=[256]' --set 'seeds=[0]' ;;
    seeds)
      variants 1,2 < <(ranked 1 | grep -v '^1 1 ' | head -3 | cut -d' ' -f1,2; echo "1 1")
      sweep "${SETS[@]}" ;;
    edge)
      variants 0,1,2 < <(ranked 3 edge)
      [ ${#SETS[@]} -eq 0 ] || sweep "${SETS[@]}" ;;
    transfer)
      best=$(best_variant); read -r O I E <<< "$best"
      echo "width 1024: output_mult $O, init_mult $I, around 2^$E"
      sweep --set 'widths=[1024]' --set "hparams={output_mult: [$O], init_mult: [$I]}" \
            --set "lrs=$(lrs $((E - 1)) "$E" $((E + 1)))"
      sweep --set 'widths=[1024]' --set 'parametrizations=[sp]' --set 'hparams={}' --set "lrs=$(lrs -10 -8)" ;;
    transfer-edge)
      while read -r O I E; do
        echo "width 1024: output_mult $O, init_mult $I, at 2^$E (beyond its optimum on the grid's edge)"
        sweep --set 'widths=[1024]' --set "hparams={output_mult: [$O], init_mult: [$I]}" --set "lrs=$(lrs "$E")"
      done < <(ranked 3 edge 1024) ;;
    default)
      best=$(best_variant); read -r O I _ <<< "$best"
      for H in "1 1" "$O $I"; do
        read -r O1 I1 <<< "$H"
        sweep_to "${DIR%/}-default" --set 'widths=[1024]' --set "hparams={output_mult: [$O1], init_mult: [$I1]}" \
                 --set "lrs=$(lrs -9 -8)"
      done ;;
  esac
done
