"""The Triton chunk kernels against the token-by-token reference, forward and every gradient.

On a CPU they run under TRITON_INTERPRET=1 (set here before triton is imported), on tiny shapes: several chunks with
a ragged last one, head dims that are not powers of two, K > 64 (several K blocks; up to four state blocks, wider
ones beyond K = 256), g None / exactly 0 / random, β up to 2, initial and final state, the fused q/k L2 norm,
DeltaProduct n_h = 2, 3, 4 (gated or not, chunks that end mid-token).
"""
from __future__ import annotations

import os
import re

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton", reason="triton is not installed")

from deltamup import kernels  # noqa: E402
from deltamup.kernels.check import outputs as run  # noqa: E402
from deltamup.kernels.check import random_inputs, rel_errors  # noqa: E402
from deltamup.kernels.reference import recurrent_gated_delta_rule  # noqa: E402
from deltamup.kernels.triton import chunk_gated_delta_rule_triton  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def make_inputs(B: int, T: int, H: int, K: int, V: int, gate: str, seed: int = 0) -> dict[str, torch.Tensor | None]:
    return random_inputs(B, T, H, K, V, gate, seed, DEVICE)


def assert_close(got: dict, want: dict, tol: float) -> None:
    for n, err in rel_errors(got, want).items():
        assert err < tol, f"{n}: relative error {err:.2e} ≥ {tol:.0e}"


@pytest.mark.parametrize("B,T,H,K,V,gate,use_h0,final", [
    (1, 70, 2, 5, 7, "random", True, True),
    (2, 130, 2, 16, 32, "none", False, False),
    (1, 40, 2, 70, 90, "zero", True, False),
    (1, 65, 2, 16, 32, "random", False, True),
    (1, 70, 1, 96, 192, "random", True, True),   # width 768's heads (studies/gdn-sgd): K not a power of two, V = 2K
    (1, 70, 1, 200, 24, "random", True, True),   # four 64-row state blocks, the last ragged
    (1, 40, 1, 300, 20, "random", True, True),   # three 128-row state blocks (K > 256)
    (1, 40, 1, 512, 16, "random", True, True),   # four 128-row state blocks: the largest K the issue asks for
])
def test_rule_matches_reference(B, T, H, K, V, gate, use_h0, final):
    x = make_inputs(B, T, H, K, V, gate)
    want = run(recurrent_gated_delta_rule, x, torch.float64, use_h0, final)
    got = run(chunk_gated_delta_rule_triton, x, torch.float32, use_h0, final)
    assert_close(got, want, 1e-4)


@pytest.mark.parametrize("K,V", [(16, 16), (70, 90)])
def test_l2norm_in_kernel(K, V, monkeypatch):
    """use_qk_l2norm_in_kernel. Without a gradient the passes scale q's and k's rows by 1/‖·‖ where they use them
    (two row blocks of the state at K = 70) and no normalising pass runs; with one, q and k are normalised once
    before the passes (the copies the backward reuses). Both: output and final state as the fp64 recurrence on
    normalised q, k; with the gradient, every gradient too. The op's norm inside the passes refuses a backward."""
    from deltamup.kernels.triton import function

    calls = []
    l2norm_fwd = function.l2norm_fwd
    monkeypatch.setattr(function, "l2norm_fwd", lambda *a: calls.append(a) or l2norm_fwd(*a))
    x = make_inputs(1, 70, 2, K, V, "random", seed=2)
    x["q"], x["k"] = 3 * x["q"], x["k"] / 2  # not unit rows: the norm matters
    want = run(recurrent_gated_delta_rule, x, torch.float64, True, True, l2=True)
    forward = run(chunk_gated_delta_rule_triton, x, torch.float32, True, True, l2=True, grads=False)
    assert calls == []
    assert_close(forward, {n: want[n] for n in ("o", "ht")}, 1e-4)
    got = run(chunk_gated_delta_rule_triton, x, torch.float32, True, True, l2=True)
    assert len(calls) == 2
    assert_close(got, want, 1e-4)
    q, k, v, g, beta = (x[n].float().requires_grad_() for n in ("q", "k", "v", "g", "beta"))
    o = function.chunk_gated_delta_fwd(q, k, v, g, beta, 0.25, None, False, 1, True)[0]
    with pytest.raises(RuntimeError, match="forward only"):
        o.sum().backward()
    o = function.chunk_gated_delta_fwd(q, k, v, g, beta, 0.25, None, False, 1, False, False)[0]  # without save
    with pytest.raises(RuntimeError, match="forward only"):
        o.sum().backward()


def delta_product(backend: str, n: int):
    return lambda q, k, v, g, beta, **kw: kernels.chunk_gated_delta_product(q, k, v, g, beta, n, backend=backend, **kw)


@pytest.mark.parametrize("n,T,gate,l2", [
    (2, 35, "random", True),
    (2, 35, "none", False),
    (2, 70, "random", False),   # 140 micro-rows: three chunks, the last one ragged
    (3, 45, "random", True),    # 135 micro-rows: chunks end mid-token (64 = 21·3 + 1, 128 = 42·3 + 2), ragged last
    (3, 25, "none", False),
    (4, 20, "random", False),
    (4, 17, "none", True),
])
def test_delta_product(n, T, gate, l2):
    """DeltaProduct_n in the Triton kernels (q, g, o, do, dq, dg never interleaved) against the interleaved fp64
    recurrence: output, final state and the gradients of q, k, v, g, β and the initial state; with the q/k norm,
    the forward alone as well (the norm inside its passes)."""
    B, H, K, V = 1, 2, 16, 16
    x = make_inputs(B, T * n, H, K, V, gate, seed=3 + n)
    x["q"] = x["q"][:, :T]
    if x["g"] is not None:
        x["g"] = x["g"][:, :T]
    want = run(delta_product("recurrent", n), x, torch.float64, True, True, l2=l2)
    got = run(delta_product("triton", n), x, torch.float32, True, True, l2=l2)
    assert_close(got, want, 1e-4)
    if l2:  # the forward alone normalises q and k inside its passes
        forward = run(delta_product("triton", n), x, torch.float32, True, True, l2=True, grads=False)
        assert_close(forward, {k: want[k] for k in ("o", "ht")}, 1e-4)


def test_delta_product_triton_does_not_interleave(monkeypatch):
    """The Triton backend runs DeltaProduct in its kernels, not through the generic interleave."""
    def fail(*args, **kwargs):
        raise AssertionError("generic interleave used")

    monkeypatch.setattr(kernels, "gated_delta_product", fail)
    x = make_inputs(1, 6, 1, 8, 8, "random")
    o, _ = delta_product("triton", 3)(x["q"][:, :2], x["k"], x["v"], x["g"][:, :2], x["beta"])
    assert o.shape == (1, 2, 1, 8)


@pytest.mark.parametrize("config", [dict(BV=16, num_warps=4, num_stages=1), dict(BV=64, num_warps=4, num_stages=2),
                                    dict(BV=64, num_warps=4, num_stages=1)])
