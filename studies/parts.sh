# The helpers the studies' run.sh scripts write their parts with; sourced after DIR, CORPUS and SPEC are set.
#   sweep ARGS…                           deltamup sweep SPEC into DIR, resuming it (finished trials are skipped)
#   sweep_to OUT ARGS…                    the same into another sweep directory (a variant the trial ids do not name)
#   optima MODE …                         studies/optima.py on DIR: the best LR so far, seed 0's, the edge cases
#   lrs E…                                the YAML list of 2^E for each E
#   seeds_around "WIDTHS" "PARAMS" E0     seeds 1 and 2 at each one's seed-0 optimum e (E0 without one), e/2 and 2e
#   edges                                 one more LR, seeds 0–2, where a 3-seed optimum is the smallest or largest LR
sweep_to() {
  local out=$1; shift
  python3 -m deltamup sweep "$SPEC" --out "$out" --resume --warm-kernels --progress-every 60 \
    --set task.path="$CORPUS" "$@"
}
sweep() { sweep_to "$DIR" "$@"; }
optima() { python3 studies/optima.py "$DIR" "$@"; }
lrs() { python3 -c "import sys; print('[' + ', '.join(repr(2.0 ** int(e)) for e in sys.argv[1:]) + ']')" "$@"; }
seeds_around() {
  local W P e
  for W in $1; do
    for P in $2; do
      e=$(optima seed0 "$W" "$P" "$3")
      echo "seeds 1-2: $P at width $W around its seed-0 optimum 2^$e"
      sweep --set "widths=[$W]" --set "parametrizations=[$P]" --set "lrs=$(lrs "$e" $((e - 1)) $((e + 1)))" \
            --set 'seeds=[1, 2]'
    done
  done
}
edges() {
  optima edges | while read -r WIDTH PARAM E; do
    echo "edge: $PARAM at width $WIDTH, 2^$E"
    sweep --set "widths=[$WIDTH]" --set "parametrizations=[$PARAM]" --set "lrs=$(lrs "$E")" --set 'seeds=[0, 1, 2]'
  done
}
