#!/usr/bin/env bash
# Tar a sweep directory for the trip back (Ray's temp folders, the driver lock, trial checkpoints and the
# machine-specific compile cache left out); with CACHE.txz, its compile cache (Inductor's and Triton's) separately,
# for the next fresh machine of the same kind (same GPU, torch and Triton): untarred into SWEEP_DIR/compile-cache
# there, the compile warm-up and --warm-kernels find their binaries instead of compiling for a minute or more
# (git-ignored: keep it under .gpu/, never in a commit):
#   bash maintainers/gpu/keep.sh SWEEP_DIR OUT.tgz [CACHE.txz [SINCE]]
# With SINCE (a file), the cache only where something in it is newer than SINCE: a cache carried in and only read
# (every graph and kernel found) does not take one of the 8 files a command returns to come back unchanged.
# The cache in xz (its PTX, LLVM IR and Python sources compress to 13 MB where gzip leaves 31: the carry's limit is
# 64 MiB); over the 15 MiB a returned file may safely have (16 MiB the limit; KEEP_PART_BYTES overrides) it comes as
# parts CACHE.txz.00, CACHE.txz.01, … instead; the other form's files are removed. Untarred, whole or in parts:
#   bash maintainers/gpu/keep.sh --restore CACHE.txz DIR
# Or every SECONDS until stopped (SIGTERM; it finishes the round in flight), each WORK/sweep* directory into
# OUT_DIR/NAME.tgz: what part.sh runs beside the parts, so that a command the device's time limit kills still
# brings back every trial that finished up to the last round:
#   bash maintainers/gpu/keep.sh --every SECONDS WORK OUT_DIR [SINCE]
# With SINCE, only the sweep directories with a file newer than SINCE (Ray's temp folders, the checkpoints in
# partial/ and the compile cache aside): the ones this command's parts ran, not every committed sweep of the study.
# One compile cache serves every sweep directory of a study (a graph's cache key holds its shapes, so a sweep finds
# what another compiled at the same width; every parametrization at a width shares one graph): before the parts,
# each WORK/sweep* without a compile cache gets a copy of one that has one; after them, the caches of the sweeps that
# ran since the file SINCE (their runs.jsonl is newer) are merged, no file overwritten, into the one that ran last,
# whose path is printed (where none ran, the one with the largest cache): the one cache that goes back, so one cache
# a study travels.
#   bash maintainers/gpu/keep.sh --seed WORK
#   bash maintainers/gpu/keep.sh --merge WORK SINCE
# At most 8 files come back from a command (KEEP_MAX_FILES overrides): a command of several studies ends with
#   bash maintainers/gpu/keep.sh --fit OUT_DIR
# which, where OUT_DIR holds more, leaves compile caches out, the largest first, until the rest fits, then (still
# over) packs every remaining file into OUT_DIR/results.tar; each step printed. Results are never left out.
#   bash maintainers/gpu/keep.sh --touched SWEEP_DIR SINCE    exit 0 where the sweep directory changed since SINCE
#   bash maintainers/gpu/keep.sh --cache SWEEP_DIR CACHE.txz [SINCE]    the compile cache alone
# An archive is written under a temporary name and renamed when whole, so a kill never leaves a truncated one.
set -u

touched() {  # SWEEP_DIR SINCE: exit 0 where a file of the sweep (its scratch and compile cache aside) is newer
  [ -n "$(find "$1" \( -path "$1/compile-cache" -o -path "$1/ray" -o -path "$1/partial" \) -prune \
          -o -type f -newer "$2" -print -quit)" ]
}

cache_changed() {  # SWEEP_DIR [SINCE]: exit 0 where it has a compile cache with a file newer than SINCE (or no SINCE)
  [ -d "$1/compile-cache" ] || return 1
  [ -n "${2:-}" ] || return 0
  [ -n "$(find "$1/compile-cache" -type f -newer "$2" -print -quit)" ]
}

