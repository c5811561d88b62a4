"""The IR: frozen expression and statement nodes, a printer, a visitor and a verifier."""

from __future__ import annotations

from .alias import aliased_buffers, statements, storage_views
from .buffer import REGISTER_SCOPE, Buffer, BufferRegion, Range, decl_buffer, dtype_bytes
from .expr import (
    BOOL,
    EQ,
    GE,
    GT,
    INT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    Expr,
    ExprLike,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Select,
    Sub,
    Var,
    as_int,
    cast,
    const,
    eq,
    floor,
    is_float,
    max_,
    min_,
    ne,
    select,
    sqrt,
)
from .functor import Transformer, Visitor, collect, free_vars, post_order_visit, substitute
from .printer import to_text
from .stmt import (
    COPY_PAD_ATTR,
    COPY_PAD_UNIT,
    ROLLING_ATTR,
    TRUE,
    UNROLL_LIMIT,
    VECTORIZER_ATTR,
    Allocate,
    Annotations,
    Block,
    BufferStore,
    DeclBuffer,
    Evaluate,
    For,
    ForKind,
    Func,
    IfThenElse,
    IterVar,
    SeqStmt,
    Stmt,
    ann_get,
    ann_set,
    seq,
)
from .verifier import verify

__all__ = [name for name in dir() if not name.startswith("_")]
