#!/usr/bin/env bash
# On the CPU machine: CHECKOUT/.gpu/sbundle/, the bundle of .devbundle/ without what no sweep, test or benchmark
# imports (Ray's rllib, serve, llm and dashboard web client; its binaries' symbol tables stripped), xz at its
# strongest setting: ≈ 23 MB instead of ≈ 39, so that it, the corpus and the tracked tree fit one 64 MiB transfer,
# and one command can run the kernel benchmark against fla (kept) and a study's parts.
#   bash maintainers/gpu/slim-bundle.sh CHECKOUT        (then: source .gpu/sbundle/setup.sh on the GPU machine)
set -eu
SRC=$1/.devbundle; DEST=$1/.gpu/sbundle
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$SRC/site.tar.xz"
rm -rf "$work"/ray/rllib "$work"/ray/serve "$work"/ray/llm "$work"/ray/dashboard/client
find "$work" -name '*.so' -o -type f -path '*/ray/core/src/*' -perm -u+x | xargs -r strip --strip-unneeded
mkdir -p "$DEST" && tar -C "$work" -cf - . | xz -T0 -9e > "$DEST/site.tar.xz"
cp "$SRC/setup.sh" "$DEST/setup.sh"
du -sh "$DEST"