def test_every_state_config_is_correct(monkeypatch, config):
    """The sequential passes with a V block other than the heuristic's (launch may pick any state_configs candidate
    on a GPU, and the forward's one-stage BV 64, tuning.one_stage_output_configs): BV = 16 and 64 against the
    reference, V = 90 (ragged in both), K = 70 (two state blocks). Stages matter on a GPU only
    (DELTAMUP_AUTOTUNE=0 runs this config there)."""
    from deltamup.kernels.triton import chunk_bwd, chunk_fwd, tuning

    for module in (chunk_fwd, chunk_bwd):
        monkeypatch.setattr(module, "state_configs", lambda K, BK, V, BH: ([config], []))
    monkeypatch.setattr(tuning, "_chosen", {})
    x = make_inputs(1, 70, 2, 70, 90, "random", seed=5)
    want = run(recurrent_gated_delta_rule, x, torch.float64, True, True)
    got = run(chunk_gated_delta_rule_triton, x, torch.float32, True, True)
    assert_close(got, want, 1e-4)


@pytest.mark.skipif(DEVICE != "cuda", reason="configs differ only on a GPU (the interpreter ignores warps and stages)")
@pytest.mark.parametrize("K, V", [(64, 128), (128, 256), (192, 384)])
def test_every_candidate_config_is_correct(K, V):
    """Every pass with each of its candidate configs in turn (selfcheck.py, `deltamup kernels check`), forward and
    every gradient against fp64, at the model's head shapes: the autotuner may pick any of them, and on Hopper a
    config can compile to wrong results where another is right (tuning.py)."""
    from deltamup.kernels.triton import selfcheck

    wrong = [r for r in selfcheck.check(K, V, torch.bfloat16) if r.off(1e-2)]
    assert not wrong, "configs off fp64: " + "; ".join(f"{r.kernel} {r.config}: {r.worst} {r.error:.2e}"
                                                       for r in wrong)


def test_a_pinned_pass_launches_its_chosen_candidate_and_the_others_their_first():
    """tuning.pinned, what `deltamup kernels check` runs each candidate with: the named pass's i-th config (its last
    where it has fewer), every other pass its first, each time it launches."""
    from deltamup.kernels.triton import tuning

    x = make_inputs(1, 70, 1, 64, 64, "random")
    with tuning.pinned("chunk_state_bwd_kernel", 1) as pin:
        run(chunk_gated_delta_rule_triton, x, torch.float32, True, True)
    assert len(pin.seen["chunk_state_bwd_kernel"]) > 1 and len(pin.seen) >= 8  # the forward and backward passes
    for name, configs in pin.seen.items():
        want = configs[1] if name == "chunk_state_bwd_kernel" else configs[0]
        assert pin.launched[name] and all(cfg == want for cfg in pin.launched[name]), name
    with tuning.pinned("chunk_o_fwd_kernel", 99) as pin:
        run(chunk_gated_delta_rule_triton, x, torch.float32, True, True)
    assert pin.launched["chunk_o_fwd_kernel"] == [pin.seen["chunk_o_fwd_kernel"][-1]]


def _nan_wu_buffers(monkeypatch) -> None:
    """chunk_fwd's w and u buffers filled with NaN: a state pass that reads one its per-chunk pass did not write
    gives NaN."""
    from deltamup.kernels.triton import chunk_fwd as fwd

    buffers = fwd._wu_buffers

    def nan_wu(*a):
        out = buffers(*a)
        out["w"].fill_(float("nan"))
        out["u"].fill_(float("nan"))
        return out
    monkeypatch.setattr(fwd, "_wu_buffers", nan_wu)


def _forward_args(T_tok: int, K: int, V: int, nh: int, norm: bool) -> tuple:
    """chunk_fwd's arguments (fp32, B 1, H 2, an initial state, the final state wanted)."""
    x = {n: t.float().contiguous() for n, t in make_inputs(1, T_tok * nh, 2, K, V, "random", seed=3).items()}
    return (x["q"][:, :T_tok].contiguous(), x["k"], x["v"], x["g"][:, :T_tok].contiguous(), x["beta"], K**-0.5,
            x["h0"], True, nh, norm)


FORWARD_CASES = [(150, 64, 128, 1, False), (70, 64, 96, 2, False), (70, 64, 96, 2, True)]


@pytest.mark.parametrize("T_tok,K,V,nh,norm", FORWARD_CASES)
def test_fused_state_candidates_give_the_split_forward(T_tok, K, V, nh, norm, monkeypatch):
    """The state pass's fused candidates (the launcher keeps one where it times faster than the split form) against
    the split form, each pinned beside the same state config without its FUSE_* flags (at 2 stages: the
    interpreter ignores stages, and the split candidates have no one-stage config): FUSE_O computes the output
    in the sequential walk (no output pass launched); FUSE_U forms u = T(β ⊙ V) there and reads no u (the per-chunk
    pass leaves it unwritten: here a buffer of NaNs); FUSE_W forms v_new = T(β ⊙ (V − e^G K h)). The same final
    state and saved intermediates (the backward's inputs) — bit for bit for FUSE_O alone, whose walk is the split
    form's — and the same o to fp32 rounding. Gated delta rule and DeltaProduct_2 (q and o per token, a mid-token
    chunk end), and with q, k normalised inside. The fused forms compute with other tiles and in another order: the
    interpreter's products (numpy's matmul) sum in an order that follows the operands' shapes, so last bits may
    differ (1.8e-7 with numpy 2.4); on an H200 FUSE_O's came out bit for bit. The split twins (BV 64) are not among
    the launcher's candidates (they never won on a GPU): the test offers them beside the fused ones. In the
    interpreter, fused candidates that differ only in stages or warps run once (selfcheck.run_as)."""
    from deltamup.kernels.triton import chunk_fwd as forward
    from deltamup.kernels.triton import selfcheck, tuning
    from deltamup.kernels.triton.chunk_fwd import chunk_fwd

    _nan_wu_buffers(monkeypatch)
    offered = tuning.forward_state_candidates
    monkeypatch.setattr(forward, "forward_state_candidates",
                        lambda configs, save=True: [*configs, *offered(configs, save)[1:]])
    args = _forward_args(T_tok, K, V, nh, norm)
    with tuning.pinned() as pin:
        chunk_fwd(*args)
    configs = pin.seen["chunk_state_fwd_kernel"]
    fused = [i for i, c in enumerate(configs) if any(f.startswith("FUSE_") for f in c)]
    assert {"FUSE_O", "FUSE_U", "FUSE_W"} <= {f for i in fused for f in configs[i]}
    assert any(set(configs[i]) >= {"FUSE_O", "FUSE_U", "FUSE_W"} for i in fused)
    splits, shares = {}, selfcheck.run_as(configs)
    for i in dict.fromkeys(shares[i] for i in fused):  # those that compute differently here
        twin = configs.index({k: v for k, v in configs[i].items() if not k.startswith("FUSE_")}
                             | dict(num_stages=2))  # stages: ignored here, and no split config has one
        if twin not in splits:
            with tuning.pinned("chunk_state_fwd_kernel", twin) as pin:
                splits[twin] = chunk_fwd(*args)
            assert "chunk_o_fwd_kernel" in pin.launched
        split = splits[twin]
        with tuning.pinned("chunk_state_fwd_kernel", i) as pin:
            o, ht, saved = chunk_fwd(*args)
        assert ("chunk_o_fwd_kernel" in pin.launched) != bool(configs[i].get("FUSE_O"))
        if set(configs[i]) & {"FUSE_U", "FUSE_W"}:
            assert_close({"ht": ht, **saved}, {"ht": split[1].double(), **{n: t.double() for n, t in split[2].items()}},
                         1e-6)
        else:
            assert torch.equal(ht, split[1]) and all(torch.equal(saved[n], split[2][n]) for n in saved)
        assert_close({"o": o}, {"o": split[0].double()}, 1e-6)


