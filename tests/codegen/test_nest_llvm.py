"""Outlined nests translated to LLVM IR (autotune.codegen.nest_llvm, runtime.nest): the meaning
numba gives the same text, checked construct by construct against the function run as Python or
against the values numba's semantics give; what falls back to numba, and why."""

from __future__ import annotations

import math
import re
import types

import numba
import numpy as np
import pytest

from autotune.codegen import runtime
from autotune.codegen.nest_llvm import Callee, Constant, Param, Unsupported, translate
from autotune.codegen.runtime import select as _select
from autotune.codegen.source import FASTMATH_FLAGS

FLAGS = set(FASTMATH_FLAGS)
_c0 = np.float32(0.5)
_c1 = np.float32(-np.inf)
_c2 = np.int32(-7)


def _arith(out, iout, x, n):
    for i in range(n):
        v = x[np.uintp(i)]
        out[np.uintp(i)] = v * _c0 + np.float32(i) - v / np.float32(3.0)
        iout[np.uintp(i)] = (i - 7) // 3 + (i - 7) % 3 * 100 + (7 - i) // (-2) * 10000 + abs(i - 5) * 1000000
    for i in range(n, n + 4):
        iout[np.uintp(i)] = np.int64(np.int8(np.int64(i * 100))) + np.int64(np.uint8(np.int64(300 - i)))


def _floats(out, x, n):
    for i in range(2, n):
        a = x[np.uintp(i)]
        out[np.uintp(i)] = np.floor(a) + np.ceil(a) * np.float32(2.0) + np.sqrt(np.abs(a)) + np.rint(a) - np.exp(a * _c0)
    out[0] = max(x[0], _c1, x[1])
    out[1] = min(x[1], x[0])


def _branches(out, iout, x, n):
    acc = _c1
    for i in range(n):
        if i % 2 == 0 and x[np.uintp(i)] > _c0:
            acc = max(acc, x[np.uintp(i)])
        elif not (i > 3 or x[np.uintp(i)] < _c0):
            acc = acc + _c0
        else:
            pass
        out[np.uintp(i)] = acc if i < 6 else -acc
        iout[np.uintp(i)] = np.int64(x[np.uintp(i)] * np.float32(10.0)) + (1 if (i > 2) & (i < 8) else 0)


def _tiles(out, banks, grid, k):
    for i in range(3):
        for j in range(4):
            grid[i, j] = banks[k][np.uintp(i * 4 + j)] + banks[1 - k][np.uintp(j)] + np.float32(_c2)
    out[0] = grid[2, 3]


def _selects(out, x, n):
    for i in range(n):
        out[np.uintp(i)] = _select(x[np.uintp(i)] > _c0, x[np.uintp(i)], _c0)


def _as_llvm(fn, signature):
    compiled = runtime.nest(signature, "loop", FLAGS)(fn)
    assert compiled.compiled_by == "llvm", compiled.compiled_by
    return compiled


def _caller(nest, nargs):
    """An njit function passing its arguments to ``nest`` (an intrinsic is called from numba code)."""
    names = ", ".join(f"a{k}" for k in range(nargs))
    namespace = {"nest": nest, "numba": numba}
    exec(f"@numba.njit\ndef call({names}):\n    nest({names})\n", namespace)
    return namespace["call"]


def test_integer_and_float_arithmetic_as_numba_computes_it():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(12).astype(np.float32)
    out, iout = np.zeros(12, np.float32), np.zeros(16, np.int64)
    _caller(_as_llvm(_arith, "void(float32[::1], int64[::1], float32[::1], int64)"), 4)(out, iout, x, 12)
    want, iwant = np.zeros(12, np.float32), np.zeros(16, np.int64)
    _arith(want, iwant, x, 12)  # Python's floor division and modulo, numpy's wrapping casts
    np.testing.assert_allclose(out, want, rtol=1e-6)
    np.testing.assert_array_equal(iout, iwant)


def test_float_intrinsics_and_python_min_max_order():
    x = np.array([np.nan, 2.0, 0.3, -1.7, 2.5, 0.0], np.float32)
    out = np.zeros(6, np.float32)
    _caller(_as_llvm(_floats, "void(float32[::1], float32[::1], int64)"), 3)(out, x, 6)
    want = np.zeros(6, np.float32)
    with np.errstate(invalid="ignore"):
        _floats(want, x, 6)
    np.testing.assert_allclose(out[2:], want[2:], rtol=1e-5)
    # max(nan, -inf, 2.0): a value replaces the result only when greater, so nan stays first
    assert math.isnan(out[0]) and math.isnan(want[0])
    assert out[1] == want[1] == 2.0  # min(2.0, nan): nan is never less


