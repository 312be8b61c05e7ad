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


def fake_wheel(folder: Path, name: str, version: str, docstring: str) -> Path:
    """A pure-Python wheel of `name` at `version` whose one module holds `docstring` (for pip --find-links)."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {f"{name}_mod/__init__.py": f'"""{docstring}"""\n',
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_like_rebuilds_a_corpus_of_other_versions_and_checks_its_tokens(tmp_path, monkeypatch, capsys):
    """`data prepare --like MANIFEST` reads each source at the version the manifest lists: one installed here at
    another version comes from pip (here a local wheel: pip's --find-links, no index) into the data cache, and the
    build must reproduce the manifest's tokens sha256; a second rebuild reads the cache without pip. Another
    Python's standard library, or a version pip cannot fetch, is one line before any build."""
    from deltamup.cli import main

    docstring = "A sentence of this source's older version, the one another machine had installed."
    fake_wheel(tmp_path / "wheels", "pyyaml", "0.0.1", docstring)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    monkeypatch.setenv("DELTAMUP_DATA", str(tmp_path / "cache"))
    like = {"format": "deltamup-tokens/1", "tokenizer": {"kind": "bytes", "vocab_size": 256},
            "inputs": [{"name": "pyyaml", "version": "0.0.1"}], "tokens_sha256": "0" * 64}
    (tmp_path / "like.json").write_text(json.dumps(like))
    # built from the wheel, but not the manifest's (made-up) tokens
    assert main(["data", "prepare", "--like", str(tmp_path / "like.json"), "--out", str(tmp_path / "a"),
                 "--jobs", "1"]) != 0
    assert "not the 0000000000000000… of" in capsys.readouterr().err
    built = read_manifest(tmp_path / "a")
    assert [(i["name"], i["version"]) for i in built["inputs"]] == [("pyyaml", "0.0.1")]
    assert docstring.encode() in (tmp_path / "a" / "tokens.bin").read_bytes()[::2]  # uint16 byte tokens
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))  # the cache serves the second build
    assert main(["data", "prepare", "--like", str(tmp_path / "a"), "--out", str(tmp_path / "b"), "--jobs", "1"]) == 0
    assert read_manifest(tmp_path / "b")["tokens_sha256"] == built["tokens_sha256"]
    capsys.readouterr()
    for inputs, message in (([{"name": "stdlib", "version": "2.7.18"}], "Python 2.7.18's"),
                            ([{"name": "pyyaml", "version": "0.0.2"}], "pyyaml 0.0.2: pip cannot fetch it"),
                            ([{"name": "books", "version": None}], "not a source of the default corpus")):
        (tmp_path / "bad.json").write_text(json.dumps({**like, "inputs": inputs}))
        code = main(["data", "prepare", "--like", str(tmp_path / "bad.json"), "--out", str(tmp_path / "c")])
        err = capsys.readouterr().err
        assert code != 0 and message in err and err.count("\n") == 1, err
        assert not (tmp_path / "c").exists()