@pytest.mark.parametrize("T_tok,K,V,nh,norm", FORWARD_CASES)
def test_a_forward_alone_stores_nothing_for_a_backward(T_tok, K, V, nh, norm, monkeypatch):
    """chunk_fwd without save (what the entry points run where no gradient is wanted): only FUSE_O candidates, no
    output pass, no h, v_new or w kept (and w not written where the walk forms it: a buffer of NaNs here), and each
    candidate gives the saving forward's o and final state (in the interpreter, each that computes differently:
    selfcheck.run_as); the saving forward's h_all is what it does not store."""
    from deltamup.kernels.triton import selfcheck, tuning
    from deltamup.kernels.triton.chunk_fwd import chunk_fwd

    _nan_wu_buffers(monkeypatch)
    args = _forward_args(T_tok, K, V, nh, norm)
    o_saved, ht_saved, saved = chunk_fwd(*args)
    assert saved["h_all"].abs().sum() > 0
    with tuning.pinned() as pin:
        chunk_fwd(*args, save=False)
    configs = pin.seen["chunk_state_fwd_kernel"]
    assert configs and all(c.get("FUSE_O") for c in configs) and any(c.get("FUSE_W") for c in configs)
    for i in dict.fromkeys(selfcheck.run_as(configs)):  # those that compute differently here
        with tuning.pinned("chunk_state_fwd_kernel", i) as pin:
            o, ht, kept = chunk_fwd(*args, save=False)
        assert "chunk_o_fwd_kernel" not in pin.launched and set(kept) == {"G", "Tinv", "Aqk"}, configs[i]
        assert_close({"o": o, "ht": ht}, {"o": o_saved.double(), "ht": ht_saved.double()}, 1e-6)


@pytest.mark.parametrize("K", [64, 32])
def test_the_op_without_save_returns_what_its_fake_does(K):
    """chunk_gated_delta_fwd without save (K 64), and where chunk_fwd stores h, v_new and w anyway (K 32: narrow
    heads, which have no FUSE_O candidate): the op returns them empty, as its fake implementation does (what
    torch.compile plans with), and o is the saving op's to fp32 rounding (at K 64 the op without save computes o in
    the state pass, FUSE_O, the saving op in the output pass: two summation orders, which the interpreter's BLAS rounds
    alike on some CPUs and not on others)."""
    from deltamup.kernels.triton import function

    x = {n: t.float().contiguous() for n, t in make_inputs(1, 70, 2, K, 64, "random").items()}
    args = (x["q"], x["k"], x["v"], x["g"], x["beta"], K**-0.5, None, False, 1, False)
    lean, full = function.chunk_gated_delta_fwd(*args, False), function.chunk_gated_delta_fwd(*args, True)
    with torch._subclasses.fake_tensor.FakeTensorMode() as mode:
        fake = function.chunk_gated_delta_fwd(*(mode.from_tensor(a) if isinstance(a, torch.Tensor) else a
                                                for a in args), False)
    assert [t.shape for t in lean] == [t.shape for t in fake] and [t.dtype for t in lean] == [t.dtype for t in fake]
    assert all(t.numel() == 0 for t in lean[5:]) and all(t.numel() > 0 for t in full[5:])
    assert_close({"o": lean[0]}, {"o": full[0].double()}, 1e-6)


def test_the_entry_point_saves_only_where_a_gradient_is_wanted(monkeypatch):
    """chunk_gated_delta_rule_triton under torch.no_grad (or on inputs that need none) runs chunk_fwd without save,
    with gradients on with it; both give the recurrence's o."""
    from deltamup.kernels.triton import function

    calls = []
    chunk_fwd = function.chunk_fwd
    monkeypatch.setattr(function, "chunk_fwd", lambda *a: calls.append(a[-1]) or chunk_fwd(*a))
    x = make_inputs(1, 70, 2, 64, 64, "random")
    want = run(recurrent_gated_delta_rule, x, torch.float64, grads=False)
    assert_close(run(chunk_gated_delta_rule_triton, x, torch.float32, grads=False), want, 1e-4)
    with_grads = run(chunk_gated_delta_rule_triton, x, torch.float32)
    assert_close({n: with_grads[n] for n in want}, want, 1e-4)
    assert calls == [False, True]


def test_the_per_chunk_pass_writes_w_and_u_only_when_asked():
    """chunk_wu_aqk without write_w / write_u (the state pass's FUSE_W / FUSE_U candidates form them in the walk):
    that buffer is left as it was, the others are the same as with every flag on (one program fewer a column block,
    the rest the same kernel)."""
    from deltamup.kernels.triton.chunk_fwd import _wu_buffers, chunk_solve, chunk_wu_aqk

    x = {n: t.float().contiguous() for n, t in make_inputs(1, 100, 2, 64, 96, "random", seed=4).items()}
    solved = chunk_solve(x["k"], x["g"], x["beta"], torch.float32, 96)
    outs = {}
    for flags in ((True, True), (False, True), (True, False), (False, False)):
        out = _wu_buffers(x["k"], x["v"], solved, False)
        for t in out.values():
            t.fill_(float("nan"))
        chunk_wu_aqk(x["q"], x["k"], x["v"], x["beta"], 0.125, solved, out, *flags)
        outs[flags] = out
    full = outs[True, True]
    assert not any(t.isnan().any() for t in full.values())
    for (write_w, write_u), out in outs.items():
        assert out["w"].isnan().all() != write_w and out["u"].isnan().all() != write_u
        written = ["Aqk"] + ["w"] * write_w + ["u"] * write_u
        assert all(torch.equal(out[n], full[n]) for n in written)


def test_configs_named_off_fp64_are_left_out_of_the_launch(monkeypatch):
    """tuning.EXCLUDE_ENV (what `deltamup sweep --warm-kernels` sets for configs its check found off fp64): the
    launcher skips the named candidate (on a CPU it takes the first left) and the result is unchanged; where every
    candidate of a pass is named, it keeps the first."""
    from deltamup.kernels.triton import tuning

    first, second = tuning.OUT_CONFIGS[:2]
    monkeypatch.setenv(tuning.EXCLUDE_ENV, f"chunk_o_fwd_kernel@{tuning.config_text(first)}")
    monkeypatch.setattr(tuning, "_chosen", {})
    x = make_inputs(1, 70, 1, 64, 64, "random")
    assert_close(run(chunk_gated_delta_rule_triton, x, torch.float32, True, True),
                 run(recurrent_gated_delta_rule, x, torch.float64, True, True), 1e-4)
    assert [cfg for key, cfg in tuning._chosen.items() if key[0] == "chunk_o_fwd_kernel"] == [second]
    assert [cfg for key, cfg in tuning._chosen.items() if key[0] == "chunk_dv_local_bwd_kernel"] == [first]
    monkeypatch.setenv(tuning.EXCLUDE_ENV, ";".join(f"p@{tuning.config_text(c)}" for c in (first, second)))
    assert tuning.allowed("p", [first, second]) == [first] and tuning.allowed("q", [first, second]) == [first, second]