def test_branches_short_circuits_and_conditional_values():
    x = np.array([0.9, 0.1, 0.7, 0.2, -0.4, 0.8, 1.5, -0.3, 0.6, 0.05], np.float32)
    out, iout = np.zeros(10, np.float32), np.zeros(10, np.int64)
    _caller(_as_llvm(_branches, "void(float32[::1], int64[::1], float32[::1], int64)"), 4)(out, iout, x, 10)
    want, iwant = np.zeros(10, np.float32), np.zeros(10, np.int64)
    _branches(want, iwant, x, 10)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(iout, iwant)


def test_banks_by_a_variable_and_two_dimensional_arrays():
    banks = (np.arange(12, dtype=np.float32), np.arange(12, dtype=np.float32) * 10)
    grid = np.zeros((3, 4), np.float32)
    out = np.zeros(1, np.float32)
    sig = "void(float32[::1], UniTuple(float32[::1], 2), float32[:, ::1], int64)"
    call = _caller(_as_llvm(_tiles, sig), 4)
    for k in (0, 1):
        call(out, banks, grid, k)
        want = np.zeros((3, 4), np.float32)
        _tiles(np.zeros(1, np.float32), banks, want, k)
        np.testing.assert_array_equal(grid, want)
        assert out[0] == want[2, 3]


def test_select_is_one_llvm_select_of_both_values():
    nest = _as_llvm(_selects, "void(float32[::1], float32[::1], int64)")
    assert re.search(r"select i1 %t\d+, float %t\d+, float 0x3FE0000000000000", nest.llvm_ir)
    x = np.array([0.1, 0.9, -2.0, 3.0], np.float32)
    out = np.zeros(4, np.float32)
    _caller(nest, 3)(out, x, 4)
    np.testing.assert_array_equal(out, np.maximum(x, 0.5))


def test_float_operations_carry_the_fast_math_flags():
    text = _as_llvm(_floats, "void(float32[::1], float32[::1], int64)").llvm_ir
    assert re.search(r"fmul afn arcp contract nsz reassoc float", text)
    assert re.search(r"call afn arcp contract nsz reassoc float @llvm\.sqrt\.f32", text)
    assert "fcmp afn arcp contract nsz reassoc ogt float" in text


def _tanh(out, x):
    out[0] = np.tanh(x[0])


def test_a_construct_outside_the_subset_is_compiled_by_numba_and_says_why():
    compiled = runtime.nest("void(float32[::1], float32[::1])", "loop", FLAGS)(_tanh)
    assert compiled.compiled_by == "numba: np.tanh of float32 (line 2)"
    out = np.zeros(1, np.float32)
    compiled(out, np.array([0.5], np.float32))
    assert out[0] == pytest.approx(math.tanh(0.5), rel=1e-6)


def test_a_function_without_readable_source_is_compiled_by_numba():
    namespace: dict[str, object] = {"np": np}
    exec("def f(out):\n    out[0] = np.float32(1.0)\n", namespace)
    compiled = runtime.nest("void(float32[::1])", "loop", FLAGS)(namespace["f"])
    assert compiled.compiled_by.startswith("numba: could not get source code")


def _refused(source: str, params: list[Param] | None = None) -> str:
    params = params if params is not None else [Param("out", "array", "float32"), Param("n", "int", "int64")]
    consts = {"_c0": Constant("float32", 1.0)}
    callees = {"min": "min", "max": "max", "abs": "abs", "np": "numpy"}
    with pytest.raises(Unsupported) as info:
        translate(source, params, consts.get, callees.get, "f", ())
    return str(info.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    out[0] += _c0", "statement AugAssign (line 2)"),
        ("    if 0 < n < 4:\n        pass", "chained comparison (line 2)"),
        ("    for i in range(0, n, 2):\n        pass", "loop over something other than range(stop) or range(start, stop) (line 2)"),
        ("    v = _c0\n    v = n", "'v' assigned float32 and then int64 (line 3)"),
        ("    out[0] = _c0 + n", "Add of float32 and int64"),
        ("    out[0] = np.float32(n // _c0)", "FloorDiv of int64 and float32"),
        ("    out[0] = (_c0 if n else n)", "conditional expression of float32 and int64 (line 2)"),
        ("    out[0] = w", "name 'w' used before it is assigned, or unknown (line 2)"),
        ("    out[0] = print(n)", "call of 'print'"),
        ("    n = 3", "assignment to the argument or global 'n' (line 2)"),
        ("    out[0] = out", "array 'out' used as a value (line 2)"),
        ("    out[0, 1] = _c0", "1-d array 'out' indexed with 2 (line 2)"),
    ],
)
def test_what_the_translator_refuses_is_named(body, message):
    assert _refused(f"def f(out, n):\n{body}\n") == message


