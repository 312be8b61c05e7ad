"""`deltamup sweep --warm-kernels`: the head shapes a spec trains with, and nothing to do without a GPU."""
import os
from pathlib import Path

import torch

from deltamup.cli.sweep import kernel_shapes, warm_kernels
from deltamup.sweeps import spec as specs

SPEC = Path(__file__).resolve().parent.parent / "studies/gdn-adamw-8l/spec.yaml"


def test_kernel_shapes_follow_the_model_at_every_width():
    spec = specs.load(SPEC, ["task=sample", "widths=[256, 1024, 1040]"])
    assert kernel_shapes(spec, [256, 1024, 1040]) == {(32, 64, 1, True, 0), (128, 256, 1, True, 0),
                                                      (130, 260, 1, True, 0)}
    assert kernel_shapes(spec, [1024]) == {(128, 256, 1, True, 0)}
    product = specs.load(SPEC, ["task=sample", "widths=[256]", "model.kind=deltaproduct",
                                                            "model.householder=2"])
    assert kernel_shapes(product, [256]) == {(32, 64, 2, True, 0)}
    triton_conv = specs.load(SPEC, ["task=sample", "widths=[256]", "model.conv_backend=triton", "model.conv_size=3"])
    assert kernel_shapes(triton_conv, [256]) == {(32, 64, 1, True, 3)}  # its kernels warmed and checked too


def test_nothing_to_compile_without_a_gpu_or_without_a_width_left(capsys, monkeypatch, tmp_path):
    from deltamup.cli.sweep import start_kernel_check
    from deltamup.kernels.triton import tuning

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    spec = specs.load(SPEC, ["task=sample", "widths=[256]"])
    warm_kernels(spec, [256])
    assert "no GPU or no Triton backend here, nothing to compile" in capsys.readouterr().out
    monkeypatch.setenv(tuning.EXCLUDE_FILE_ENV, "")
    start_kernel_check(spec, [256], tmp_path)()  # said once, and the trials find an empty list of configs to leave out
    assert capsys.readouterr().out.count("nothing to compile") == 1
    assert Path(os.environ[tuning.EXCLUDE_FILE_ENV]).read_text() == ""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    warm_kernels(spec, [])  # returns before it would touch the GPU it was told of
    assert "no trial left to run, nothing to compile" in capsys.readouterr().out


def test_the_kernel_check_runs_beside_the_sweeps_start_and_its_result_reaches_the_trials(tmp_path, monkeypatch,
                                                                                           capsys):
    """--warm-kernels starts its check in the background (here a stand-in for the GPU's warm and fp64 check, which
    cannot run on a CPU) and names the file of configs to leave out for the processes Ray will start; what the
    runner calls before the first trial waits for the check and writes the file; a stale file from an earlier
    run is gone from the start; the launcher leaves out what the file names (tuning.allowed)."""
    import threading

    from deltamup.cli import sweep as cli_sweep
    from deltamup.kernels.triton import tuning
    from deltamup.sweeps import store

    monkeypatch.chdir(tmp_path)  # a relative DIR: the trials, which run in folders of their own, get an absolute path
    stale = store.compile_cache_dir(tmp_path / "sweep") / "kernels-off-fp64"
    stale.parent.mkdir(parents=True)
    stale.write_text("chunk_o_fwd_kernel@warps=4,stages=2\n")
    release = threading.Event()

    calls = []

    def check(spec, widths, check=True):
        calls.append(check)
        if not check:  # the compile, before the runner goes on
            return []
        release.wait(30)
        return ["chunk_o_fwd_kernel@warps=2,stages=2", "chunk_wu_aqk_fwd_kernel@warps=4,stages=2"]
    monkeypatch.setattr(cli_sweep, "warm_kernels", check)
    monkeypatch.setattr(cli_sweep, "nothing_to_warm", lambda spec, widths: None)  # as on a GPU
    monkeypatch.delenv(tuning.EXCLUDE_ENV, raising=False)
    monkeypatch.setenv(tuning.EXCLUDE_FILE_ENV, "")
    finish = cli_sweep.start_kernel_check(None, [256], Path("sweep"))
    assert calls[0] is False  # compiled before it returned; the check runs on
    assert os.environ[tuning.EXCLUDE_FILE_ENV] == str(stale) and not stale.exists()  # named before Ray starts
    configs = [dict(num_warps=4, num_stages=2), dict(num_warps=2, num_stages=2)]
    assert tuning.allowed("chunk_o_fwd_kernel", configs) == configs  # no file yet: nothing left out
    release.set()
    finish()
    assert calls == [False, True] and stale.read_text().splitlines() == check(None, [])
    assert tuning.allowed("chunk_o_fwd_kernel", configs) == configs[:1]
    out = capsys.readouterr().out
    assert out.count("2 kernel config(s) off fp64") == 1 and str(stale) in out


def test_a_kernel_check_that_fails_stops_the_sweep_before_its_trials(tmp_path, monkeypatch):
    """Where the background check raises (a CUDA error, say), what the runner calls before the first trial raises
    too: no trial runs without the check, and no file says that nothing is off."""
    import pytest

    from deltamup.cli import sweep as cli_sweep
    from deltamup.kernels.triton import tuning

    def check(spec, widths, check=True):
        if check:
            raise OSError("CUDA error: no kernel image is available")
        return []
    monkeypatch.setattr(cli_sweep, "warm_kernels", check)
    monkeypatch.setattr(cli_sweep, "nothing_to_warm", lambda spec, widths: None)  # as on a GPU
    monkeypatch.setenv(tuning.EXCLUDE_FILE_ENV, "")
    finish = cli_sweep.start_kernel_check(None, [256], tmp_path)
    with pytest.raises(RuntimeError, match="kernel check failed.*no kernel image"):
        finish()
    assert not Path(os.environ[tuning.EXCLUDE_FILE_ENV]).exists()


def test_a_shape_checked_before_in_this_cache_is_not_warmed_or_checked_again(tmp_path, monkeypatch):
    """The stamp a GPU run leaves in Triton's cache folder: found, its configs off fp64 are handed on and nothing
    runs (here, on a CPU, running anything would fail); another shape has no stamp and would run."""
    import json
    import subprocess
    import sys

    from deltamup.kernels.warm import stamp_path

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    stamp = stamp_path(64, 128, 1, True)
    assert stamp.parent == tmp_path / "triton" / "deltamup-checked"
    assert stamp != stamp_path(128, 256, 1, True) and stamp != stamp_path(64, 128, 2, True)
    assert stamp != stamp_path(64, 128, 1, True, 4)  # with the Triton short convolution: its kernels are not checked
    stamp.parent.mkdir(parents=True)
    stamp.write_text(json.dumps({"off": ["chunk_o_fwd_kernel@warps=2,stages=2"], "unfit": 0}))
    out = tmp_path / "off.json"
    run = subprocess.run([sys.executable, "-m", "deltamup.kernels.warm", "64", "128", "--off-fp64", str(out)],
                         capture_output=True, text=True)  # TRITON_CACHE_DIR set above, inherited
    assert run.returncode == 0, run.stderr
    assert "checked against fp64 in this cache before" in run.stdout
    assert json.loads(out.read_text()) == ["chunk_o_fwd_kernel@warps=2,stages=2"]
