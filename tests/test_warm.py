"""`deltamup sweep --warm-kernels`: the head shapes a spec trains with, and nothing to do without a GPU."""
from pathlib import Path

import torch

from deltamup.cli.sweep import kernel_shapes, warm_kernels
from deltamup.sweeps import spec as specs

SPEC = Path(__file__).resolve().parent.parent / "studies/gdn-adamw-8l/spec.yaml"


def test_kernel_shapes_follow_the_model_at_every_width():
    spec = specs.load(SPEC, ["task=sample", "widths=[256, 1024, 1040]"])
    assert kernel_shapes(spec) == {(32, 64, 1, True), (128, 256, 1, True), (130, 260, 1, True)}
    product = specs.load(SPEC, ["task=sample", "widths=[256]", "model.kind=deltaproduct",
                                                            "model.householder=2"])
    assert kernel_shapes(product) == {(32, 64, 2, True)}


def test_nothing_to_compile_without_a_gpu(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    warm_kernels(specs.load(SPEC, ["task=sample", "widths=[256]"]))
    assert "nothing to compile" in capsys.readouterr().out
