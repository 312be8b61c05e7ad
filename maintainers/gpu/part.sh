#!/usr/bin/env bash
# On the GPU machine, from the repository root, with carry [".gpu/sbundle", ".gpu/corpus.tar.xz"] (or the study's
# build as .gpu/corpus-BUILD.tar.xz, BUILD its spec's tokens_sha256): a study's parts
# under one time limit, each sweep directory the parts ran tarred into $OUT for the trip back. A warm machine keeps
# /tmp/st/STUDY/ (the sweep directories with their checkpoints and compile cache) from the command before, so the
# next command resumes there; a fresh one starts from the committed sweep directories. Every minute the sweep
# directories the parts changed are tarred into $OUT as well, so a command the device's own time limit kills still
# returns the trials that finished. A committed sweep the parts did not touch does not come back.
#   bash maintainers/gpu/part.sh STUDY SECONDS PART…    → $OUT/STUDY.log, $OUT/SWEEP.tgz for each sweep* they ran
# Several studies in one command, each with its own OUT and a share of the command's time, and at the end the
# device's limit of 8 returned files kept (compile caches left out first, keep.sh --fit):
#   OUT0=$OUT; OUT=$OUT0/A bash maintainers/gpu/part.sh A 200 PART…; \
#     OUT=$OUT0/B bash maintainers/gpu/part.sh B 300 PART…; bash maintainers/gpu/keep.sh --fit $OUT0
# Back on the CPU machine, for each SWEEP.tgz: mkdir -p studies/STUDY/SWEEP && tar -C studies/STUDY/SWEEP -xzf SWEEP.tgz
# (Where $OUT0/results.tar came back instead, untar it first.) At most one compile cache (Inductor's and Triton's)
# comes back, $OUT/compile-cache/SWEEP.txz (in 15 MiB parts SWEEP.txz.00, .01, … where larger: keep.sh): that of the
# sweep that ran last, with what the other sweeps that ran compiled merged in, and only where the parts compiled
# something into it (a cache carried in and only read stays as carried). Kept as .gpu/cache/STUDY/SWEEP.txz*
# (git-ignored, the only cache there) and carried (carry: [..., ".gpu/cache/STUDY"]), a fresh machine of the same
# kind starts every sweep directory of the study from it (keep.sh --seed) instead of compiling for minutes.
set -u
STUDY=$1; SECONDS_LEFT=$2; shift 2
[ -f "studies/$STUDY/run.sh" ] || { echo "part.sh: no study $STUDY (studies/$STUDY/run.sh)" >&2; exit 2; }
[ -n "${OUT:-}" ] || { echo "part.sh: OUT is not set (the folder whose files come back)" >&2; exit 2; }
mkdir -p "$OUT"  # OUT=$OUT/STUDY for each of several studies in one command: their sweep*.tgz names are alike
source .gpu/sbundle/setup.sh
python3 -m pip install --no-deps --no-build-isolation --no-index -q -e . > /tmp/pip-install.log 2>&1 \
  || { cat /tmp/pip-install.log; exit 1; }
# the corpus build the study's spec pins (task.tokens_sha256): .gpu/corpus-BUILD.tar.xz where carried, else
# .gpu/corpus.tar.xz; unpacked per build, so a warm machine's other study reading another build keeps its own
BUILD=$(sed -n 's/.*tokens_sha256: *\([0-9a-f][0-9a-f]*\).*/\1/p' "studies/$STUDY/spec.yaml" | head -n 1)
ARCHIVE=.gpu/corpus.tar.xz
[ -n "$BUILD" ] && [ -f ".gpu/corpus-$BUILD.tar.xz" ] && ARCHIVE=.gpu/corpus-$BUILD.tar.xz
CORPUS=/tmp/deltamup/${BUILD:-default}
[ -f "$CORPUS/corpus/tokens.bin" ] || { mkdir -p "$CORPUS" && tar -C "$CORPUS" -xJf "$ARCHIVE"; }
WORK=/tmp/st/$STUDY
mkdir -p "$WORK"
for d in "studies/$STUDY"/sweep*/; do  # the committed sweeps a fresh machine resumes from
  [ -d "$WORK/$(basename "$d")" ] || cp -r "$d" "$WORK/"
done
for CACHE in .gpu/cache/"$STUDY"/*.txz .gpu/cache/"$STUDY"/*.txz.00; do  # carried from an earlier machine, whole
  [ -f "$CACHE" ] || continue                                               # or in parts, one a sweep directory
  CACHE=${CACHE%.00}
  D=$WORK/$(basename "$CACHE" .txz)/compile-cache
  [ -d "$D" ] && continue
  bash maintainers/gpu/keep.sh --restore "$CACHE" "$D" && echo "compile cache from $CACHE: $(du -sh "$D" | cut -f1)"
done
bash maintainers/gpu/keep.sh --seed "$WORK"  # the other sweep directories start from it too
STARTED=$WORK/.parts-started  # the sweeps that run from here on append to their runs.jsonl
touch "$STARTED"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
# a kill from outside keeps what finished by the last round, of the sweeps these parts changed
bash maintainers/gpu/keep.sh --every 60 "$WORK" "$OUT" "$STARTED" &
SNAPSHOTS=$!
trap 'kill "$SNAPSHOTS" 2>/dev/null' EXIT
# the sweeps start no trial their widths' finished trials say would end within 10 s of the cut (studies/parts.sh)
PART_DEADLINE=$(( $(date +%s) + SECONDS_LEFT - 10 )) PYTHONUNBUFFERED=1 timeout -k 15 -s INT "$SECONDS_LEFT" \
  bash "studies/$STUDY/run.sh" "$WORK/sweep" "$CORPUS/corpus" "$@" 2>&1 | tee -a "$OUT/$STUDY.log"
rc=${PIPESTATUS[0]}  # the parts' status (124: the time limit cut them), after every sweep is kept
kill "$SNAPSHOTS"; wait "$SNAPSHOTS"  # the round in flight finishes first
CACHED=$(bash maintainers/gpu/keep.sh --merge "$WORK" "$STARTED")  # the one sweep whose cache goes back
mkdir -p "$OUT/compile-cache"
for d in "$WORK"/sweep*/; do  # the sweeps these parts ran (a committed one they did not touch stays here)
  NAME=$(basename "$d")
  ! bash maintainers/gpu/keep.sh --touched "${d%/}" "$STARTED" || bash maintainers/gpu/keep.sh "$d" "$OUT/$NAME.tgz"
  [ "${d%/}" = "$CACHED" ] || continue
  bash maintainers/gpu/keep.sh --cache "$d" "$OUT/compile-cache/$NAME.txz" "$STARTED"  # where these parts compiled
  if ls "$OUT/compile-cache/$NAME".txz* > /dev/null 2>&1; then
    echo "compile cache of $NAME kept: $(du -ch "$OUT/compile-cache/$NAME".txz* | tail -n 1 | cut -f1) compressed"
  else
    echo "compile cache of $NAME: nothing compiled into it by these parts, not returned"
  fi
done
exit "$rc"
