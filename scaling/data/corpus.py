"""The "corpus" task: language modelling on a token file, memory-mapped.

    task: corpus                                   the default corpus (bytes), built into the cache on first use
    task: {name: corpus, tokenizer: bpe, vocab_size: 8192}            … with a BPE trained on it
    task: {name: corpus, path: data/owt}            a prepared directory (manifest.json + tokens.bin), or a
                                                    nanoGPT directory (train.bin + val.bin, uint16 unless dtype)
    task: {name: corpus, path: tokens.bin, dtype: uint32, vocab_size: 100277}      a raw token file
    task: {name: corpus, path: "books/*.txt"}       text files or *.parquet (text_column): prepared into the cache
    task: {name: corpus, path: DIR, tokens_sha256: e3218175}      … only if its manifest's tokens sha256 starts so

A prepared corpus's fingerprint is the first 16 hex digits of its tokens' sha256 (the manifest's); trials record it.
The default corpus is built from the installed packages' sources, so another machine's versions build other data:
pin it (tokens_sha256) where trials run on several machines or days.

The cache is $DELTAMUP_DATA or ~/.cache/deltamup/data; a cached build is keyed by what it was built from.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from functools import cached_property
from pathlib import Path

from .inputs import default_corpus, expand, user_inputs
from .prepare import MANIFEST, TOKENS, prepare, read_manifest
from .sources import DEFAULT_SOURCES, source_version
from .task import Batch, register_task
from .tokens import Split, holdout, open_tokens

VAL_SEED_OFFSET = 1_000_003
TEXT_SUFFIXES = (".txt", ".md", ".rst", ".parquet")


def cache_root() -> Path:
    return Path(os.environ.get("DELTAMUP_DATA") or Path.home() / ".cache" / "deltamup" / "data")


def build_key(what: dict) -> str:
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def default_corpus_dir(tokenizer: str = "bytes", vocab_size: int = 8192) -> Path:
    """Where the default corpus with this tokenizer lives in the cache (keyed by the sources' versions)."""
    versions = [(s, source_version(s)) for s in DEFAULT_SOURCES]
    key = build_key({"sources": versions, "tokenizer": tokenizer, "vocab": vocab_size})
    return cache_root() / f"default-{tokenizer}{'-' + str(vocab_size) if tokenizer == 'bpe' else ''}-{key}"


def ensure_prepared(directory: Path, build: Callable[[Path], object]) -> Path:
    """The directory, built by build(directory) first if it holds no manifest. Processes that race each build
    into a private temporary directory; the first rename wins and the others keep its (identical) result."""
    if not (directory / MANIFEST).exists():
        build(directory)
    return directory


@register_task("corpus")
class Corpus:
    """Options as in the module docstring. vocab_size: the BPE size when building one (default 8192), the
    vocabulary of a raw token file (default: its largest id + 1); the attribute is the data's actual vocabulary."""

    name = "corpus"

    def __init__(self, path: str | None = None, tokenizer: str = "bytes", vocab_size: int | None = None,
                 dtype: str = "uint16", text_column: str = "text", val_fraction: float = 0.01,
                 tokens_sha256: str | None = None) -> None:
        if tokenizer not in ("bytes", "bpe"):
            raise ValueError(f"tokenizer must be bytes or bpe, got {tokenizer!r}")
        if not 0 < val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        if path is not None and not any(ch in path for ch in "*?[") and not Path(path).exists():
            raise ValueError(f"corpus path {path} does not exist")
        if tokens_sha256 is not None and not (len(tokens_sha256) >= 8 and
                                              all(c in "0123456789abcdef" for c in tokens_sha256)):
            raise ValueError(f"tokens_sha256 must be at least 8 lowercase hex digits, got {tokens_sha256!r}")
        self.path, self.tokenizer, self.requested_vocab = path, tokenizer, vocab_size
        self.tokens_sha256 = tokens_sha256
        self.dtype, self.text_column, self.val_fraction = dtype, text_column, val_fraction

    @cached_property
    def splits(self) -> tuple[Split, Split, int]:
        """(train, val, vocab_size), opening (and if needed building) the data on first use."""
        path = self.resolve()
        if self.tokens_sha256 is not None and not (self.fingerprint or "").startswith(self.tokens_sha256[:16]):
            raise ValueError(f"corpus {path}: tokens sha256 {self.fingerprint or 'unknown (no manifest)'}…, not the "
                             f"{self.tokens_sha256}… asked for: other data (`deltamup data info {path}` lists the "
                             "sources and versions it was built from)")
        return open_splits(path, self.dtype, self.requested_vocab, self.val_fraction)

    @cached_property
    def fingerprint(self) -> str | None:
        """The first 16 hex digits of a prepared directory's tokens sha256 (its manifest's); None for a nanoGPT
        directory or a raw token file."""
        path = self.resolve()
        if not (path.is_dir() and (path / MANIFEST).exists()):
            return None
        return read_manifest(path)["tokens_sha256"][:16]

    @property
    def vocab_size(self) -> int:
        return self.splits[2]

    def resolve(self) -> Path:
        """The prepared directory or token file this task reads, building it into the cache if needed."""
        bpe_size = self.requested_vocab or 8192
        if self.path is None:
            out = default_corpus_dir(self.tokenizer, bpe_size)
            return ensure_prepared(out, lambda d: prepare(default_corpus(), d, self.tokenizer, bpe_size))
        path = Path(self.path)
        if path.is_dir() or (path.is_file() and path.suffix not in TEXT_SUFFIXES):
            return path
        patterns = [self.path]
        files = [(p.as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in expand(patterns)]
        out = cache_root() / f"user-{build_key({'files': files, 'tokenizer': self.tokenizer, 'vocab': bpe_size})}"
        return ensure_prepared(out, lambda d: prepare(user_inputs(patterns, self.text_column), d, self.tokenizer,
                                                       bpe_size))

    def train_batches(self, batch_size: int, seq_len: int, seed: int) -> Iterator[Batch]:
        return self.splits[0].batches(batch_size, seq_len, seed)

    def val_batches(self, batch_size: int, seq_len: int, count: int, seed: int) -> list[Batch]:
        it = self.splits[1].batches(batch_size, seq_len, seed + VAL_SEED_OFFSET)
        return [next(it) for _ in range(count)]


def open_splits(path: Path, dtype: str, vocab_size: int | None, val_fraction: float) -> tuple[Split, Split, int]:
    """(train, val, vocab) of a prepared directory, a nanoGPT directory or a raw token file."""
    if path.is_dir() and (path / MANIFEST).exists():
        manifest = read_manifest(path)
        tokens = open_tokens(path / TOKENS, manifest["dtype"])
        train, val = holdout(len(tokens), val_fraction)
        return Split(tokens, train), Split(tokens, val), manifest["tokenizer"]["vocab_size"]
    if path.is_dir():
        if not (path / "train.bin").exists() or not (path / "val.bin").exists():
            raise ValueError(f"{path} holds neither {MANIFEST} nor train.bin + val.bin")
        train_t, val_t = open_tokens(path / "train.bin", dtype), open_tokens(path / "val.bin", dtype)
        vocab = vocab_size or int(max(train_t.max(), val_t.max())) + 1
        return Split(train_t, [(0, len(train_t))]), Split(val_t, [(0, len(val_t))]), vocab
    tokens = open_tokens(path, dtype)
    train, val = holdout(len(tokens), val_fraction)
    return Split(tokens, train), Split(tokens, val), vocab_size or int(tokens.max()) + 1
