#!/usr/bin/env bash
# On the CPU machine, from the repository root: what travels to the GPU machine with a command (the work tree's
# files and the carried paths, at most 64 MiB) and how to make it fit. Evidence the GPU machine never reads (the
# studies' reports, other studies' sweeps, the coordinate checks' results, benchmark logs, every PNG and SVG) can
# leave the work tree for the call and come back from git afterwards: it is all committed, so nothing is lost, and
# `away` refuses while any of it has changes that are not committed.
#   bash maintainers/gpu/travel.sh size [CARRY…]     what would travel with these carry paths; exit 1 over the limit
#   bash maintainers/gpu/travel.sh away [STUDY…]     evidence out of the work tree, the named studies' sweeps kept
#   bash maintainers/gpu/travel.sh back              every evidence file `away` took, restored from git
set -eu
LIMIT=67108864  # 64 MiB

evidence() {  # the pathspecs of what may leave; the named studies' sweep directories stay
  local study
  printf '%s\0' ':(glob)studies/*/report/**' ':(glob)studies/*/sweep*/**' ':(glob)studies/coord-checks/**' \
    ':(glob)benchmarks/logs/**' ':(glob)**/*.png' ':(glob)**/*.svg' \
    ':(exclude,glob)**/*.py' ':(exclude,glob)**/*.sh' ':(exclude,glob)**/*.yaml' ':(exclude,glob)**/*.md'
  for study in "$@"; do printf '%s\0' ":(exclude,glob)studies/$study/sweep*/**"; done
}

case "${1:-}" in
  size)
    shift
    for p in "$@"; do [ -e "$p" ] || { echo "travel.sh: no carry path $p" >&2; exit 2; }; done
    tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null \
           | awk '$2 == "total" {s += $1} END {print s + 0}')
    carry=$( (( $# )) && du -cbs "$@" | tail -1 | cut -f1 || echo 0)
    total=$(( tree + carry ))
    awk -v t="$tree" -v c="$carry" -v l="$LIMIT" \
      'BEGIN {printf "work tree %.1f MB + carry %.1f MB = %.1f MB of %.1f MB\n", t / 1e6, c / 1e6, (t + c) / 1e6, l / 1e6}'
    (( total <= LIMIT )) || { echo "travel.sh: over the limit; try: bash maintainers/gpu/travel.sh away STUDY" >&2; exit 1; }
    ;;
  away)
    shift
    for study in "$@"; do
      [ -f "studies/$study/run.sh" ] || { echo "travel.sh: no study $study (studies/$study/run.sh)" >&2; exit 2; }
    done
    mapfile -d '' spec < <(evidence "$@")
    if ! git diff --quiet --diff-filter=d HEAD -- "${spec[@]}"; then
      echo "travel.sh: evidence with uncommitted changes; commit it first:" >&2
      git diff --name-only --diff-filter=d HEAD -- "${spec[@]}" | head -5 >&2
      exit 1
    fi
    present=$(mktemp); trap 'rm -f "$present"' EXIT
    git ls-files -z -- "${spec[@]}" | xargs -0 -r sh -c 'for f; do [ ! -e "$f" ] || printf "%s\0" "$f"; done' _ \
      > "$present"
    n=$(tr -cd '\0' < "$present" | wc -c)
    xargs -0 -r rm -f < "$present"
    echo "travel.sh: $n evidence files out of the work tree (bash maintainers/gpu/travel.sh back restores them)"
    ;;
  back)
    mapfile -d '' spec < <(evidence)
    n=$(git ls-files -d -z -- "${spec[@]}" | tr -cd '\0' | wc -c)
    git ls-files -d -z -- "${spec[@]}" | xargs -0 -r git checkout --
    echo "travel.sh: $n evidence files restored"
    ;;
  *)
    echo "usage: bash maintainers/gpu/travel.sh size [CARRY…] | away [STUDY…] | back" >&2
    exit 2
    ;;
esac