fit() {  # OUT_DIR: at most KEEP_MAX_FILES files under it; caches left out first, largest first, then one results.tar
  local max=${KEEP_MAX_FILES:-8} n cache
  n=$(find "$1" -type f | wc -l)
  [ "$n" -le "$max" ] && return 0
  # a cache is CACHE.txz or its parts CACHE.txz.NN: one unit, its size the parts' sum
  while [ "$n" -gt "$max" ]; do
    cache=$(find "$1" -type f -path '*/compile-cache/*' -printf '%s %p\n' | sed 's/\.txz\.[0-9][0-9]$/.txz/' \
            | awk '{s[$2] += $1} END {for (c in s) print s[c], c}' | sort -rn | head -n 1 | cut -d' ' -f2-)
    [ -n "$cache" ] || break
    echo "keep.sh: $n files under $1, $max come back: left out the compile cache $cache"
    rm -f "$cache" "$cache".[0-9][0-9]
    n=$(find "$1" -type f | wc -l)
  done
  [ "$n" -le "$max" ] && return 0
  echo "keep.sh: $n files under $1 without a compile cache, $max come back: all of them packed into $1/results.tar"
  (cd "$1" && find . -type f ! -name results.tar -print0 | tar --null -cf results.tar.part$$ -T - \
     && find . -type f ! -name 'results.tar*' -delete && mv -f results.tar.part$$ results.tar)
}

keep() {  # SWEEP_DIR OUT.tgz [CACHE.txz [SINCE]]
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
  [ -z "${3:-}" ] || keep_cache "$1" "$3" "${4:-}"
}

keep_cache() {  # SWEEP_DIR CACHE.txz [SINCE]: its compile cache in xz, in parts where large; nothing where unchanged
  cache_changed "$1" "${3:-}" || return 0
  XZ_OPT="-T0 -6" tar -C "$1/compile-cache" -cJf "$2.part$$" . || { rm -f "$2.part$$"; return 1; }
  rm -f "$2" "$2".[0-9][0-9]
  if [ "$(stat -c %s "$2.part$$")" -le "${KEEP_PART_BYTES:-15728640}" ]; then
    mv -f "$2.part$$" "$2"
  else  # in parts a returned file may have, each whole when the loop ends
    split -b "${KEEP_PART_BYTES:-15728640}" -d -a 2 "$2.part$$" "$2.part$$." \
      && for part in "$2.part$$".[0-9][0-9]; do mv -f "$part" "$2.${part##*.}"; done
    rm -f "$2.part$$"
  fi
}

restore() {  # CACHE.txz DIR: the cache keep() wrote, whole or in parts, untarred into DIR
  mkdir -p "$2" || return 1
  if [ -f "$1.00" ]; then cat "$1".[0-9][0-9] | tar -C "$2" -xJf -; else tar -C "$2" -xJf "$1"; fi
}

seed() {  # WORK: every sweep directory without a compile cache gets a copy of the first one's that has one
  # (file times kept: a copy is not something compiled, keep_cache)
  local d src=
  for d in "$1"/sweep*/; do [ -d "$d/compile-cache" ] && { src=${d%/}; break; }; done
  [ -n "$src" ] || return 0
  for d in "$1"/sweep*/; do
    d=${d%/}
    [ -d "$d/compile-cache" ] && continue
    cp -rp "$src/compile-cache" "$d/compile-cache" && echo "compile cache of $(basename "$d"): $(basename "$src")'s"
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
      [ -d "$d" ] || continue
      [ -z "${5:-}" ] || touched "${d%/}" "$5" || continue
      keep "$d" "$4/$(basename "$d").tgz"
    done
    [ -n "$stop" ] && break  # stopped during a tar: no last sleep
    kill -0 "$parent" 2>/dev/null || break  # the caller is gone (killed): stop with it
    sleep "$2" & wait $!
    kill $! 2>/dev/null
  done
  exit 0
fi
if [ "${1:-}" = "--fit" ]; then
  fit "$2"
  exit
fi
if [ "${1:-}" = "--cache" ]; then
  keep_cache "$2" "$3" "${4:-}"
  exit
fi
if [ "${1:-}" = "--touched" ]; then
  touched "$2" "$3"
  exit
fi
if [ "${1:-}" = "--restore" ]; then
  restore "$2" "$3"
  exit
fi
keep "$@"