def test_kernels_check_prints_each_candidates_error_and_fails_at_its_tolerance(capsys):
    """`deltamup kernels check` for one pass: a row per candidate with its error against fp64 (small: the interpreter
    computes every config the same), and exit 1 when an error reaches the tolerance (here 1e-12)."""
    from deltamup.cli import main
    from deltamup.kernels.triton import tuning

    argv = ["kernels", "check", "--head-dims", "64x64", "--kernel", "chunk_o_fwd_kernel", "--shape", "1,70,1",
            "--dtype", "fp32"]  # fp32 on a GPU as well, where the default is bf16 and its bar 1e-2
    assert main(argv + ["--tolerance", "1e-12"]) == 1
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("64 ")]
    assert [(r[2], r[3], r[4]) for r in rows] == [("chunk_o_fwd_kernel", str(i), tuning.config_text(c))
                                                  for i, c in enumerate(tuning.OUT_CONFIGS)]
    assert all(float(r[5]) < 1e-4 and r[7] == "NO" for r in rows)


def test_kernels_check_as_a_command_on_a_cpu_picks_the_interpreter_itself():
    """The console command, with no TRITON_INTERPRET in its environment: on a CPU it selects Triton's interpreter
    before anything imports the kernels (every subcommand's module is imported first; `sweep`'s once imported
    them at the top, and the check died on Triton's "0 active drivers")."""
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-m", "deltamup", "kernels", "check", "--head-dims", "16x16", "--kernel",
                             "chunk_wu_aqk_fwd_kernel", "--shape", "1,70,1", "--dtype", "fp32"],
                            cwd=Path(__file__).parent, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "configs within 0.0001 of fp64" in result.stdout


def test_kernels_check_covers_the_forward_alone(capsys):
    """`deltamup kernels check --forward-only`: the forward that stores nothing for a backward (its passes compile
    apart): the state pass's candidates are its FUSE_O ones, each within the bar of fp64 on o and the final state,
    and no backward pass runs."""
    from deltamup.cli import main
    from deltamup.kernels.triton import tuning

    argv = ["kernels", "check", "--head-dims", "64x128", "--shape", "1,70,1", "--dtype", "fp32", "--forward-only"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("64 ")]
    state = [r[4] for r in rows if r[2] == "chunk_state_fwd_kernel"]
    configs = tuning.state_configs(64, 64, 128, 1)[0]
    assert state == [tuning.config_text(c) for c in tuning.forward_state_candidates(configs, save=False)]
    assert not any(r[2].startswith("chunk_") and "bwd" in r[2] for r in rows)  # (the short conv's are checked too)
    assert all(float(r[5]) < 1e-4 and r[7] == "yes" for r in rows)
    assert "the forward alone" in out.splitlines()[-1]


def test_kernels_check_covers_the_passes_that_normalise_q_and_k(capsys, monkeypatch):
    """`deltamup kernels check --qk-norm-in-kernel`: the per-chunk pass's candidates compiled with the in-kernel norm
    (NORM), the forward on q of any length against the recurrence on normalised q, k, with no normalising pass of
    its own (the check's q is not normalised: a pass that skipped the norm fails the bar)."""
    from deltamup.cli import main
    from deltamup.kernels.triton import function

    calls = []
    l2norm_fwd = function.l2norm_fwd
    monkeypatch.setattr(function, "l2norm_fwd", lambda *a: calls.append(a) or l2norm_fwd(*a))
    argv = ["kernels", "check", "--head-dims", "16x32", "--kernel", "chunk_kkt_solve_fwd_kernel", "--shape", "1,40,2",
            "--dtype", "fp32", "--qk-norm-in-kernel"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("16 ")]
    assert rows and all(float(r[5]) < 1e-4 and r[7] == "yes" for r in rows)
    assert "q and k normalised in the kernels" in out.splitlines()[-1] and calls == []


def test_kernels_check_covers_delta_product_and_the_fused_output_candidates(capsys):
    """`deltamup kernels check --householder 2`: DeltaProduct_2's forward state pass (compiled apart from n_h = 1),
    each candidate, the FUSE_O ones among them, against the fp64 recurrence over the interleaved micro-rows."""
    from deltamup.cli import main
    from deltamup.kernels.triton import tuning

    argv = ["kernels", "check", "--head-dims", "64x128", "--kernel", "chunk_state_fwd_kernel", "--shape", "1,40,1",
            "--dtype", "fp32", "--householder", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("64 ")]
    configs = tuning.state_configs(64, 64, 128, 1)[0]
    assert [r[4] for r in rows] == [tuning.config_text(c) for c in tuning.forward_state_candidates(configs)]
    assert any("FUSE_O" in r[4] for r in rows) and all(float(r[5]) < 1e-4 and r[7] == "yes" for r in rows)
    assert "n_h 2" in out.splitlines()[-1]
    assert main(argv[:-1] + ["0"]) == 2  # bad input: one line, before any work
    assert capsys.readouterr().err.strip().endswith("--householder 0: must be at least 1")


def test_kernels_check_covers_the_short_convolution(capsys):
    """`deltamup kernels check --kernel short_conv_bwd_kernel`: each candidate of the convolution's backward first
    pass, at the q width of the heads (normalized per head) and the v width, against the PyTorch form in fp64."""
    from deltamup.cli import main
    from deltamup.kernels.triton import short_conv, tuning

    argv = ["kernels", "check", "--head-dims", "16x32", "--kernel", "short_conv_bwd_kernel", "--shape", "1,40,2",
            "--dtype", "fp32"]
    assert main(argv) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("16 ")]
    assert [(r[2], r[4]) for r in rows] == [("short_conv_bwd_kernel", tuning.config_text(c))
                                            for c in short_conv.BWD_CONFIGS] * 2
    assert all(float(r[5]) < 1e-4 and r[7] == "yes" for r in rows)


def test_kernels_check_passes_a_config_that_does_not_fit(monkeypatch, capsys):
    """A candidate that overflows the GPU's shared memory is never launched (launch skips it): `deltamup kernels
    check` says so in its row and its summary and does not fail for it (sweep --warm-kernels does not exclude it)."""
    from triton.runtime.errors import OutOfResources

    from deltamup.cli import main
    from deltamup.kernels.triton import tuning

    launch_pinned = tuning._launch_pinned

    def overflow_candidate_0(pin, name, configs, fallbacks, run):
        if name == pin.kernel == "chunk_o_fwd_kernel" and pin.index == 0:
            raise OutOfResources(296_460, 232_448, "shared memory")
        launch_pinned(pin, name, configs, fallbacks, run)

    monkeypatch.setattr(tuning, "_launch_pinned", overflow_candidate_0)
    argv = ["kernels", "check", "--head-dims", "64x64", "--kernel", "chunk_o_fwd_kernel", "--shape", "1,70,1",
            "--dtype", "fp32"]  # fp32 on a GPU as well, where the default is bf16 and its bar 1e-2
    assert main(argv) == 0
    out = capsys.readouterr().out
    rows = [re.split(r"\s{2,}", line.strip()) for line in out.splitlines() if line.startswith("64 ")]
    # (in the interpreter candidate 1 differs from 0 only in its warps; 0 never ran, so 1 runs itself)
    run = (lambda i: [i]) if DEVICE == "cpu" else (lambda i: [])  # the interpreter's `run` column
    assert [(r[3], r[5], r[7], *r[8:]) for r in rows] == [("0", "–", "does not fit", *run("0")),
                                                         ("1", rows[1][5], "yes", *run("1"))]
    assert "1 of 2 configs within 0.0001 of fp64" in out and "1 do not fit" in out


