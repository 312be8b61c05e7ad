"""The default corpus: prose extraction, sources that a fresh install has, a manifest stable across builds, BPE."""
from __future__ import annotations

import json
import re
import tomllib
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
from packaging.requirements import Requirement

from deltamup.scaling.data.inputs import default_corpus, text_files
from deltamup.scaling.data.prepare import prepare, read_manifest
from deltamup.scaling.data.pysource import prose_paragraphs
from deltamup.scaling.data.sources import DEFAULT_SOURCES, find_source
from deltamup.scaling.data.tokenizer import BPETokenizer
from deltamup.scaling.data.tokens import open_tokens

SOURCE = b'''#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Module docstring with an escape: \\u00e9."""
import os  # noqa: F401

# First comment line
# second line of the same paragraph

# A new paragraph.
def f(x):
    """Function docstring.

        Indented detail.
    """
    y = "not a docstring"
    f"{x} is an f-string"
    return y

class C:
    attribute = 1
    """Attribute docstring."""
    def broken(:
'''


def test_prose_paragraphs():
    assert prose_paragraphs(SOURCE) == [
        "Module docstring with an escape: é.",
        "First comment line\nsecond line of the same paragraph",
        "A new paragraph.",
        "Function docstring.\n\nIndented detail.",
        "Attribute docstring.",
    ]
    assert prose_paragraphs(b"x = (\n") == []  # an unterminated file keeps what came before


def dependency_closure() -> set[str]:
    """Distributions required, transitively, by pyproject.toml's dependencies (extras followed)."""
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    todo = [Requirement(r) for r in pyproject["project"]["dependencies"]]
    found: set[str] = set()
    while todo:
        req = todo.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name in found:
            continue
        found.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in (req.extras or {""})):
                todo.append(sub)
    return found


def test_default_sources_come_with_the_dependencies():
    closure = dependency_closure()
    missing = [s for s in DEFAULT_SOURCES if s != "stdlib" and s.replace("_", "-").lower() not in closure]
    assert not missing, f"not required by pyproject's dependencies, so absent from a fresh install: {missing}"
    assert find_source("pyyaml").files and find_source("stdlib").files


def test_manifest_is_stable_across_builds(tmp_path):
    def build(out, jobs):
        return prepare(default_corpus(("stdlib", "pyyaml"), max_files=12, jobs=jobs), tmp_path / out,
                       progress=False)

    first, second = build("a", 1), build("b", 2)  # in-process and in a process pool
    assert (tmp_path / "a" / "manifest.json").read_bytes() == (tmp_path / "b" / "manifest.json").read_bytes()
    assert (tmp_path / "a" / "tokens.bin").read_bytes() == (tmp_path / "b" / "tokens.bin").read_bytes()
    assert [e["name"] for e in first["inputs"]] == ["stdlib", "pyyaml"]
    assert first["text_bytes"] == first["tokens"] == sum(e["text_bytes"] for e in first["inputs"]) > 10_000
    assert read_manifest(tmp_path / "a") == second
    text = bytes(np.asarray(open_tokens(tmp_path / "a" / "tokens.bin", first["dtype"]), dtype=np.uint8)).decode()
    assert "\n\n" in text and '"""' not in text
    with pytest.raises(ValueError, match="already holds"):
        build("a", 1)
    with pytest.raises(ValueError, match="not installed"):
        default_corpus(("no-such-distribution",))


def test_bpe_trained_on_a_small_text_decodes_back(tmp_path):
    text = "".join(f"The state S{i} is updated by a Householder product, step {i * 7}.\n" for i in range(300))
    tok = BPETokenizer.train([text], vocab_size=400)
    assert 256 < tok.vocab_size <= 400
    sample = "Householder products update the state: ünïcode ✓ too.\n"
    ids = tok.encode_batch([sample])[0]
    assert tok.decode(ids) == sample
    assert len(tok.encode_batch([text])[0]) < len(text.encode()) / 2  # it did learn merges
    tok.save(tmp_path / "tokenizer.json")
    assert np.array_equal(BPETokenizer.load(tmp_path / "tokenizer.json").encode_batch([sample])[0], ids)


def test_prepare_with_bpe_writes_the_tokenizer_beside_the_tokens(tmp_path):
    (tmp_path / "a.txt").write_text("Gated DeltaNet and DeltaProduct share one kernel. " * 100)
    manifest = prepare(text_files([str(tmp_path / "*.txt")]), tmp_path / "out", "bpe", 300, progress=False)
    out = tmp_path / "out"
    assert manifest["tokenizer"]["kind"] == "bpe" and (out / "tokenizer.json").exists()
    tok = BPETokenizer.load(out / "tokenizer.json")
    ids = open_tokens(out / "tokens.bin", manifest["dtype"])
    assert tok.decode(ids) == (tmp_path / "a.txt").read_text() + "\n\n"
    assert json.loads((out / "manifest.json").read_text())["tokens"] == len(ids)
