"""tests/fast_interpreter.py (applied by conftest.py on a CPU): its interpreter wraps the same members of
triton.language as Triton's own, at a launch and inside one (where all is wrapped already and nothing more is)."""
import os

import fast_interpreter
import pytest

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="Triton's interpreter only")


def wrapped(patch_builtin, pkgs) -> list[list[str]]:
    """The names patch_builtin wraps in each of pkgs, in one scope, as a launch's first patch and again inside it."""
    from triton.runtime import interpreter

    scope = interpreter._LangPatchScope()
    try:
        names = []
        for pkg in pkgs + pkgs:  # the second pass: inside the launch the first one patched
            before = len(scope._changes)
            patch_builtin(pkg, interpreter.interpreter_builder, scope)
            names.append([name for _, name, _ in scope._changes[before:]])
    finally:
        scope.restore()
    return names


def test_the_fast_interpreter_wraps_what_tritons_own_does():
    import triton.language as tl
    from triton.runtime import interpreter

    if fast_interpreter.tritons_patch_builtin is None:  # correct but slower: -ra's summary says so
        pytest.skip("this Triton's interpreter lacks the parts speed_up expects: the kernel tests run it unchanged")
    assert interpreter._patch_builtin is not fast_interpreter.tritons_patch_builtin
    assert getattr(interpreter.interpreter_builder.options, "sanitize_overflow", False) is False
    pkgs = (tl, tl.tensor, tl.math, tl.core.tensor_descriptor_base)
    ours, theirs = wrapped(interpreter._patch_builtin, pkgs), wrapped(fast_interpreter.tritons_patch_builtin, pkgs)
    assert ours == theirs
    assert all(len(names) > 10 for names in ours[:3]) and not any(ours[len(pkgs):])  # inside a launch: nothing
    assert tl.core.is_builtin(tl.dot)  # restored
