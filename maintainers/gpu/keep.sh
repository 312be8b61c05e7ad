#!/usr/bin/env bash
# Tar a sweep directory for the trip back (Ray's temp folders and the driver lock left out):
#   bash maintainers/gpu/keep.sh SWEEP_DIR OUT.tgz
[ -d "$1" ] && tar -C "$1" --exclude=./ray --exclude=./driver.lock -czf "$2" .
