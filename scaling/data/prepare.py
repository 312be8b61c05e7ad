"""`data prepare`: Inputs → a prepared directory, built in a temporary sibling and renamed into place at the end
(a crash or a kill leaves no half-written dataset):

    tokens.bin      every document's tokens followed by those of a blank line ("\\n\\n"), uint16 or uint32
    tokenizer.json  the BPE (tokenizer "bpe" only), trained on this very text
    manifest.json   inputs (with each one's text bytes and sha256), text and token counts and hashes, tokenizer:
                    equal manifests mean the same data, byte for byte; nothing in it depends on time or place
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from .inputs import Input
from .progress import Progress
from .tokenizer import TOKENIZER_FILE, BPETokenizer, ByteTokenizer, Tokenizer, token_dtype
from .tokens import write_tokens

FORMAT = "deltamup-tokens/1"
MANIFEST, TOKENS, TEXT = "manifest.json", "tokens.bin", "text.tmp"
SEPARATOR = "\n\n"
ENCODE_GROUP = 256  # documents per encode_batch call


def prepare(inputs: list[Input], out: str | Path, tokenizer: str = "bytes", vocab_size: int = 8192,
            force: bool = False, progress: bool = True) -> dict:
    """Builds `out` (see the module docstring) and returns its manifest."""
    out = Path(out)
    if tokenizer not in ("bytes", "bpe"):
        raise ValueError(f"tokenizer must be bytes or bpe, got {tokenizer!r}")
    if (out / MANIFEST).exists() and not force:
        raise ValueError(f"{out} already holds a prepared dataset (use --force to rebuild it)")
    tmp = out.with_name(f"{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        entries, sizes, text_hash = write_text(inputs, tmp / TEXT, progress)
        tok: Tokenizer = ByteTokenizer()
        if tokenizer == "bpe":
            tok = train_bpe(tmp / TEXT, vocab_size, progress)
            tok.save(tmp / TOKENIZER_FILE)
        dtype = token_dtype(tok.vocab_size).name
        bar = Progress(sum(sizes), "encode", "B", progress)
        n_tokens = write_tokens(tmp / TOKENS, encoded(tmp / TEXT, sizes, tok, bar), dtype)
        bar.close()
        (tmp / TEXT).unlink()
        manifest = {
            "format": FORMAT,
            "inputs": entries,
            "documents": len(sizes),
            "text_bytes": sum(sizes),
            "text_sha256": text_hash,
            "tokenizer": {"kind": tok.kind, "vocab_size": tok.vocab_size,
                          **({"sha256": file_sha256(tmp / TOKENIZER_FILE)} if tok.kind == "bpe" else {})},
            "dtype": dtype,
            "tokens": n_tokens,
            "tokens_sha256": file_sha256(tmp / TOKENS),
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
        if force and out.exists():
            shutil.rmtree(out)
        try:
            tmp.rename(out)
        except OSError:  # another process finished the same build first, or `out` holds other files
            if not (out / MANIFEST).exists():
                raise ValueError(f"cannot write {out}: it exists and is not a prepared dataset") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return manifest


def write_text(inputs: list[Input], path: Path, progress: bool) -> tuple[list[dict], list[int], str]:
    """Writes every document + SEPARATOR to `path`; returns the manifest entries, document sizes and text sha256."""
    entries, sizes, total = [], [], hashlib.sha256()
    bar = Progress(sum(i.items for i in inputs), "read", "docs", progress)
    with open(path, "wb") as f:
        for inp in inputs:
            h, n_bytes, n_docs = hashlib.sha256(), 0, 0
            for doc in inp.documents():
                bar.update()
                if not doc:
                    continue
                data = (doc + SEPARATOR).encode("utf-8", "replace")  # lone surrogates → "?"
                f.write(data)
                h.update(data)
                total.update(data)
                sizes.append(len(data))
                n_bytes, n_docs = n_bytes + len(data), n_docs + 1
            entries.append({**inp.entry, "documents": n_docs, "text_bytes": n_bytes, "sha256": h.hexdigest()})
    bar.close()
    if not sizes:
        raise ValueError("the inputs hold no text")
    return entries, sizes, total.hexdigest()


def train_bpe(text: Path, vocab_size: int, progress: bool) -> BPETokenizer:
    """A BPE trained on the text's documents (lines are the training units, in file order)."""
    with open(text, encoding="utf-8") as f:
        return BPETokenizer.train(iter(f), vocab_size, show_progress=progress)


def encoded(text: Path, sizes: list[int], tok: Tokenizer, bar: Progress) -> Iterator[np.ndarray]:
    with open(text, "rb") as f:
        for i in range(0, len(sizes), ENCODE_GROUP):
            group = sizes[i:i + ENCODE_GROUP]
            docs = [f.read(n).decode("utf-8") for n in group]
            yield from tok.encode_batch(docs)
            bar.update(sum(group))


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def read_manifest(where: str | Path) -> dict:
    """A prepared directory's manifest.json, or a manifest file itself (under any name)."""
    path = Path(where) / MANIFEST if Path(where).is_dir() or not Path(where).exists() else Path(where)
    try:
        manifest = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a prepared dataset ({e})") from None
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{path}: unknown format {manifest.get('format')!r}, expected {FORMAT}")
    return manifest
