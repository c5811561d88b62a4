"""Functions and the compiler pipeline the generated kernels use (this module imports numba:
only kernels import it).

``select(cond, a, b)`` is ``a if cond else b`` as one LLVM ``select`` instruction:
both values are computed and no branch is taken. The code generator writes it for a
select whose two values read only inside their buffers (a padded window whose loads
``clamp_guarded_loads`` keeps in bounds), so a register tile of padded loads stays
straight-line code: SLP can pack the selects of neighbouring channels into vector
blends, and numba compiles one call instead of a branch and a merge per element.

``NestCompiler`` is the pipeline of every outlined nest (``pipeline_class=`` in its decorator).
"""

from __future__ import annotations

from typing import Any

from numba import types
from numba.core.compiler import CompilerBase, DefaultPassBuilder
from numba.core.compiler_machinery import PassManager
from numba.extending import intrinsic


@intrinsic
def select(typingctx: Any, cond: Any, a: Any, b: Any) -> Any:
    result = typingctx.unify_types(a, b)
    if result is None or not isinstance(result, (types.Number, types.Boolean)):
        return None
    sig = result(cond, a, b)

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        c, x, y = args
        c = context.cast(builder, c, signature.args[0], types.boolean)
        x = context.cast(builder, x, signature.args[1], signature.return_type)
        y = context.cast(builder, y, signature.args[2], signature.return_type)
        return builder.select(c, x, y)

    return sig, codegen


class NestCompiler(CompilerBase):  # type: ignore[misc]
    """numba's nopython pipeline without its SSA reconstruction, for outlined nests.

    numba rebuilds SSA once per variable assigned more than once, each time over the whole
    function: a register tile's accumulators (assigned before the reduction loop and in it)
    made it quadratic in the tile, 512 accumulators x 30,000 statements. numba compiles
    without it where it inlines functions (the pipeline's ``enable_ssa`` flag); a nest is
    typed the same either way (every accumulator keeps its one dtype) and LLVM builds its
    own SSA form from numba's stack slots. The kernel's entry function keeps the default
    pipeline: its parallel loops need SSA. What it saves: ``experiments/compile_time.py``.
    """

    def define_pipelines(self) -> list[PassManager]:
        self.state.flags.enable_ssa = False
        return [DefaultPassBuilder.define_nopython_pipeline(self.state)]
