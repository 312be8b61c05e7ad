#!/usr/bin/env bash
# Tar a sweep directory for the trip back (Ray's temp folders, the driver lock, trial checkpoints and the
# machine-specific compile cache left out); with CACHE.tgz, its compile cache (Inductor's and Triton's) separately,
# for the next fresh machine of the same kind (same GPU, torch and Triton): untarred into SWEEP_DIR/compile-cache
# there, the compile warm-up and --warm-kernels find their binaries instead of compiling for a minute or more
# (git-ignored: keep it under .gpu/, never in a commit):
#   bash maintainers/gpu/keep.sh SWEEP_DIR OUT.tgz [CACHE.tgz]
[ -d "$1" ] || exit 0
tar -C "$1" --exclude=./ray --exclude=./driver.lock --exclude=./partial --exclude=./compile-cache -czf "$2" .
if [ -n "${3:-}" ] && [ -d "$1/compile-cache" ]; then
  tar -C "$1/compile-cache" -czf "$3" .
fi
