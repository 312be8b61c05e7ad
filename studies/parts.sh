# The helpers the studies' run.sh scripts write their parts with; sourced after DIR, CORPUS and SPEC are set.
#   sweep ARGS…                           deltamup sweep SPEC into DIR, resuming it (finished trials are skipped)
#   sweep_to OUT ARGS…                    the same into another sweep directory (a variant the trial ids do not name),
#                                         which starts from DIR's compile cache where it has none of its own
#   optima MODE …                         studies/optima.py on DIR: the best LR so far, seed 0's, the edge cases
#   plan OUT MODE …                       SETS: the --set arguments of one sweep over cells studies/optima.py picks
#   lrs E…                                the YAML list of 2^E for each E
#   seeds_around "WIDTHS" "PARAMS" E0     seeds 1 and 2 at each one's seed-0 optimum e (E0 without one), e/2 and 2e
#   seeds_around_in OUT "WIDTHS" "PARAMS" E0 [ARGS…]   the same in another sweep directory, ARGS to its sweep
#   edges                                 one more LR, seeds 0–2, where a 3-seed optimum is the smallest or largest LR
#   known_parts "NAME…" PART…             every PART one of the names, before any part runs (else one line, exit 2)
#   only_on KIND PART [WHY]               exit 2 with one line unless this machine's GPU's name holds KIND (not
#                                         under PLAN): a part whose trials must share a GPU kind
# seeds_around and edges run every (width, parametrization) of theirs in one sweep (its `only` cells): one driver
# run, its graphs compiled side by side and its trials packed together, instead of one run a group.
# PART_SETS="KEY=VALUE …" bash studies/NAME/run.sh …: every sweep of the parts also takes these --set arguments,
# last (how the trials run, not what they are: e.g. resources.gpu=0.5 to train width-1024 trials two a GPU).
# PART_DEADLINE=UNIX_SECONDS bash studies/NAME/run.sh …: every sweep of the parts gets --time-limit for the time left
# until then (a trial starts only if its width's finished trials say it ends in time); past it, a sweep is not run.
# PLAN=1 bash studies/NAME/run.sh …: each sweep of the parts prints its plan (deltamup sweep --plan: trials left,
# memory, GPU time left from the finished trials) and runs nothing; a part that picks its LRs from results the
# plan did not produce plans from what the directory already holds.
seed_cache() {  # OUT: a sweep directory without a compile cache starts from DIR's (the same models, compiled), its
  # file times kept: what a part compiles into it is what is newer (maintainers/gpu/keep.sh --cache)
  local out=${1%/}
  [ "$out" != "${DIR%/}" ] && [ -d "$DIR/compile-cache" ] && [ ! -d "$out/compile-cache" ] || return 0
  mkdir -p "$out" && cp -rp "$DIR/compile-cache" "$out/compile-cache" && echo "compile cache of $out: $DIR's"
}
sweep_to() {
  local out=$1 kv extra=() left; shift
  if [ -n "${PART_DEADLINE:-}" ] && [ -z "${PLAN:-}" ]; then
    left=$((PART_DEADLINE - $(date +%s)))
    [ "$left" -gt 0 ] || { echo "time limit reached: the sweep into $out not run"; return 0; }
    extra+=(--time-limit "$left")
  fi
  [ -n "${PLAN:-}" ] || seed_cache "$out"
  for kv in ${PART_SETS:-}; do extra+=(--set "$kv"); done
  python3 -m deltamup sweep "$SPEC" --out "$out" --resume --warm-kernels --progress-every 60 \
    --set task.path="$CORPUS" ${PLAN:+--plan} "$@" "${extra[@]}"
}
sweep() { sweep_to "$DIR" "$@"; }
optima() { python3 studies/optima.py "$DIR" "$@"; }
lrs() { python3 -c "import sys; print('[' + ', '.join(repr(2.0 ** int(e)) for e in sys.argv[1:]) + ']')" "$@"; }
plan() {  # OUT MODE ARGS…: SETS=(--set …), the lines studies/optima.py OUT MODE ARGS… prints (none: nothing to run)
  local lines line
  SETS=()
  lines=$(python3 studies/optima.py "$@")
  while IFS= read -r line; do [ -n "$line" ] && SETS+=(--set "$line"); done <<< "$lines"
  return 0
}
seeds_around_in() {
  local out=$1; shift
  plan "$out" around "$1" "$2" "$3"
  [ ${#SETS[@]} -eq 0 ] || sweep_to "$out" "${SETS[@]}" "${@:4}"
}
seeds_around() { seeds_around_in "$DIR" "$@"; }
edges() { plan "$DIR" edges; [ ${#SETS[@]} -eq 0 ] || sweep "${SETS[@]}"; }
known_parts() {
  local known=$1 part; shift
  for part in "$@"; do
    case " $known " in *" $part "*) ;; *) echo "unknown part $part ($known)" >&2; exit 2 ;; esac
  done
}
only_on() {
  [ -z "${PLAN:-}" ] || return 0
  local gpu
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
  case $gpu in *"$1"*) ;; *) echo "part $2 runs on an $1 only${3:-}; this machine's GPU: ${gpu:-none}" >&2; exit 2 ;; esac
}
