"""Tokenisers: raw UTF-8 bytes (vocab 256, the default) and a byte-level BPE trained locally with Hugging Face
`tokenizers` and saved as tokenizer.json beside the token file. Nothing is ever fetched from a hub: a BPE is only
trained here or read from a local file."""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import numpy as np

TOKENIZER_FILE = "tokenizer.json"


class Tokenizer(Protocol):
    kind: str
    vocab_size: int

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]: ...

    def decode(self, ids: Iterable[int]) -> str: ...


class ByteTokenizer:
    kind, vocab_size = "bytes", 256

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.frombuffer(t.encode("utf-8"), dtype=np.uint8) for t in texts]

    def decode(self, ids: Iterable[int]) -> str:
        return bytes(np.asarray(list(ids), dtype=np.uint8)).decode("utf-8", errors="replace")


class BPETokenizer:
    """Byte-level BPE (GPT-2 style pre-tokenisation, no special tokens): every text round-trips exactly."""

    kind = "bpe"

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = tokenizer.get_vocab_size()

    @classmethod
    def train(cls, texts: Iterable[str], vocab_size: int, show_progress: bool = False) -> BPETokenizer:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

        if not 257 <= vocab_size <= 2**32:
            raise ValueError(f"BPE vocab_size must be above 256, got {vocab_size}")
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=show_progress,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
        tok.train_from_iterator(texts, trainer=trainer)
        return cls(tok)

    @classmethod
    def load(cls, path: str | Path) -> BPETokenizer:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_file(str(path)))

    def save(self, path: str | Path) -> None:
        self.tokenizer.save(str(path))

    def encode_batch(self, texts: list[str]) -> list[np.ndarray]:
        return [np.asarray(e.ids, dtype=np.uint32) for e in self.tokenizer.encode_batch(texts)]

    def decode(self, ids: Iterable[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False)


def token_dtype(vocab_size: int) -> np.dtype:
    """uint16 (the nanoGPT .bin convention) when every id fits, else uint32."""
    return np.dtype(np.uint16) if vocab_size <= 2**16 else np.dtype(np.uint32)
