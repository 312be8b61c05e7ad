"""`deltamup data`: prepare (default corpus subset and users' text), info, and bad input → exit 2 before work."""
from __future__ import annotations

import json

from deltamup.cli import main


def test_prepare_and_info(tmp_path, capsys):
    out = tmp_path / "c"
    assert main(["data", "prepare", "--out", str(out), "--sources", "pyyaml", "--max-files", "5", "--jobs", "1"]) == 0
    printed = capsys.readouterr()
    assert "read" in printed.err  # the progress bar
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["inputs"][0]["name"] == "pyyaml" and manifest["inputs"][0]["files"] == 5
    assert f"{manifest['tokens']:,} tokens" in printed.out
    assert main(["data", "info", str(out)]) == 0
    assert manifest["tokens_sha256"] in capsys.readouterr().out
    (tmp_path / "t.txt").write_text("plain text " * 500)
    assert main(["data", "prepare", str(tmp_path / "*.txt"), "--out", str(tmp_path / "t"), "--tokenizer", "bpe",
                 "--vocab-size", "300"]) == 0
    assert (tmp_path / "t" / "tokenizer.json").exists()


def test_bad_input_exits_2_without_output(tmp_path, capsys):
    cases = [
        ["data", "prepare", str(tmp_path / "none*.txt"), "--out", str(tmp_path / "x")],
        ["data", "prepare", "--out", str(tmp_path / "x"), "--sources", "no-such-package"],
        ["data", "prepare", "--out", str(tmp_path / "x"), "--tokenizer", "bpe", "--vocab-size", "100"],
        ["data", "info", str(tmp_path)],
    ]
    for argv in cases:
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("deltamup data: error:") and "\n" not in err
    assert not (tmp_path / "x").exists()
