#!/usr/bin/env bash
# On the CPU machine: what a lent GPU machine needs beside the checkout, in CHECKOUT/.gpu/ (git-ignored there):
# tree/ (this worktree's HEAD: the code, tests, benchmarks, studies' specs and scripts; no evidence files) and
# corpus.tar.xz (the default byte corpus, prepared once: its sha256 must be the one the study's spec names).
#   bash maintainers/gpu/pack.sh CHECKOUT [CORPUS_DIR]
set -eu
DEST=$1/.gpu; CORPUS=${2:-}
rm -rf "$DEST/tree" && mkdir -p "$DEST/tree"
git archive HEAD pyproject.toml deltamup kernels models parametrizations scaling sweeps reports tests benchmarks \
  maintainers studies/*/spec.yaml studies/*/*.sh | tar -x -C "$DEST/tree"
if [ -n "$CORPUS" ] && [ ! -f "$DEST/corpus.tar.xz" ]; then
  tar -C "$(dirname "$CORPUS")" -cf - "$(basename "$CORPUS")" | xz -T0 -6 > "$DEST/corpus.tar.xz"
fi
du -sh "$DEST"/*
