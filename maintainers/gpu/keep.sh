#!/usr/bin/env bash
# Tar a sweep directory for the trip back (Ray's temp folders, the driver lock and trial checkpoints left out):
#   bash maintainers/gpu/keep.sh SWEEP_DIR OUT.tgz
[ -d "$1" ] && tar -C "$1" --exclude=./ray --exclude=./driver.lock --exclude=./partial -czf "$2" .
