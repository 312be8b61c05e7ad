"""Every command fails before its work: an output path that cannot be written, a binary file given as text; and the
formal languages' expressions have any length (no recursion, no eval)."""
from __future__ import annotations

import random

import pytest

from deltamup.cli import main
from deltamup.scaling.tasks import formal_languages


def one_error_line(capsys, command: str) -> str:
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith(f"deltamup {command}: error:") and "\n" not in err, err
    return err + captured.out


@pytest.mark.parametrize("out", ["/nonexistent/dir/x.json", "{tmp}/file.txt/x.json", "{tmp}"])
def test_tasks_run_refuses_an_unwritable_out_before_training(tmp_path, capsys, out: str) -> None:
    (tmp_path / "file.txt").write_text("")
    argv = ["tasks", "run", "s3", "--steps", "2", "--out", out.format(tmp=tmp_path)]
    assert main(argv) == 2
    text = one_error_line(capsys, "tasks")
    assert "--out" in text and "step" not in text  # refused before the first training step
    assert not (tmp_path / "file.txt").stat().st_size


def test_data_prepare_refuses_a_binary_file_unless_told(tmp_path, capsys) -> None:
    (tmp_path / "ok.txt").write_text("plain text, " * 50)
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 8)
    out = tmp_path / "tokens"
    assert main(["data", "prepare", str(tmp_path / "ok.txt"), str(tmp_path / "blob.bin"), "--out", str(out)]) == 2
    assert "blob.bin" in one_error_line(capsys, "data") and not out.exists()
    assert main(["data", "prepare", str(tmp_path / "ok.txt"), str(tmp_path / "blob.bin"), "--out", str(out),
                 "--binary-ok"]) == 0
    assert (out / "manifest.json").is_file()


def test_a_file_invalid_after_its_start_is_refused_while_read(tmp_path, capsys) -> None:
    (tmp_path / "late.txt").write_bytes(b"text " * 20_000 + b"\xff\xfe" + b" more")
    assert main(["data", "prepare", str(tmp_path / "late.txt"), "--out", str(tmp_path / "tokens")]) == 2
    assert "late.txt is not UTF-8 text (byte 100000)" in one_error_line(capsys, "data")
    assert not (tmp_path / "tokens" / "manifest.json").exists()


def test_expressions_of_any_length(capsys) -> None:
    """`eval` of a 20k-token expression ran out of recursion; the one-pass evaluation agrees with Python's on short
    ones, and bracketed expressions are built without recursion."""
    rng = random.Random(0)
    for _ in range(300):
        tokens, value = formal_languages.arithmetic(rng, rng.randint(1, 30), 7)
        assert value == eval("".join(tokens)) % 7  # the reference, on short expressions only
    tokens, _ = formal_languages.arithmetic(rng, 20_001, 5)
    assert len(tokens) == 20_001
    tokens, _ = formal_languages.bracketed(rng, 100_000, 5)
    assert len(tokens) == 100_000
    task = '{"name": "mod_arithmetic", "train_lengths": [20000, 20000]}'
    assert main(["tasks", "show", task, "--seq-len", "20001", "--count", "1"]) in (0, None)
    assert capsys.readouterr().out.startswith("inputs ")