def test_the_arguments_must_match_the_signature():
    assert _refused("def f(out):\n    pass\n") == "arguments (out) do not match the signature's 2"


def test_a_zero_divisor_gives_zero_as_numbas_numpy_error_model():
    def div(iout, d):
        iout[0] = 7 // d
        iout[1] = (-7) % d

    iout = np.full(2, 5, np.int64)
    _caller(_as_llvm(div, "void(int64[::1], int64)"), 2)(iout, 0)
    np.testing.assert_array_equal(iout, [0, 0])


def test_an_llvm_that_reads_no_opaque_pointers_leaves_the_nest_to_numba(monkeypatch):
    monkeypatch.setattr(runtime, "_reads_opaque_pointers", lambda: False)
    compiled = runtime.nest("void(float32[::1], float32[::1])", "loop", FLAGS)(_tanh)
    assert re.fullmatch(r"numba: llvmlite \S+ does not read LLVM IR with opaque pointers \(ptr\)", compiled.compiled_by)


# ---- nests that call nests; a body called by its symbol --------------------------
def _scale_row(grid, x, i, k):
    for j in range(4):
        grid[i, j] = x[np.uintp(i * 4 + j)] * np.float32(k)


def _sum_banks(out, banks, n):
    for j in range(n):
        out[np.uintp(j)] = banks[0][np.uintp(j)] + banks[1][np.uintp(j)]


def _body(out, grid, x, banks, k):
    for i in range(3):
        _scale_row_nest(grid, x, i, k + i)  # noqa: F821 (bound by the test)
    _sum_banks_nest(out, banks, k - 1)  # noqa: F821


def test_a_body_calls_nests_inlined_into_its_code_and_kernels_call_it_by_its_symbol(monkeypatch):
    row = _as_llvm(_scale_row, "void(float32[:, ::1], float32[::1], int64, int64)")
    banks_sum = _as_llvm(_sum_banks, "void(float32[::1], UniTuple(float32[::1], 2), int64)")
    monkeypatch.setitem(globals(), "_scale_row_nest", row)
    monkeypatch.setitem(globals(), "_sum_banks_nest", banks_sum)
    sig = "void(float32[::1], float32[:, ::1], float32[::1], UniTuple(float32[::1], 2), int64)"
    body = runtime.nest(sig, "loop", FLAGS, noalias=True, linked=False)(_body)
    assert body.compiled_by == "llvm"
    symbol = body.translated.symbol
    assert symbol in runtime._LIBRARIES  # compiled when it was defined, its symbol known to LLVM
    # the callees are declared (their code is linked into the body's library), an int64 argument
    # is passed as computed, arrays as their pointers and dimensions, banks one pointer each
    assert f"declare void @{row.translated.symbol}(ptr, i64, ptr, i64, i64)" in body.llvm_ir
    assert f"declare void @{banks_sum.translated.symbol}(ptr, ptr, ptr, i64)" in body.llvm_ir
    assert re.search(rf"define void @{symbol}\(ptr noalias %a\.out, ptr noalias %a\.grid, i64 %a\.grid\.d1, ", body.llvm_ir)
    x = np.arange(12, dtype=np.float32)
    banks = (np.arange(4, dtype=np.float32), np.full(4, 10, np.float32))
    out, grid = np.zeros(4, np.float32), np.zeros((3, 4), np.float32)
    _caller(body, 5)(out, grid, x, banks, 3)
    np.testing.assert_array_equal(grid, x.reshape(3, 4) * np.array([[3], [4], [5]], np.float32))
    np.testing.assert_array_equal(out, [10, 11, 0, 0])


def _tanh_body(out, x):
    out[0] = np.tanh(x[0])


def test_a_body_outside_the_subset_is_compiled_by_numba_with_its_kernel():
    body = runtime.nest("void(float32[::1], float32[::1])", "loop", FLAGS, linked=False)(_tanh_body)
    assert body.compiled_by == "numba: np.tanh of float32 (line 2)"
    assert not body.signatures  # not compiled yet: where the kernel calls it, as the kernel's own code
    out = np.zeros(1, np.float32)
    _caller(body, 2)(out, np.array([0.5], np.float32))
    assert out[0] == pytest.approx(math.tanh(0.5), rel=1e-6)


