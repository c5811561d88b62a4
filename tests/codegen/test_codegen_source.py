"""generate_source: golden text, naming, expressions, loops, storage arguments, errors (no numba)."""

from __future__ import annotations

import math
import sys

import pytest
from codegen_funcs import banked, padded_conv, pool_chain, tiled_stage, tiled_stages

from autotune import ir
from autotune.codegen import generate_source
from autotune.codegen.source import UNROLL_LIMIT
from autotune.errors import CodegenError
from autotune.lowering import plan_lowered
from autotune.memory import Pool


def _func(body: ir.Stmt, *params: ir.Buffer, name: str = "f") -> ir.Func:
    return ir.Func(name, params, body)


def test_pool_chain_golden(golden) -> None:
    func, _ = pool_chain()
    golden("codegen/pool_chain", generate_source(func).text)


def test_banked_golden(golden) -> None:
    func, _ = banked()
    golden("codegen/banked", generate_source(func).text)


def test_source_is_deterministic_and_valid_python() -> None:
    func, _ = padded_conv()
    a, b = generate_source(func), generate_source(func)
    assert a.text == b.text
    compile(a.text, "<kernel>", "exec")  # syntax only; numba is not imported here
    assert a.text.startswith("# autotune kernel for function padded_conv\n")


def test_generating_source_does_not_import_numba() -> None:
    import subprocess

    code = (
        "import sys\n"
        "from autotune.codegen import generate_source\n"
        "assert 'numba' not in sys.modules, 'numba imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_arguments_are_params_then_storage() -> None:
    func, _ = pool_chain(height=8, width=8, channels=2)
    src = generate_source(func)
    assert [p.arg for p in src.params] == ["data", "pool2"]
    assert [p.shape for p in src.params] == [(1, 8, 8, 2), (1, 4, 4, 2)]
    (st,) = src.storage
    assert (st.arg, st.name, st.dtype, st.extents, st.banked, st.nbytes) == (
        "pool1_data",
        "pool1",
        "float32",
        (72,),
        False,
        72 * 4,
    )
    assert "def pool_chain(data, pool2, pool1_data):" in src.text
    assert "pool1 = pool1_data.reshape((1, 6, 6, 2))" in src.text
    assert src.arg_names == ("data", "pool2", "pool1_data")


def test_banked_allocation_is_a_tuple_of_banks() -> None:
    func, _ = banked(32)
    src = generate_source(func)
    (st,) = src.storage
    assert st.banked and st.banks == 2 and st.bank_elems == 16 and st.extents == (2, 16)
    assert "T = (T_data[0], T_data[1])" in src.text
    assert "T[np.uintp(i // 16)][np.uintp(i % 16)] = A[i] * _c0" in src.text
    assert "O[k] = T[np.uintp((k // 16 + 1) % 2)][np.uintp(k % 16)] + _c1" in src.text


def test_names_are_unique_in_order_of_first_appearance() -> None:
    a, b = ir.decl_buffer("A", (4,)), ir.decl_buffer("B", (4,))
    i1, i2 = ir.Var("i"), ir.Var("i")
    body = ir.seq(
        ir.For(i1, ir.const(0), ir.const(4), "serial", ir.BufferStore(b, a[i1], (i1,))),
        ir.For(i2, ir.const(0), ir.const(4), "serial", ir.BufferStore(b, a[i2], (i2,))),
    )
    text = generate_source(_func(body, a, b)).text
    assert "for i in range(4):" in text and "for i_1 in range(4):" in text


def test_reserved_and_invalid_names_are_renamed() -> None:
    a = ir.decl_buffer("np", (4,))
    b = ir.decl_buffer("out.global", (4,))
    i = ir.Var("lambda")
    body = ir.For(i, ir.const(0), ir.const(4), "serial", ir.BufferStore(b, a[i], (i,)))
    src = generate_source(_func(body, a, b, name="max"))
    assert src.name == "v_max"
    assert "def v_max(v_np, out_global):" in src.text
    assert "out_global[v_lambda] = v_np[v_lambda]" in src.text


def _store_text(
    value: ir.Expr, dtype: str = "float32", params: tuple[ir.Buffer, ...] = ()
) -> tuple[str, str]:
    """The generated statement storing ``value`` into ``O[i]`` and the whole text."""
    out = ir.decl_buffer("O", (4,), dtype)
    body = ir.For(_I, ir.const(0), ir.const(4), "serial", ir.BufferStore(out, value, (_I,)))
    text = generate_source(_func(body, *params, out)).text
    line = next(ln.strip() for ln in text.splitlines() if ln.strip().startswith("O[i] ="))
    return line, text


_I = ir.Var("i")
_A = ir.decl_buffer("A", (8,))


def test_float_constants_are_typed_module_globals() -> None:
    line, text = _store_text(_A[_I] * 2.0 + 2.0 - ir.FloatImm(math.inf), params=(_A,))
    assert line == "O[i] = A[i] * _c0 + _c0 - _c1"
    assert "_c0 = np.float32(2.0)\n_c1 = np.float32(np.inf)\n" in text
    line, text = _store_text(ir.FloatImm(1.5, "float64"), "float64")
    assert line == "O[i] = _c0" and "_c0 = np.float64(1.5)" in text


def test_mixed_int_float_arithmetic_stays_float32() -> None:
    line, _ = _store_text(_A[_I] * ir.Cast("int32", _A[_I]) + _A[_I] * (_I + 1), params=(_A,))
    assert line == "O[i] = A[i] * np.float32(np.int32(A[i])) + A[i] * np.float32(i + 1)"


def test_operators_and_precedence() -> None:
    j = _I
    value = ir.select(
        ir.Or(ir.Not(j < 2), ir.eq((j - (j - 1)) % 3, 0)),
        ir.Div(_A[(j * 2) // 2], ir.max_(_A[j], ir.min_(_A[j], 1.0))),
        0.0,
    )
    line, _ = _store_text(value, params=(_A,))
    assert line == (
        "O[i] = (A[np.uintp(i * 2 // 2)] / max(A[i], min(A[i], _c0)) if not i < 2 or (i - (i - 1)) % 3 == 0 else _c1)"
    )


def test_comparisons_do_not_chain() -> None:
    cond = ir.eq(_I < 2, _I < 3)
    line, _ = _store_text(ir.select(cond, 1.0, 0.0), params=())
    assert "(i < 2) == (i < 3)" in line


def test_intrinsics_keep_float32() -> None:
    x = _A[_I]
    line, _ = _store_text(ir.sqrt(x) + ir.floor(x) + ir.Call("float32", "exp", (x,)), params=(_A,))
    assert line == "O[i] = np.sqrt(A[i]) + np.floor(A[i]) + np.exp(A[i])"
    # floor of float32 index math, cast to int32, used as an index
    idx = ir.Cast("int32", ir.floor(ir.Cast("float32", _I) * 0.5))
    line, _ = _store_text(_A[idx], params=(_A,))
    assert line == "O[i] = A[np.uintp(np.int32(np.floor(np.float32(i) * _c0)))]"


def test_loop_kinds() -> None:
    a, b = ir.decl_buffer("A", (64,)), ir.decl_buffer("B", (64,))
    i, j, k, m = (ir.Var(n) for n in "ijkm")
    inner = ir.For(
        k, ir.const(0), ir.const(4), "unroll", ir.BufferStore(b, a[i * 16 + j * 4 + k], (i * 16 + j * 4 + k,))
    )
    body = ir.For(
        i, ir.const(0), ir.const(4), "parallel", ir.For(j, ir.const(0), ir.const(4), "vectorized", inner)
    )
    long_unroll = ir.For(m, ir.const(2), ir.const(UNROLL_LIMIT + 1), "unroll", ir.Evaluate(ir.const(0)))
    src = generate_source(_func(ir.seq(body, long_unroll), a, b))
    assert src.parallel and "parallel=True" in src.text
    # the parallel loop's body is a function of its own, with i an argument, called by the loop
    assert src.bodies == ("f_body",)
    assert "    for i in numba.prange(4):\n        f_body(B, A, i)\n" in src.text
    assert "\ndef f_body(B, A, i):\n    for j in range(4):\n" in src.text
    # unrolled copies k = 0 and k = 3; A is read-only, its loads become locals, and the copies
    # index relative to one local holding the index they share
    assert "ix = i * 16 + j * 4\n        ld = A[np.uintp(ix)]\n        B[np.uintp(ix)] = ld\n" in src.text
    assert "ld_3 = A[np.uintp(ix + 3)]\n        B[np.uintp(ix + 3)] = ld_3\n" in src.text
    assert "for k in" not in src.text
    assert f"for m in range(2, {UNROLL_LIMIT + 3}):\n        pass" in src.text  # extent > UNROLL_LIMIT: a loop


def test_a_serial_function_calls_its_noalias_body_from_a_plain_function() -> None:
    # the body outlined is noalias (its arrays share no storage), as numba makes a parallel loop's
    # body; the kernel only calls it, so it needs no parallel loop nor numba's thread pool
    func, _ = pool_chain()
    src = generate_source(func)
    assert not src.parallel and "parallel=False)\ndef pool_chain(" in src.text and "parallel=True" not in src.text
    lines = src.text.splitlines()
    start = lines.index("    for once in range(1):")
    assert all(line.startswith("        ") for line in lines[start + 1 :])  # the whole body inside
    # the view of the intermediate's storage is made there, and the body takes it
    assert lines[start + 1 :] == ["        pool1 = pool1_data.reshape((1, 6, 6, 2))", "        pool_chain_body(pool1, data, pool2)"]
    assert "noalias=True, linked=False)\ndef pool_chain_body(pool1, data, pool2):\n" in src.text
    assert "prange" not in src.text


def test_a_serial_function_whose_body_stays_in_it_runs_as_one_parallel_iteration() -> None:
    # a body that declares a view after its first statement is not a function of its own: numba's
    # one-iteration parallel loop gives it noalias arrays (a plain function would not)
    a, b = ir.decl_buffer("A", (16,)), ir.decl_buffer("B", (16,))
    v = ir.decl_buffer("V", (4, 4), data=b.data)
    i = ir.Var("i")
    first = ir.For(i, ir.const(0), ir.const(16), "serial", ir.BufferStore(b, a[i], (i,)))
    then = ir.DeclBuffer(v, ir.For(i, ir.const(0), ir.const(16), "serial", ir.BufferStore(v, a[i], (i // 4, i % 4))))
    src = generate_source(_func(ir.seq(first, then), a, b))
    assert src.bodies == () and not src.parallel
    assert "parallel=True)\ndef f(" in src.text and "    for once in numba.prange(1):" in src.text


def test_a_body_that_allocates_under_a_tile_loop_takes_the_storage_as_an_argument() -> None:
    # T is allocated under the tile loop: its storage is the kernel's (preallocated) argument,
    # which the body function takes; the body is noalias and the kernel a plain function
    func, _ = tiled_stage()
    src = generate_source(func)
    assert src.bodies == ("tiled_stage_body",) and [st.arg for st in src.storage] == ["T_data"]
    assert "noalias=True, linked=False)\ndef tiled_stage_body(T_data, A, O):\n    for t in range(4):\n" in src.text
    assert "    for once in range(1):\n        tiled_stage_body(T_data, A, O)\n" in src.text
    assert "prange" not in src.text


def test_a_bodys_allocations_planned_on_shared_bytes_are_not_noalias() -> None:
    # T and V live at different times of each tile (T -> U -> V): the plan puts them on the same
    # bytes, and the body that holds all three may not promise LLVM that T and V do not alias
    func, _ = tiled_stages()
    planned = plan_lowered(func, pools=(Pool("p", 1024),)).func
    placed = {st.arg: st.placed() for st in generate_source(planned).storage}
    assert placed["T_data"] == placed["V_data"] != placed["U_data"]
    src = generate_source(planned)
    assert src.bodies == ("tiled_stages_body",)
    assert (
        'noalias=("A", "U_data", "O"), linked=False)\ndef tiled_stages_body(T_data, A, U_data, V_data, O):'
        in src.text
    )
    # the same function without a plan: allocations that a plan handed to build may place
    # anywhere are not noalias either
    assert 'noalias=("A", "O"), linked=False)\ndef tiled_stages_body(' in generate_source(func).text
    # with one allocation, nothing to share bytes with
    assert "noalias=True, linked=False)\ndef tiled_stage_body(" in generate_source(tiled_stage()[0]).text


def test_a_body_that_views_storage_allocated_under_a_tile_loop_stays_in_the_kernel() -> None:
    # a 2-d view of T is a reshape, a statement outside the translator's subset: the body stays
    # in the kernel's one-iteration parallel loop, where numba gives its arrays noalias
    func, _ = tiled_stage(view=True)
    src = generate_source(func)
    assert src.bodies == () and "    for once in numba.prange(1):\n" in src.text
    assert "            T2 = T_data.reshape((2, 3))\n" in src.text


def test_a_bodys_arrays_that_share_storage_are_not_noalias() -> None:
    # B and its 2-d view V are one parameter's data: the body may not promise they do not alias;
    # A, an array of its own, stays noalias
    a, b = ir.decl_buffer("A", (16,)), ir.decl_buffer("B", (16,))
    v = ir.decl_buffer("V", (4, 4), data=b.data)
    i = ir.Var("i")
    store = ir.seq(ir.BufferStore(b, a[i], (i,)), ir.BufferStore(v, a[i] + 1.0, (i // 4, i % 4)))
    body = ir.DeclBuffer(v, ir.For(i, ir.const(0), ir.const(16), "serial", store))
    src = generate_source(_func(body, a, b))
    assert src.bodies == ("f_body",)
    assert 'fastmath={"afn", "arcp", "contract", "nsz", "reassoc"}, noalias=("A",), linked=False)\ndef f_body(B, A, V):' in src.text


def test_symbolic_loop_bounds() -> None:
    a, b = ir.decl_buffer("A", (16,)), ir.decl_buffer("B", (16,))
    i, j = ir.Var("i"), ir.Var("j")
    body = ir.For(
        i,
        ir.const(0),
        ir.const(4),
        "serial",
        ir.For(j, i, ir.const(4) - i, "serial", ir.BufferStore(b, a[j], (j,))),
    )
    text = generate_source(_func(body, a, b)).text
    assert "for j in range(i, i + (4 - i)):" in text


def test_if_then_else_and_evaluate() -> None:
    a, b = ir.decl_buffer("A", (4,)), ir.decl_buffer("B", (4,))
    i = ir.Var("i")
    body = ir.For(
        i,
        ir.const(0),
        ir.const(4),
        "serial",
        ir.IfThenElse(i < 2, ir.BufferStore(b, a[i], (i,)), ir.Evaluate(ir.const(0))),
    )
    text = generate_source(_func(body, a, b)).text
    assert "        if i < 2:\n            B[i] = A[i]\n        else:\n            pass\n" in text


def test_param_alias_is_a_reshape() -> None:
    a, b = ir.decl_buffer("A", (4, 4)), ir.decl_buffer("B", (16,))
    flat = ir.decl_buffer("A_flat", (16,), data=a.data)
    same = ir.decl_buffer("A_same", (4, 4), data=a.data)
    i = ir.Var("i")
    store = ir.BufferStore(b, flat[i] + same[0, 0], (i,))
    body = ir.DeclBuffer(flat, ir.DeclBuffer(same, ir.For(i, ir.const(0), ir.const(16), "serial", store)))
    text = generate_source(_func(body, a, b)).text
    assert "A_flat = A.reshape(-1)" in text
    assert "B[i] = A_flat[i] + A[0, 0]" in text  # an alias with the param's shape reuses its name


def test_flat_storage_declared_with_its_own_shape_reuses_the_name() -> None:
    a, b = ir.decl_buffer("A", (8,)), ir.decl_buffer("B", (8,))
    t = ir.decl_buffer("T", (8,))
    i = ir.Var("i")
    loop = ir.For(
        i,
        ir.const(0),
        ir.const(8),
        "serial",
        ir.seq(ir.BufferStore(t, a[i], (i,)), ir.BufferStore(b, t[i], (i,))),
    )
    body = ir.Allocate(t.data, "float32", (ir.const(8),), ir.DeclBuffer(t, loop))
    text = generate_source(_func(body, a, b)).text
    assert "T_data[i] = A[i]" in text and "B[i] = T_data[i]" in text and "T =" not in text


def test_planned_annotations_are_recorded() -> None:
    a, b = ir.decl_buffer("A", (8,)), ir.decl_buffer("B", (8,))
    t = ir.decl_buffer("T", (8,))
    i = ir.Var("i")
    loop = ir.For(
        i,
        ir.const(0),
        ir.const(8),
        "serial",
        ir.seq(ir.BufferStore(t, a[i], (i,)), ir.BufferStore(b, t[i], (i,))),
    )
    ann = (("offset", 128), ("pool", "dtcm"))
    body = ir.Allocate(t.data, "float32", (ir.const(8),), ir.DeclBuffer(t, loop), ann)
    src = generate_source(_func(body, a, b))
    assert src.storage[0].annotations == ann
    assert "# T_data: float32[8] (allocation T in pool dtcm at offset 128)" in src.text


def test_unlowered_function_is_rejected() -> None:
    a = ir.decl_buffer("A", (4,))
    block = ir.Block("b", (), (), ir.Evaluate(ir.const(0)))
    with pytest.raises(CodegenError, match="Block; lower the function first"):
        generate_source(_func(block, a))


def test_symbolic_allocation_is_rejected() -> None:
    a = ir.decl_buffer("A", (4,))
    n = ir.Var("n")
    t = ir.decl_buffer("T", (4,))
    body = ir.For(
        n, ir.const(1), ir.const(3), "serial", ir.Allocate(t.data, "float32", (n,), ir.Evaluate(ir.const(0)))
    )
    with pytest.raises(CodegenError, match="T_data needs constant positive extents"):
        generate_source(_func(body, a))


def test_unbound_variable_is_rejected() -> None:
    a, b = ir.decl_buffer("A", (4,)), ir.decl_buffer("B", (4,))
    i, j = ir.Var("i"), ir.Var("j")
    body = ir.For(i, ir.const(0), ir.const(4), "serial", ir.BufferStore(b, a[j], (i,)))
    with pytest.raises(CodegenError, match="variable j is used outside any loop"):
        generate_source(_func(body, a, b))


def test_buffer_outside_its_declaration_is_rejected() -> None:
    a = ir.decl_buffer("A", (4,))
    stray = ir.decl_buffer("S", (4,))
    i = ir.Var("i")
    body = ir.For(i, ir.const(0), ir.const(4), "serial", ir.BufferStore(a, stray[i], (i,)))
    with pytest.raises(CodegenError, match="buffer S is used outside its declaration"):
        generate_source(_func(body, a))


def test_banked_buffer_must_match_its_allocation() -> None:
    a = ir.decl_buffer("A", (4,))
    t = ir.decl_buffer("T", (3, 8), axis_separators=(1,))
    body = ir.Allocate(
        t.data, "float32", (ir.const(2), ir.const(8)), ir.DeclBuffer(t, ir.Evaluate(ir.const(0)))
    )
    with pytest.raises(CodegenError, match="does not match allocation extents"):
        generate_source(_func(body, a))
