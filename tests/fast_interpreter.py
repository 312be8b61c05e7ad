"""Triton's interpreter (TRITON_INTERPRET=1, every kernel test on a CPU) without two costs that change no result.

- Integer overflow checks: the interpreter checks every int32 add, sub and mul (a cast to int64, two compares and an
  assert each); Triton's GPU compilers do so only in debug mode (backends/nvidia/compiler.py turns
  sanitize_overflow off otherwise). The tests' shapes are far from 2^31 elements.
- Re-reading triton.language: before every launch *and every call of a @triton.jit helper* the interpreter scans each
  language module with inspect.getmembers to find its builtins and wrap them; the set of builtins a module holds
  never changes, so each module's builtin names are found once here and the same wrapping is done from them.

Together they halve test_triton_kernels on 2 cores (248 against 135 CPU-s, 144 against 74 s). Written against Triton
3.9's interpreter: each applies only where the interpreter has the parts it expects, else it stays as it is.
"""
import dataclasses
import inspect
from collections.abc import Callable

tritons_patch_builtin: Callable | None = None  # the interpreter's own, where speed_up replaced it (tests compare)


def speed_up() -> None:
    global tritons_patch_builtin
    from triton.language import core
    from triton.runtime import interpreter

    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if dataclasses.is_dataclass(options) and "sanitize_overflow" in {f.name for f in dataclasses.fields(options)}:
        builder.options = dataclasses.replace(options, sanitize_overflow=False)

    patch_attr = getattr(interpreter, "_patch_attr", None)
    expected = ["pkg", "builder", "scope"] == list(inspect.signature(interpreter._patch_builtin).parameters)
    if tritons_patch_builtin is not None or patch_attr is None or not expected:
        return
    builtin_names: dict[int, list[str]] = {}

    def patch_builtin(pkg, builder, scope) -> None:  # interpreter._patch_builtin's loop, over names found once
        names = builtin_names.get(id(pkg))
        if names is None:
            names = builtin_names[id(pkg)] = [n for n, m in inspect.getmembers(pkg) if core.is_builtin(m)]
        for name in names:
            member = getattr(pkg, name)
            if core.is_builtin(member):  # not while a launch has it wrapped (a helper's call inside the launch)
                patch_attr(pkg, name, member, builder, scope)

    tritons_patch_builtin, interpreter._patch_builtin = interpreter._patch_builtin, patch_builtin
