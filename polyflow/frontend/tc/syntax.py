"""The syntax tree of a Tensor Comprehensions source: what the parser builds and the semantic
checks, range inference and lowering read. Every node keeps the line and column it starts at."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pos:
    line: int
    column: int


# ----- expressions


@dataclass(frozen=True)
class Number:
    value: int | float
    is_float: bool
    pos: Pos


@dataclass(frozen=True)
class Name:
    """An index variable or a scalar argument (which one is for the semantic checks to say)."""

    name: str
    pos: Pos


@dataclass(frozen=True)
class Apply:
    """`name(args)`: a tensor access or a builtin call (told apart by the semantic checks)."""

    name: str
    args: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True)
class DimSize:
    """`T.n`: the size of dimension n of tensor T."""

    tensor: str
    dim: int
    pos: Pos


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "!"
    operand: Expr
    pos: Pos


@dataclass(frozen=True)
class Binary:
    op: str  # + - * / % < <= > >= == != && ||
    left: Expr
    right: Expr
    pos: Pos


@dataclass(frozen=True)
class Ternary:
    cond: Expr
    then: Expr
    otherwise: Expr
    pos: Pos


Expr = Number | Name | Apply | DimSize | Unary | Binary | Ternary


# ----- statements and definitions


@dataclass(frozen=True)
class RangeClause:
    """`where index in low:high` (high exclusive)."""

    index: str
    low: Expr
    high: Expr
    pos: Pos


@dataclass(frozen=True)
class Comprehension:
    """`out(i, j) op rhs where ...`; op is "=", "+=", "*=", "min=" or "max=", and `init` says
    whether it carried a "!" (initialize to the identity first)."""

    tensor: str
    indices: tuple[Name, ...]
    op: str
    init: bool
    rhs: Expr
    ranges: tuple[RangeClause, ...]
    pos: Pos


@dataclass(frozen=True)
class CallStatement:
    """`out1, out2 = other(arg1, arg2)`: call another definition of the same source."""

    outputs: tuple[Name, ...]
    callee: str
    args: tuple[Name, ...]
    pos: Pos


Statement = Comprehension | CallStatement


@dataclass(frozen=True)
class TensorType:
    """`float(M, K)`: an element type and dimension sizes (a size symbol or a constant); a
    scalar has no dimensions."""

    element: str
    dims: tuple[str | int, ...]
    pos: Pos


@dataclass(frozen=True)
class Param:
    name: str
    type: TensorType
    pos: Pos


@dataclass(frozen=True)
class Output:
    """A returned tensor; its type is inferred unless given."""

    name: str
    type: TensorType | None
    pos: Pos


@dataclass(frozen=True)
class Definition:
    name: str
    params: tuple[Param, ...]
    outputs: tuple[Output, ...]
    body: tuple[Statement, ...]
    pos: Pos


@dataclass(frozen=True)
class Program:
    definitions: tuple[Definition, ...]

    def find(self, name: str) -> Definition | None:
        return next((d for d in self.definitions if d.name == name), None)
