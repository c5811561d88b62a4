"""Functions the generated kernels call (this module imports numba: only kernels import it).

``select(cond, a, b)`` is ``a if cond else b`` as one LLVM ``select`` instruction:
both values are computed and no branch is taken. The code generator writes it for a
select whose two values read only inside their buffers (a padded window whose loads
``clamp_guarded_loads`` keeps in bounds), so a register tile of padded loads stays
straight-line code: SLP can pack the selects of neighbouring channels into vector
blends, and numba compiles one call instead of a branch and a merge per element.
"""

from __future__ import annotations

from typing import Any

from numba import types
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
