#!/usr/bin/env bash
# Tar a sweep directory for the trip back (Ray's temp folders, the driver lock, trial checkpoints and the
# machine-specific compile cache left out):
#   bash maintainers/gpu/keep.sh SWEEP_DIR OUT.tgz
[ -d "$1" ] && tar -C "$1" --exclude=./ray --exclude=./driver.lock --exclude=./partial --exclude=./compile-cache \
  -czf "$2" .