def _callee_refused(body: str) -> str:
    params = [Param("out", "array", "float32"), Param("banks", "banks", "float32", 1, 2), Param("n", "int", "int64")]
    callee = Callee("g_symbol", (Param("a", "array", "float32"), Param("m", "int", "int64")))
    with pytest.raises(Unsupported) as info:
        translate(f"def f(out, banks, n):\n{body}\n", params, {}.get, {"g": callee}.get, "f", ())
    return str(info.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("    out[0] = g(out, n)", "call of the nest 'g' as a value"),
        ("    g(out)", "call of the nest 'g' with 1 arguments, not 2 (line 2)"),
        ("    g(banks, n)", "argument 'a' of the nest 'g' is not an array argument of its kind (line 2)"),
        ("    g(n, n)", "argument 'a' of the nest 'g' is not an array argument of its kind (line 2)"),
        ("    n + 1", "expression statement other than a call of a nest (line 2)"),
        ("    h(out, n)", "call of 'h' as a statement (line 2)"),
    ],
)
def test_what_a_call_of_a_nest_may_not_be_is_named(body, message):
    assert _callee_refused(body) == message


def _clip(out, x):
    out[0] = min(x[0], _c3)  # noqa: F821 (bound by the test)


def _in(namespace: dict[str, object], fn):
    """``fn``'s code (and source) with other globals."""
    return types.FunctionType(fn.__code__, {**globals(), **namespace}, fn.__name__)


def test_one_text_reading_other_constants_or_calling_other_nests_is_another_function():
    sig = "void(float32[::1], float32[::1])"
    low, high = (runtime.nest(sig, "loop", FLAGS)(_in({"_c3": np.float32(v)}, _clip)) for v in (1.0, 5.0))
    assert low.translated.symbol != high.translated.symbol
    out, x = np.zeros(1, np.float32), np.array([3.0], np.float32)
    _caller(low, 2)(out, x)
    assert out[0] == 1.0
    _caller(high, 2)(out, x)
    assert out[0] == 3.0
    # a body of one text calling either nest (``_scale_row_nest`` bound to each) is two bodies
    row = _as_llvm(_scale_row, "void(float32[:, ::1], float32[::1], int64, int64)")
    other = _as_llvm(_scale_row_other, "void(float32[:, ::1], float32[::1], int64, int64)")
    banks_sum = _as_llvm(_sum_banks, "void(float32[::1], UniTuple(float32[::1], 2), int64)")
    sig = "void(float32[::1], float32[:, ::1], float32[::1], UniTuple(float32[::1], 2), int64)"
    bodies = [
        runtime.nest(sig, "loop", FLAGS)(_in({"_scale_row_nest": nest, "_sum_banks_nest": banks_sum}, _body))
        for nest in (row, other)
    ]
    assert [b.compiled_by for b in bodies] == ["llvm", "llvm"]
    assert bodies[0].translated.symbol != bodies[1].translated.symbol


def _scale_row_other(grid, x, i, k):
    for j in range(4):
        grid[i, j] = x[np.uintp(i * 4 + j)] + np.float32(k)


def _negate(out, x, n):
    for i in range(n):
        out[np.uintp(i)] = -x[np.uintp(i)]


def test_a_nest_compiled_for_a_caller_that_links_it_is_registered_for_one_that_calls_its_symbol():
    sig = "void(float32[::1], float32[::1], int64)"
    linked = _as_llvm(_negate, sig)
    linked.library()  # compiled in this process, linked into callers, its address unknown to LLVM's linker
    by_symbol = runtime.nest(sig, "loop", FLAGS, linked=False)(_in({}, _negate))
    assert by_symbol.translated.symbol == linked.translated.symbol
    assert by_symbol.translated.symbol in runtime._REGISTERED
    out = np.zeros(3, np.float32)
    _caller(by_symbol, 3)(out, np.array([1, 2, 3], np.float32), 3)
    np.testing.assert_array_equal(out, [-1, -2, -3])


@pytest.mark.parametrize(
    ("noalias", "signature"),
    [
        (True, "ptr noalias %a.out, ptr noalias %a.banks.b0, ptr noalias %a.banks.b1, ptr noalias %a.grid, i64 %a.grid.d1, i64 %a.n"),
        (("banks",), "ptr %a.out, ptr noalias %a.banks.b0, ptr noalias %a.banks.b1, ptr %a.grid, i64 %a.grid.d1, i64 %a.n"),
        (("out", "grid"), "ptr noalias %a.out, ptr %a.banks.b0, ptr %a.banks.b1, ptr noalias %a.grid, i64 %a.grid.d1, i64 %a.n"),
        (False, "ptr %a.out, ptr %a.banks.b0, ptr %a.banks.b1, ptr %a.grid, i64 %a.grid.d1, i64 %a.n"),
    ],
)
def test_the_arrays_that_noalias_names_are_noalias_pointers(noalias, signature):
    params = [
        Param("out", "array", "float32"), Param("banks", "banks", "float32", 1, 2),
        Param("grid", "array", "float32", 2), Param("n", "int", "int64"),
    ]  # fmt: skip
    text = translate("def f(out, banks, grid, n):\n    pass\n", params, {}.get, {}.get, "f", (), noalias)
    assert f"define void @f({signature}) #0 {{" in text
