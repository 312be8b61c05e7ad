#!/usr/bin/env bash
# Tar a sweep directory for the trip back (Ray's temp folders, the driver lock, trial checkpoints and the
# machine-specific compile cache left out); with CACHE.txz, its compile cache (Inductor's and Triton's) separately,
# for the next fresh machine of the same kind (same GPU, torch and Triton): untarred into SWEEP_DIR/compile-cache
# there, the compile warm-up and --warm-kernels find their binaries instead of compiling for a minute or more
# (git-ignored: keep it under .gpu/, never in a commit):
#   bash maintainers/gpu/keep.sh SWEEP_DIR OUT.tgz [CACHE.txz]
# The cache in xz (its PTX, LLVM IR and Python sources compress to 13 MB where gzip leaves 31: the carry's limit is
# 64 MiB); over the 15 MiB a returned file may safely have (16 MiB the limit; KEEP_PART_BYTES overrides) it comes as
# parts CACHE.txz.00, CACHE.txz.01, … instead; the other form's files are removed. Untarred, whole or in parts:
#   bash maintainers/gpu/keep.sh --restore CACHE.txz DIR
# Or every SECONDS until stopped (SIGTERM; it finishes the round in flight), each WORK/sweep* directory into
# OUT_DIR/NAME.tgz: what part.sh runs beside the parts, so that a command the device's time limit kills still
# brings back every trial that finished up to the last round:
#   bash maintainers/gpu/keep.sh --every SECONDS WORK OUT_DIR
# One compile cache serves every sweep directory of a study (a graph's cache key holds its shapes, so a sweep finds
# what another compiled at the same width; every parametrization at a width shares one graph): before the parts,
# each WORK/sweep* without a compile cache gets a copy of one that has one; after them, the caches of the sweeps that
# ran since the file SINCE (their runs.jsonl is newer) are merged, no file overwritten, into the one that ran last,
# whose path is printed (where none ran, the one with the largest cache): the one cache that goes back, so one cache
# a study travels.
#   bash maintainers/gpu/keep.sh --seed WORK
#   bash maintainers/gpu/keep.sh --merge WORK SINCE
# An archive is written under a temporary name and renamed when whole, so a kill never leaves a truncated one.
set -u

keep() {  # SWEEP_DIR OUT.tgz [CACHE.txz]
  [ -d "$1" ] || return 0
  local err rc
  err=$(tar -C "$1" --exclude=./ray --exclude=./driver.lock --exclude=./partial --exclude=./compile-cache \
    -czf "$2.part$$" . 2>&1)
  rc=$?
  # 1: a file changed or vanished while tar read it (a trial finishing, a temporary file renamed); what the
  # archive holds is whole, and the next round takes the rest
  if [ "$rc" -le 1 ]; then
    mv -f "$2.part$$" "$2"
  else
    echo "keep.sh: $1: $err" >&2
    rm -f "$2.part$$"
    return "$rc"
  fi
  if [ -n "${3:-}" ] && [ -d "$1/compile-cache" ]; then
    XZ_OPT="-T0 -6" tar -C "$1/compile-cache" -cJf "$3.part$$" . || { rm -f "$3.part$$"; return 1; }
    rm -f "$3" "$3".[0-9][0-9]
    if [ "$(stat -c %s "$3.part$$")" -le "${KEEP_PART_BYTES:-15728640}" ]; then
      mv -f "$3.part$$" "$3"
    else  # in parts a returned file may have, each whole when the loop ends
      split -b "${KEEP_PART_BYTES:-15728640}" -d -a 2 "$3.part$$" "$3.part$$." \
        && for part in "$3.part$$".[0-9][0-9]; do mv -f "$part" "$3.${part##*.}"; done
      rm -f "$3.part$$"
    fi
  fi
}

restore() {  # CACHE.txz DIR: the cache keep() wrote, whole or in parts, untarred into DIR
  mkdir -p "$2" || return 1
  if [ -f "$1.00" ]; then cat "$1".[0-9][0-9] | tar -C "$2" -xJf -; else tar -C "$2" -xJf "$1"; fi
}

seed() {  # WORK: every sweep directory without a compile cache gets a copy of the first one's that has one
  local d src=
  for d in "$1"/sweep*/; do [ -d "$d/compile-cache" ] && { src=${d%/}; break; }; done
  [ -n "$src" ] || return 0
  for d in "$1"/sweep*/; do
    d=${d%/}
    [ -d "$d/compile-cache" ] && continue
    cp -r "$src/compile-cache" "$d/compile-cache" && echo "compile cache of $(basename "$d"): $(basename "$src")'s"
  done
}

merge() {  # WORK SINCE: the ran sweeps' caches merged into the last one's; prints its directory
  local d size last= largest= most=-1
  for d in "$1"/sweep*/; do  # ran: its runs.jsonl is newer than SINCE
    d=${d%/}
    [ -d "$d/compile-cache" ] || continue
    size=$(du -sk "$d/compile-cache" | cut -f1)
    [ "$size" -gt "$most" ] && { most=$size; largest=$d; }
    [ "$d/runs.jsonl" -nt "$2" ] || continue
    if [ -z "$last" ] || [ "$d/runs.jsonl" -nt "$last/runs.jsonl" ]; then last=$d; fi
  done
  [ -n "$last" ] || { [ -z "$largest" ] || echo "$largest"; return 0; }
  for d in "$1"/sweep*/; do
    d=${d%/}
    [ "$d" != "$last" ] && [ -d "$d/compile-cache" ] && [ "$d/runs.jsonl" -nt "$2" ] || continue
    tar -C "$d/compile-cache" -cf - . | tar -C "$last/compile-cache" -xf - --skip-old-files || return 1
  done
  echo "$last"
}

if [ "${1:-}" = "--seed" ]; then
  seed "$2"
  exit
fi
if [ "${1:-}" = "--merge" ]; then
  merge "$2" "$3"
  exit
fi
if [ "${1:-}" = "--every" ]; then
  stop=
  trap 'stop=1' TERM  # runs once the command in flight ends; a background job ignores INT
  parent=$PPID
  while [ -z "$stop" ]; do
    for d in "$3"/sweep*/; do
      [ -d "$d" ] && keep "$d" "$4/$(basename "$d").tgz"
    done
    [ -n "$stop" ] && break  # stopped during a tar: no last sleep
    kill -0 "$parent" 2>/dev/null || break  # the caller is gone (killed): stop with it
    sleep "$2" & wait $!
    kill $! 2>/dev/null
  done
  exit 0
fi
if [ "${1:-}" = "--restore" ]; then
  restore "$2" "$3"
  exit
fi
keep "$@"
