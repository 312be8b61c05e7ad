#!/usr/bin/env bash
# On the CPU machine, from the repository root: an earlier commit's deltamup as an importable folder, to run beside
# the installed one on the GPU machine (did a code change move the numbers?). Writes OUT/deltamup/ (the commit's
# deltamup/ with its kernels/, models/, parametrizations/, scaling/, sweeps/, reports/ inside, as its pyproject maps
# them, and OUT/studies/NAME/spec.yaml, the commit's study specs); run it there with
# `python3 maintainers/gpu/run_tree.py OUT deltamup-ARGS…`.
#   bash maintainers/gpu/tree.sh COMMIT OUT          e.g. bash maintainers/gpu/tree.sh HEAD~20 .gpu/trees/HEAD-20
set -eu
(( $# == 2 )) || { echo "usage: tree.sh COMMIT OUT" >&2; exit 2; }
commit=$1 out=$2
git rev-parse --verify -q "$commit^{commit}" > /dev/null || { echo "tree.sh: no commit $commit" >&2; exit 2; }
[ ! -e "$out" ] || { echo "tree.sh: $out exists" >&2; exit 2; }
folders=(deltamup kernels models parametrizations scaling sweeps reports)
present=()
for f in "${folders[@]}"; do git cat-file -e "$commit:$f" 2> /dev/null && present+=("$f"); done
mkdir -p "$out"
git archive "$commit" "${present[@]}" | tar -x -C "$out"
for f in "${present[@]}"; do [ "$f" = deltamup ] || mv "$out/$f" "$out/deltamup/$f"; done
git archive "$commit" studies 2> /dev/null | tar -x -C "$out" --wildcards 'studies/*/spec.yaml' 2> /dev/null || true
echo "$out/deltamup: $commit ($(git log -1 --format=%cs "$commit")), $(find "$out" -name '*.py' | wc -l) Python files"