def test_launch_falls_back_only_when_no_candidate_fits(monkeypatch):
    """launch: a config that overflows the shared memory is skipped, the fallbacks are tried only when no candidate
    fits, and the choice is kept for the next launch (a kernel whose pipelined configs never fit, as at K = 384)."""
    from triton.runtime.errors import OutOfResources

    from deltamup.kernels.triton import tuning

    monkeypatch.setattr(tuning, "_chosen", {})
    calls: list[tuple[int, int]] = []

    class Kernel:  # what launch uses of a JIT function: kernel[grid](*args, **meta)
        def __getitem__(self, grid):
            def go(*args, num_warps: int, num_stages: int):
                calls.append((num_warps, num_stages))
                if num_stages > 1:
                    raise OutOfResources(300_000, 232_448, "shared memory")
            return go

    cfgs = [dict(num_warps=8, num_stages=2), dict(num_warps=4, num_stages=2)]
    falls = [dict(num_warps=4, num_stages=1), dict(num_warps=8, num_stages=1)]
    kernel = Kernel()
    tuning.launch(kernel, (1,), (torch.zeros(1),), {}, cfgs, falls)
    tuning.launch(kernel, (1,), (torch.zeros(1),), {}, cfgs, falls)
    assert calls == [(8, 2), (4, 2), (4, 1), (4, 1)]
    with pytest.raises(OutOfResources):
        tuning.launch(Kernel(), (1,), (torch.zeros(1),), {}, cfgs, [])


def test_dispatch():
    assert kernels.resolve_backend("triton", "cpu") is chunk_gated_delta_rule_triton
    assert kernels.resolve_backend("auto", "cuda") is chunk_gated_delta_rule_triton


@pytest.mark.parametrize("K, V", [(16, 32), (64, 32), (64, 64)])
def test_half_precision_path(K, V):
    """fp16 inputs: half-precision dot operands in the state passes, and in the per-chunk passes where no tile is
    narrow (K = V = 64); fp32 operands there for narrow heads (tuning.is_narrow). bf16 takes the same paths on a GPU;
    the interpreter of Triton 3.8 mis-computes bf16 dots, so CPU runs check fp16."""
    x = make_inputs(1, 70, 2, K, V, "random", seed=4)
    want = run(recurrent_gated_delta_rule, x, torch.float64, True, True)
    got = run(chunk_gated_delta_rule_triton, x, torch.float16, True, True)
    assert_close(got, want, 5e-3)


@pytest.mark.parametrize("nh", [1, 2])
def test_dot_operands_stored_in_their_dtype_lose_nothing(nh, monkeypatch):
    """The tensors only dots read (T, Aqk, the v_new gradient, dw) stored in the dots' operand dtype give the same
    outputs and gradients, bit for bit, as fp32 buffers would: stored rounded as each dot rounds its operands.
    fp16 on a CPU (the interpreter mis-computes bf16 dots), bf16 on a GPU; DeltaProduct_2 as well."""
    from deltamup.kernels.triton import chunk_bwd, chunk_fwd, function, tuning
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float16
    x = make_inputs(1, 70 * nh, 2, 64, 64, "random", seed=6)
    x["q"], x["g"] = x["q"][:, :70], x["g"][:, :70]  # a row per token; k, v, β per micro-row
    rule = delta_product("triton", nh)
    stored = run(rule, x, dtype, True, True)
    asked = []

    def fp32(dt: torch.dtype, K: int, V: int) -> torch.dtype:
        asked.append(tuning.dot_operand_dtype(dt, K, V))
        return torch.float32
    for module in (chunk_fwd, chunk_bwd, function):
        monkeypatch.setattr(module, "dot_operand_dtype", fp32)
    wide = run(rule, x, dtype, True, True)
    assert asked and set(asked) == {dtype}  # the half path: these buffers are in the inputs' dtype
    assert stored.keys() == wide.keys()
    assert [n for n in stored if not torch.equal(stored[n], wide[n])] == []


def test_narrow_heads_run_the_one_validated_form():
    """A tile under 64 wide (K or V ≤ 32) takes fp32 operands and the first config only: on the H200 half operands
    there crashed (K = 32) or gave rel. errors ≈ 1 (K = 64, V = 32; K = 128, V = 32), and 4 warps crashed (K = 16)."""
    from deltamup.kernels.triton import tuning
    assert [tuning.precision(torch.bfloat16, K, V) for K, V in [(16, 32), (32, 64), (64, 32), (128, 32), (64, 128)]] \
        == ["tf32", "tf32", "tf32", "tf32", "half"]
    assert tuning.precision(torch.float32, 64, 32) == "ieee"
    assert len(tuning.candidates(tuning.PAR_CONFIGS, 128, 32)) == 1 < len(tuning.candidates(tuning.PAR_CONFIGS, 64, 64))
    assert len(tuning.state_configs(128, 64, 32, 2)[0]) == 1
    assert tuning.fused_output_configs(tuning.state_configs(32, 64, 64, 96)[0]) == []


