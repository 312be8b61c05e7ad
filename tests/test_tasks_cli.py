"""`deltamup tasks`: list, show, and run (train + metrics + loss by position + state erank) on a tiny model."""
from __future__ import annotations

import json

from deltamup.cli import main


def test_list_and_show(capsys):
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("s3", "a5", "zn", "parity", "mod_arithmetic_brackets", "corpus"))
    assert main(["tasks", "show", '{"name": "zn", "n": 3}', "--seq-len", "6", "--count", "1"]) == 0
    inputs, targets = capsys.readouterr().out.splitlines()
    xs, ys = [int(v) for v in inputs.split()[1:]], [int(v) for v in targets.split()[1:]]
    assert all(y == sum(xs[: i + 1]) % 3 for i, y in enumerate(ys))  # Z3: running sums


def test_run_reports_metrics_loss_by_position_and_erank(tmp_path, capsys):
    out = tmp_path / "r.json"
    task = '{"name": "s3", "eval_sequences": 16, "test_length": 64, "report_lengths": [16, 64]}'
    argv = ["tasks", "run", task, "--model", "deltaproduct", "--householder", "2", "--neg-eigval", "--no-gated",
            "--width", "32", "--heads", "2", "--steps", "3", "--seq-len", "16", "--eval-len", "32",
            "-p", "sp", "--out", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert set(report["metrics"]) == {f"{m}@{t}" for m in ("acc", "last_acc", "seq_acc") for t in (16, 64)}
    assert len(report["loss_by_position"]) == 32
    assert sorted(map(int, report["state_erank"])) == [2, 4, 8, 16, 32]
    head_k_dim = report["model"]["width"] * 3 // 4 // 2  # 12: the state is [12, 24] per head
    assert all(1 <= r <= head_k_dim for ranks in report["state_erank"].values() for layer in ranks for r in layer)
    assert report["state_erank"]["32"][0][0] > report["state_erank"]["2"][0][0]  # more tokens, higher rank
    assert "yes" in capsys.readouterr().out  # a bucket past the training length


def test_run_rejects_bad_input_before_training(capsys):
    for argv in (["tasks", "run", "nope"], ["tasks", "run", "s3", "--eval-len", "8", "--erank-lengths", "16"],
                 ["tasks", "run", "s3", "-p", "nope"]):
        assert main(argv) == 2
        assert "step" not in capsys.readouterr().out
