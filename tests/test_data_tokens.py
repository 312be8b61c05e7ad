"""Token files, the held-out split, random-access batches, and the corpus task on users' data."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from deltamup.scaling.data import get_task
from deltamup.scaling.data.tokens import Split, holdout, open_tokens, write_tokens


@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
def test_token_file_round_trip(tmp_path, dtype):
    ids = np.random.default_rng(0).integers(0, 60000 if dtype == "uint16" else 2**32 - 1, 10_000)
    n = write_tokens(tmp_path / "t.bin", iter(np.array_split(ids, 7)), dtype)
    assert n == len(ids)
    assert np.array_equal(open_tokens(tmp_path / "t.bin", dtype), ids)
    (tmp_path / "odd.bin").write_bytes(b"\x00" * 5)
    with pytest.raises(ValueError, match="whole number"):
        open_tokens(tmp_path / "odd.bin", "uint16")


@pytest.mark.parametrize("n,fraction", [(1000, 0.05), (10_000_000, 0.01), (50_000_000, 0.002)])
def test_holdout_partitions_the_tokens(n, fraction):
    train, val = holdout(n, fraction)
    spans = sorted(train + val)
    assert spans[0][0] == 0 and spans[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # contiguous, disjoint, covering
    held = sum(b - a for a, b in val)
    assert abs(held / n - fraction) < 0.1 * fraction + 1 / n
    assert len(val) == min(max(int(n * fraction // 16384), 1), 32)


def test_windows_stay_inside_the_split_and_are_deterministic():
    tokens = np.arange(100_000, dtype=np.uint32)  # a token's value is its position
    train, val = holdout(len(tokens), 0.2)
    for spans in (train, val):
        x, y = next(Split(tokens, spans).batches(64, 50, seed=3))
        assert x.shape == y.shape == (64, 50) and x.dtype == torch.long
        assert torch.equal(y[:, :-1], x[:, 1:])  # next-token targets
        first, last = x[:, 0].numpy(), y[:, -1].numpy()
        assert all(any(a <= f and e < b for a, b in spans) for f, e in zip(first, last))
        again, _ = next(Split(tokens, spans).batches(64, 50, seed=3))
        assert torch.equal(x, again)
        assert not torch.equal(x, next(Split(tokens, spans).batches(64, 50, seed=4))[0])
    with pytest.raises(ValueError, match="does not fit"):
        next(Split(tokens, val).batches(1, 50_000, seed=0))


def test_corpus_on_a_raw_token_file_and_a_nanogpt_directory(tmp_path):
    ids = np.random.default_rng(1).integers(0, 70_000, 50_000)
    write_tokens(tmp_path / "big.u32", iter([ids]), "uint32")
    task = get_task({"name": "corpus", "path": str(tmp_path / "big.u32"), "dtype": "uint32"})
    assert task.vocab_size == int(ids.max()) + 1
    x, _ = next(task.train_batches(4, 32, seed=0))
    assert int(x.max()) < task.vocab_size
    nano = tmp_path / "nano"
    nano.mkdir()
    write_tokens(nano / "train.bin", iter([np.arange(5000) % 50]), "uint16")
    write_tokens(nano / "val.bin", iter([np.full(500, 7)]), "uint16")
    task = get_task({"name": "corpus", "path": str(nano), "vocab_size": 50304})
    assert task.vocab_size == 50304
    (vx, vy), = task.val_batches(2, 16, count=1, seed=0)
    assert (vx == 7).all() and (vy == 7).all()
    with pytest.raises(ValueError, match="does not exist"):
        get_task({"name": "corpus", "path": str(tmp_path / "missing.bin")})


def test_corpus_prepares_text_and_parquet_into_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DELTAMUP_DATA", str(tmp_path / "cache"))
    text = "Delta rules update a fast-weight memory. " * 200
    for i in range(3):
        (tmp_path / f"doc{i}.txt").write_text(f"{i} {text}")
    task = get_task({"name": "corpus", "path": str(tmp_path / "doc*.txt")})
    assert task.vocab_size == 256
    x, y = next(task.train_batches(2, 64, seed=0))
    assert bytes(x[0].tolist()).decode() in "\n\n".join(f"{i} {text}" for i in range(3))
    pq.write_table(pa.table({"id": [1, 2], "body": [text, "é" + text]}), tmp_path / "d.parquet")
    task = get_task({"name": "corpus", "path": str(tmp_path / "d.parquet"), "text_column": "body",
                     "val_fraction": 0.05})
    vx, _ = task.val_batches(1, 32, count=1, seed=0)[0]
    assert bytes(vx[0].tolist()).decode("utf-8", "ignore").strip() != ""
    assert len(list((tmp_path / "cache").iterdir())) == 2


def test_default_corpus_is_read_from_the_cache(tmp_path, monkeypatch):
    from deltamup.scaling.data.corpus import default_corpus_dir
    from deltamup.scaling.data.inputs import text_files
    from deltamup.scaling.data.prepare import prepare

    monkeypatch.setenv("DELTAMUP_DATA", str(tmp_path))
    where = default_corpus_dir()
    assert where.parent == tmp_path and where == default_corpus_dir() != default_corpus_dir("bpe")
    (tmp_path / "a.txt").write_text("cached corpus " * 300)
    prepare(text_files([str(tmp_path / "a.txt")]), where, progress=False)  # stands in for the full build
    task = get_task("corpus")
    x, _ = next(task.train_batches(1, 20, seed=0))
    assert task.vocab_size == 256 and bytes(x[0].tolist()).decode() in "cached corpus " * 300


def test_a_prepared_corpus_is_fingerprinted_and_a_pin_refuses_other_data(tmp_path):
    """A prepared directory's fingerprint is its manifest's tokens sha256 (16 hex digits), what trials record;
    `tokens_sha256` opens only data that matches it, and says which corpus it found."""
    from deltamup.scaling.data import data_fingerprint
    from deltamup.scaling.data.inputs import text_files
    from deltamup.scaling.data.prepare import prepare

    for name, words in (("a", "first corpus "), ("b", "second corpus ")):
        (tmp_path / f"{name}.txt").write_text(words * 300)
        prepare(text_files([str(tmp_path / f"{name}.txt")]), tmp_path / name, progress=False)
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    a = get_task({"name": "corpus", "path": str(tmp_path / "a")})
    b = get_task({"name": "corpus", "path": str(tmp_path / "b")})
    assert data_fingerprint(a) == manifest["tokens_sha256"][:16] != data_fingerprint(b)
    pinned = get_task({"name": "corpus", "path": str(tmp_path / "a"), "tokens_sha256": manifest["tokens_sha256"][:8]})
    assert pinned.vocab_size == 256
    other = get_task({"name": "corpus", "path": str(tmp_path / "b"), "tokens_sha256": manifest["tokens_sha256"][:8]})
    with pytest.raises(ValueError, match=f"tokens sha256 {data_fingerprint(b)}…, not the"):
        next(other.train_batches(1, 8, seed=0))
    with pytest.raises(ValueError, match="at least 8 lowercase hex"):
        get_task({"name": "corpus", "path": str(tmp_path / "a"), "tokens_sha256": "e32"})
    raw = tmp_path / "raw.u16"
    write_tokens(raw, iter([np.arange(100) % 7]), "uint16")
    assert data_fingerprint(get_task({"name": "corpus", "path": str(raw)})) is None
    assert data_fingerprint(get_task("sample")) is None