@pytest.mark.parametrize("T_tok,K,V,nh,blockwise", [
    (100, 8, 8, 1, False),     # a ragged last chunk: 100 = 64 + 2·16 + 4 rows
    (131, 195, 70, 1, False),  # K not a power of two over four K blocks, last chunk 3 rows (one partial 16-row block)
    (45, 96, 40, 2, False),    # DeltaProduct_2: q and g per token, 90 micro-rows, gates only at first micro-rows
    (100, 48, 40, 1, True),    # the solve from A's 16×16 blocks (BLOCKWISE), the same cases
    (131, 195, 70, 1, True),
    (45, 96, 40, 2, True),
])
def test_chunk_pass_matches_fp64(T_tok, K, V, nh, blockwise):
    """The forward's per-chunk pass against fp64, chunk by chunk: G = cumsum g, T = (I + A)^{-1} with zeros above
    the diagonal, Aqk = scale causal(Q Kᵀ ⊙ D), w = T(β e^G K), u = T(β V). β = 2 on runs of identical keys (A is as
    far from small as it gets; the second run spans all four 16-row blocks of its chunk), random gates slow enough
    that the far blocks of T matter. The solve in registers (its first candidate) and from A's blocks (its first
    BLOCKWISE candidate)."""
    from deltamup.kernels.triton import tuning
    from deltamup.kernels.triton.chunk_fwd import chunk_prepare
    B, H, C, scale = 1, 2, 64, 0.3
    T = T_tok * nh
    x = make_inputs(B, T, H, K, V, "random", seed=5)
    k, beta = x["k"].clone(), x["beta"].clone()
    k[:, 10:30] = k[:, 10:11]
    k[:, 66:128] = k[:, 66:67]
    beta[:, 5:40] = 2.0
    beta[:, 64:] = 2.0
    q, g = x["q"][:, :T_tok], 0.1 * x["g"][:, :T_tok]
    q, k, v, g, beta = (t.float().contiguous() for t in (q, k, x["v"], g, beta))
    first_blockwise = next(i for i, c in enumerate(tuning.SOLVE_CONFIGS) if c.get("BLOCKWISE"))
    with tuning.pinned("chunk_kkt_solve_fwd_kernel", first_blockwise if blockwise else 0) as pin:
        saved = {name: t.cpu() for name, t in chunk_prepare(q, k, v, g, beta, scale, nh).items()}
    assert bool(pin.launched["chunk_kkt_solve_fwd_kernel"][0].get("BLOCKWISE")) == blockwise
    q, k, v, g, beta = (t.cpu() for t in (q, k, v, g, beta))  # the fp64 reference on the CPU (also after a GPU run)
    r = torch.arange(T)  # the micro-rows: q at each token's last, g at its first (kernels/triton/utils.py, row_map)
    qm = torch.where((r % nh == nh - 1)[:, None, None], q[0, r // nh].double(), 0.0)  # [T, H, K]
    gm = torch.where((r % nh == 0)[:, None], g[0, r // nh].double(), 0.0)  # [T, H]
    k, v, beta = k[0].double(), v[0].double(), beta[0].double()  # the reference from the same (fp32) inputs
    for t0 in range(0, T, C):
        n = min(C, T - t0)
        c = slice(t0, t0 + n)
        kc, vc, qc = (z[c].transpose(0, 1) for z in (k, v, qm))  # [H, n, ·]
        bc, G = beta[c].transpose(0, 1), gm[c].transpose(0, 1).cumsum(-1)  # [H, n]
        D = (G[:, :, None] - G[:, None, :]).tril().exp().tril()
        A = (bc[..., None] * (kc @ kc.transpose(1, 2)) * D).tril(-1)
        Tinv = torch.linalg.inv(torch.eye(n, dtype=A.dtype) + A)
        want = dict(G=G, Tinv=Tinv, Aqk=scale * (qc @ kc.transpose(1, 2)) * D,
                    w=Tinv @ ((bc * G.exp())[..., None] * kc), u=Tinv @ (bc[..., None] * vc))
        got = {name: saved[name][0, c].transpose(0, 1).double() for name in want}
        for name in ("Tinv", "Aqk"):
            assert not got[name][..., n:].any(), f"chunk at {t0}: {name} is not 0 beyond the chunk's rows"
            got[name] = got[name][..., :n]
        for name in want:
            err = ((got[name] - want[name]).norm() / want[name].norm()).item()
            assert err < 1e-4, f"chunk at {t0}: {name} relative error {err:.2e}"


def test_custom_ops_pass_opcheck():
    """The kernels are torch custom ops: schema (no undeclared mutation or aliasing), fake (meta) shapes and dtypes,
    autograd registration and AOT dispatch agree with what the kernels return; the fake shapes and dtypes and the
    autograd registration also without gate, initial and final state, for DeltaProduct's micro-rows and for
    half-precision inputs (the schema and AOT checks run the op several times: once is enough)."""
    from deltamup.kernels.triton.function import chunk_gated_delta_fwd
    from deltamup.kernels.triton.l2norm import l2norm_fwd
    x = {n: (t.float() if t is not None else None) for n, t in make_inputs(1, 70, 2, 16, 32, "random").items()}
    torch.library.opcheck(chunk_gated_delta_fwd, (x["q"], x["k"], x["v"], x["g"], x["beta"], 0.25, x["h0"], True, 1))
    h = {n: t.half() for n, t in make_inputs(1, 70, 2, 64, 64, "random").items()}  # T and Aqk saved in fp16
    for args in [(x["q"], x["k"], x["v"], None, x["beta"], 0.25, None, False, 1),
                 (x["q"][:, :35], x["k"], x["v"], x["g"][:, :35], x["beta"], 0.25, None, True, 2),
                 (h["q"], h["k"], h["v"], h["g"], h["beta"], 0.125, None, False, 1)]:
        torch.library.opcheck(chunk_gated_delta_fwd, args, test_utils=("test_faketensor", "test_autograd_registration"))
    torch.library.opcheck(chunk_gated_delta_fwd, (x["q"], x["k"], x["v"], x["g"], x["beta"], 0.25, None, False, 1,
                                                  True), test_utils=("test_faketensor", "test_autograd_registration"))
    torch.library.opcheck(l2norm_fwd, (x["q"], 1e-6))


def test_compiles_as_one_graph():
    """torch.compile(fullgraph=True) traces through the kernels (no graph break) and gives the eager gradients."""
    x = make_inputs(1, 70, 2, 16, 32, "random")
    leaves = [x[n].float().requires_grad_() for n in ("q", "k", "v", "g", "beta", "h0")]

    def loss(q, k, v, g, beta, h0):
        o, ht = chunk_gated_delta_rule_triton(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                              use_qk_l2norm_in_kernel=True)
        return (o * o).sum() + ht.sum()

    want = torch.autograd.grad(loss(*leaves), leaves)
    got = torch.autograd.grad(torch.compile(loss, backend="aot_eager", fullgraph=True)(*leaves), leaves)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


def test_gradients_through_final_state_only():
    """A loss on the final state alone (the output's gradient never materialised) gives the reference gradients."""
    x = make_inputs(1, 70, 2, 16, 32, "random", seed=6)

    def grads(rule, dtype):
        leaves = [x[n].to(dtype).requires_grad_() for n in ("q", "k", "v", "g", "beta", "h0")]
        _, ht = rule(*leaves[:5], initial_state=leaves[5], output_final_state=True)
        return torch.autograd.grad((ht * ht).sum(), leaves[1:])  # q reaches only the output

    for got, want in zip(grads(chunk_gated_delta_rule_triton, torch.float32),
                         grads(recurrent_gated_delta_rule, torch.float64)):
        assert ((got.double() - want).norm() / want.norm()).item() < 1e-4


def test_backward_fills_no_zero_gradients():
    """The saved intermediates are outputs of the forward op; autograd must not build zero gradients for them (on a
    GPU that was seven fill kernels a call, 4% of DeltaProduct's fwd+bwd)."""
    from torch.profiler import ProfilerActivity, profile
    x = make_inputs(1, 70, 2, 16, 32, "random")
    leaves = [x[n].float().requires_grad_() for n in ("q", "k", "v", "g", "beta")]
    o, _ = chunk_gated_delta_rule_triton(*leaves)
    loss = o.sum()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss.backward()
    assert not [e.name for e in prof.events() if e.name in ("aten::zeros", "aten::zero_")]


def test_model_compiles_without_graph_breaks():
    """A whole model on the Triton kernels is one torch.compile graph: no break per layer (on the H200 the breaks
    left the GPU idle 19% of a training step)."""
    from deltamup.models import ModelConfig
    from deltamup.parametrizations import build_model
    from deltamup.scaling.train import precision, token_loss
    model = build_model(ModelConfig(kind="gdn", width=64, depth=2, heads=2, kernel_backend="triton"), "gdn-mup",
                        "adamw", seed=0).to(DEVICE)
    tokens = torch.randint(0, 256, (2, 70), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    with precision(DEVICE, True):  # as the compiled training step runs it: autocast around the graph
        explained = torch._dynamo.explain(token_loss)(model, (tokens, tokens.roll(-1, 1)))
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


@pytest.mark.parametrize("B,T,C,K,group", [
    (2, 37, 70, 4, 0), (1, 3, 5, 4, 0), (1, 70, 130, 3, 0), (2, 64, 64, 1, 0),   # ragged tiles, T < K, one tap
    (1, 40, 64, 9, 0),                                                            # more taps than the model's
    (2, 37, 70, 4, 35), (1, 50, 192, 4, 96), (1, 20, 24, 4, 8)])                  # heads L2-normalized
def test_short_conv_matches_reference(B, T, C, K, group):
    """The short convolution's kernels against the reference (shifted products, then l2_normalize per group) in
    fp64: out, dx and dw."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(B, T, C, generator=gen, dtype=torch.float64)
    w = torch.randn(C, K, generator=gen, dtype=torch.float64) * K ** -0.5
    dout = torch.randn(B, T, C, generator=gen, dtype=torch.float64)
    got, want = {}, {}
    for out, backend, dtype in ((got, "triton", torch.float32), (want, "torch", torch.float64)):
        xi, wi = (t.to(DEVICE, dtype, copy=True).requires_grad_() for t in (x, w))
        y = kernels.short_conv_silu(xi, wi, backend, norm_group=group)
        y.backward(dout.to(DEVICE, dtype))
        out.update(y=y.detach(), dx=xi.grad, dw=wi.grad)
    for name in want:
        assert got[name].dtype == torch.float32
        torch.testing.assert_close(got[name].double(), want[name], rtol=1e-5, atol=1e-5, msg=name)


def test_short_conv_op_registration():
    """The op's fake and autograd registrations agree with the kernel (what torch.compile relies on), in bf16 as the
    model runs it: x bf16, the weight fp32."""
    from deltamup.kernels.triton.short_conv import short_conv_fwd
    x = torch.randn(2, 40, 24, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(24, 4, device=DEVICE, dtype=torch.float32, requires_grad=True)
    for group in (0, 8):
        torch.library.opcheck(short_conv_fwd, (x, w, group))
    assert kernels.short_conv_silu(x, w, backend="triton").dtype == torch.bfloat16
    with pytest.raises(ValueError, match="short-convolution backend"):
        kernels.short_conv_silu(x, w, backend="cuda")
    wide = torch.randn(1, 2, 4096, device=DEVICE, dtype=torch.bfloat16)  # a group wider than a program's tile
    with pytest.raises(ValueError, match="norm_group 4096"):
        kernels.short_conv_silu(wide, torch.randn(4096, 4, device=DEVICE), backend="triton", norm_group=4096)


def test_model_with_triton_short_convs_matches_the_torch_form():
    """A model whose short convolutions run the Triton kernels trains like the one running the shifted products:
    logits and every parameter's gradient (fp32)."""
    from deltamup.models import ModelConfig
    from deltamup.models.layers import ShortConv
    from deltamup.parametrizations import build_model
    tokens = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    runs = []
    for backend in ("torch", "triton"):
        model = build_model(ModelConfig(width=48, depth=2, heads=2, kernel_backend="torch", conv_backend=backend),
                            "gdn-mup", seed=0).to(DEVICE)
        assert [m.backend for m in model.modules() if isinstance(m, ShortConv)] == [backend] * 6
        logits = model(tokens)
        assert (backend == "triton") == ("short_conv_fwd" in graph_nodes(logits.grad_fn))
        logits.square().mean().backward()
        runs.append((logits.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (want, want_grads), (got, got_grads) = runs
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def graph_nodes(fn) -> str:
    """The names of every node of an autograd graph, joined."""
    seen, todo = set(), [fn]
    while todo:
        node = todo.pop()
        if node is not None and node not in seen:
            seen.add(node)
            todo += [f for f, _ in node.next_functions]
    return " ".join(type(n).__name__ for n in seen)


def test_launch_configs_name_each_pass_and_its_config():
    """What a trial records of its kernels (kernels.launch_configs): every pass launched, with the config it took."""
    from deltamup.kernels.triton import tuning
    x = make_inputs(1, 70, 2, 16, 32, "random")
    run(chunk_gated_delta_rule_triton, x, torch.float32, False, False)
    entries = kernels.launch_configs().split("; ")
    assert {"chunk_kkt_solve_fwd_kernel", "chunk_state_fwd_kernel", "chunk_wy_bwd_kernel"} <= {
        e.split(" ")[0] for e in entries}
    assert {f"{key[0]} {tuning.config_text(cfg)}" for key, cfg in tuning._chosen.items()} == set(entries)
    tuning.forget()  # a benchmark's next variant: its launches choose afresh and name only what they took
    assert tuning.chosen() == ""
    run(chunk_gated_delta_rule_triton, x, torch.float32, False, False)
    again = set(tuning.chosen().split("; "))  # this call's passes alone (entries may hold earlier tests' too)
    assert {"chunk_kkt_solve_fwd_kernel", "chunk_wy_bwd_kernel"} <= {e.split(" ")[0] for e in again} <= {
        e.split(" ")[0] for e in entries} and again <= set(entries)


@pytest.mark.parametrize("group, taps", [(0, 4), (32, 3)])
def test_every_short_conv_config_is_correct(group, taps):
    """Each launch config the short convolution's autotuner may pick (on a GPU: bf16, timed per shape), pinned in
    turn for each of its kernels (selfcheck.py, `deltamup kernels check`, --warm-kernels at the model's kernel
    size), against the fp64 reference with and without the per-head norm: out, dx, dw; and a pin reaches the kernel
    it names, the others taking their first."""
    from deltamup.kernels.triton import selfcheck, short_conv, tuning
    results = selfcheck.check_short_conv(96, group, torch.bfloat16, (2, 40), device=DEVICE, taps=taps)
    assert [(r.kernel, r.config) for r in results] == [(k, tuning.config_text(c)) for k in selfcheck.CONV_PASSES
                                                       for c in short_conv.CONFIGS[k]]
    wrong = [r for r in results if r.off(1e-2)]
    assert not wrong, "configs off fp64: " + "; ".join(f"{r.kernel} {r.config}: {r.worst} {r.error:.2e}"
                                                       for r in wrong)
    x = torch.randn(2, 40, 96, device=DEVICE, dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(96, 4, device=DEVICE, requires_grad=True)
    with tuning.pinned("short_conv_dx_kernel", 2) as pin:
        kernels.short_conv_silu(x, w, "triton", group).float().sum().backward()
    assert pin.launched == {"short_conv_fwd_kernel": [short_conv.FWD_CONFIGS[0]],
                            "short_conv_bwd_kernel": [short_conv.BWD_CONFIGS[0]],
                            "short_conv_dx_kernel": [short_conv.FWD_CONFIGS[2]]}


def test_the_interpreter_runs_candidates_that_differ_only_in_warps_once(monkeypatch):
    """`deltamup kernels check` in Triton's interpreter, which ignores warps and stages: a candidate that differs
    from an earlier one only in those shares its run (reported as run_as, with its error); candidates of other tiles
    each run. On a GPU every candidate runs."""
    from deltamup.kernels.triton import selfcheck, short_conv, tuning

    runs = []
    errors = selfcheck.rel_errors
    monkeypatch.setattr(selfcheck, "rel_errors", lambda got, want: runs.append(1) or errors(got, want))
    results = selfcheck.check_short_conv(32, 0, torch.float32, (1, 20), "short_conv_fwd_kernel", device=DEVICE)
    configs = short_conv.FWD_CONFIGS
    tiles = list(dict.fromkeys(c["TILE"] for c in configs))
    interpreted = tuning.INTERPRETED
    assert interpreted == (DEVICE == "cpu")  # the tests' conftest picks the interpreter where there is no GPU
    assert len(results) == len(configs) and len(runs) == (len(tiles) if interpreted else len(configs)) > 1
    first_of_tile = {c["TILE"]: configs.index(c) for c in reversed(configs)}
    for r, config in zip(results, configs):
        ran = results[r.run_as if r.run_as is not None else r.candidate]
        assert ran.run_as is None and ran.candidate == (first_of_tile[config["TILE"]] if interpreted else r.candidate)
        assert (r.error, r.worst) == (ran.error, ran.worst) and r.error < 1e-4


def test_jitted_kernels_read_only_constexpr_globals():
    """The compiler (not the interpreter these tests run in) rejects a @triton.jit function that reads a module
    global other than a tl.constexpr, another jitted function or a module: each kernel's global names, checked the
    compiler's way, so the CPU suite catches it."""
    import ast
    import importlib
    import inspect
    import pkgutil
    import types

    import triton
    import triton.language as tl
    from triton.runtime.interpreter import InterpretedFunction

    import deltamup.kernels.triton as package
    jitted = (triton.runtime.JITFunction, InterpretedFunction)
    bad, kernels = [], 0
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, fn in vars(module).items():
            if not isinstance(fn, jitted) or fn.fn.__module__ != module.__name__:
                continue
            kernels += 1
            tree = ast.parse(inspect.getsource(fn.fn))
            local = {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
            local |= {t.id for t in ast.walk(tree) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
            for node in ast.walk(tree):
                if not isinstance(node, ast.Name) or node.id in local or node.id not in vars(module):
                    continue
                value = vars(module)[node.id]
                if not isinstance(value, (tl.constexpr, *jitted, types.ModuleType)):
                    bad.append(f"{module.__name__}.{name} reads {node.id} = {value!r}")
    assert kernels >= 10 and not bad, (kernels, bad)


def test_a_traced_launch_takes_the_config_chosen_on_real_tensors_of_its_sizes(monkeypatch):
    """Inside a triton_op that torch.compile traces (fake tensors) launch chooses on random real tensors of the
    traced sizes, keeps the choice, and launches the traced kernel with it; an eager launch of those sizes then
    finds the choice made. (wrap_triton's wrapper is no test for tracing: it is on outside triton_ops too, so
    every eager launch of the delta rule would go untuned through it.)"""
    from torch._subclasses.fake_tensor import FakeTensorMode, is_fake

    from deltamup.kernels.triton import tuning

    monkeypatch.setattr(tuning, "_chosen", {})
    calls: list[tuple[int, bool]] = []

    class Kernel:
        def __getitem__(self, grid):
            return lambda x, num_warps: calls.append((num_warps, is_fake(x)))

    cfgs = [dict(num_warps=8), dict(num_warps=4)]
    monkeypatch.setattr(tuning, "wrap_triton", lambda kernel: kernel)  # the tracing wrapper takes only JIT functions
    kernel = Kernel()  # one object: a kernel without a name is keyed by its id
    with FakeTensorMode() as mode:
        tuning.launch(kernel, (1,), (mode.from_tensor(torch.zeros(4)),), {}, cfgs)
    assert calls == [(8, False), (8, True)] and list(tuning._chosen.values()) == [dict(num_warps=8)]
    tuning.launch(kernel, (1,), (torch.zeros(4),), {}, cfgs)
    assert calls[2:] == [(8, False)] and len(tuning._chosen) == 1


@pytest.mark.parametrize("N,D,V", [(37, 24, 1000), (5, 8, 3), (16, 32, 8192 + 77)])  # V < BV, ragged last block
def test_every_linear_cross_entropy_config_matches_the_reference(N, D, V):
    """The readout fused with its cross-entropy (kernels/triton/cross_entropy.py), each launch config pinned, against
    the logits and F.cross_entropy in fp64: the loss and the gradients of x and W, with a logits multiplier, rows
    without a target (-100) and an upstream gradient other than 1."""
    from deltamup.kernels.triton import cross_entropy, tuning
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, N, D, generator=gen, dtype=torch.float64)
    w = torch.randn(V, D, generator=gen, dtype=torch.float64) / 3
    targets = torch.randint(0, V, (2, N), generator=gen)
    targets[0, 3] = targets[1, :2] = -100
    mult = torch.tensor(0.7)

    def run(backend: str, dtype: torch.dtype) -> dict[str, torch.Tensor]:
        xi, wi = (t.to(DEVICE, dtype, copy=True).requires_grad_() for t in (x, w))
        loss = kernels.linear_cross_entropy(xi, wi, targets.to(DEVICE), mult.to(DEVICE, dtype), backend)
        (2.5 * loss).backward()
        return {"loss": loss.detach().reshape(1), "dx": xi.grad, "dw": wi.grad}
    want = run("torch", torch.float64)
    for i, config in enumerate(cross_entropy.CONFIGS):
        with tuning.pinned("linear_ce_fwd_kernel", i) as pin:
            got = run("triton", torch.float32)
        assert pin.launched["linear_ce_fwd_kernel"] == [config]
        for name, err in rel_errors(got, want).items():
            assert err < 1e-5, f"{tuning.config_text(config)}: {name} relative error {err:.1e}"
    with pytest.raises(ValueError, match="unknown loss backend 'cuda'"):
        kernels.linear_cross_entropy(x, w, targets, mult, "cuda")
    args = (x[0].to(DEVICE, torch.bfloat16), w.to(DEVICE, torch.bfloat16).requires_grad_(), targets[0].to(DEVICE),
            mult.to(DEVICE))
    torch.library.opcheck(cross_entropy.linear_cross_entropy_fwd, args)  # fake shapes, autograd, schema


def test_model_with_the_fused_loss_trains_like_the_logits_and_cross_entropy():
    """ModelConfig(loss_backend="triton"): token_loss takes the model's own fused readout and loss, the same loss and
    parameter gradients as the logits and F.cross_entropy (fp32), in one torch.compile graph."""
    from deltamup.models import ModelConfig
    from deltamup.parametrizations import build_model
    from deltamup.scaling.train import token_loss
    tokens = torch.randint(0, 256, (2, 21), generator=torch.Generator().manual_seed(0)).to(DEVICE)
    batch = (tokens, tokens.roll(-1, 1))
    runs = []
    for backend in ("torch", "triton"):
        model = build_model(ModelConfig(width=48, depth=2, heads=2, kernel_backend="torch", loss_backend=backend),
                            "gdn-mup", seed=0).to(DEVICE)
        loss = token_loss(model, batch)
        assert (backend == "triton") == ("linear_cross_entropy" in graph_nodes(loss.grad_fn))
        loss.backward()
        runs.append((loss.detach(), {n: p.grad for n, p in model.named_parameters()}))
    (want, want_grads), (got, got_grads) = runs
    torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
    for name, grad in want_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)
    explained = torch._dynamo.explain(token_loss)(model, batch)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    with pytest.raises(ValueError, match="unknown loss backend"):
        ModelConfig(loss_backend="fused")
