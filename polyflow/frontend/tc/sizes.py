"""Symbolic sizes: integer expressions over the size names of a TC signature (`M`, `K`, ...).

A `Size` is an integer linear combination of atoms plus a constant; an atom is a size name or
a non-linear piece (`FloorDiv`, `Min`, `Max`) over other sizes. Keeping the linear part
normalized lets range inference tell equal bounds apart from different ones (`IP` and `IP` from
two tensors, `H - KH + 1` from two routes), and print them as a person would write them.
`evaluate` gives the value once the sizes are bound from actual arrays.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class FloorDiv:
    numerator: Size
    denominator: int  # > 1

    def __str__(self) -> str:
        inner = str(self.numerator)
        if len(self.numerator.terms) + bool(self.numerator.constant) > 1:
            inner = f"({inner})"
        return f"floor({inner} / {self.denominator})"


@dataclass(frozen=True)
class Min:
    args: frozenset[Size]

    def __str__(self) -> str:
        return f"min({', '.join(sorted(map(str, self.args)))})"


@dataclass(frozen=True)
class Max:
    args: frozenset[Size]

    def __str__(self) -> str:
        return f"max({', '.join(sorted(map(str, self.args)))})"


Atom = str | FloorDiv | Min | Max


@dataclass(frozen=True)
class Size:
    """sum(coefficient * atom) + constant, with no zero coefficients and atoms in a canonical
    order (so equal expressions compare and hash equal)."""

    terms: tuple[tuple[Atom, int], ...] = ()
    constant: int = 0

    @staticmethod
    def of(value: int | str | Atom) -> Size:
        if isinstance(value, int):
            return Size((), value)
        return Size(((value, 1),), 0)

    @staticmethod
    def _make(terms: Mapping[Atom, int], constant: int) -> Size:
        kept = sorted(((a, c) for a, c in terms.items() if c != 0), key=lambda t: _atom_key(t[0]))
        return Size(tuple(kept), constant)

    def is_constant(self) -> bool:
        return not self.terms

    def __add__(self, other: Size | int) -> Size:
        other = _lift(other)
        terms = dict(self.terms)
        for atom, coefficient in other.terms:
            terms[atom] = terms.get(atom, 0) + coefficient
        return Size._make(terms, self.constant + other.constant)

    def __radd__(self, other: int) -> Size:
        return self + other

    def __neg__(self) -> Size:
        return self * -1

    def __sub__(self, other: Size | int) -> Size:
        return self + (-_lift(other))

    def __rsub__(self, other: int) -> Size:
        return _lift(other) - self

    def __mul__(self, factor: int) -> Size:
        return Size._make({a: c * factor for a, c in self.terms}, self.constant * factor)

    def __rmul__(self, factor: int) -> Size:
        return self * factor

    def floordiv(self, denominator: int) -> Size:
        """floor(self / denominator), for a positive `denominator`."""
        if denominator <= 0:
            raise ValueError("sizes are divided by positive constants only")
        if denominator == 1:
            return self
        if all(c % denominator == 0 for _, c in self.terms):
            # floor((d*L + c) / d) = L + floor(c / d)
            terms = {a: c // denominator for a, c in self.terms}
            return Size._make(terms, self.constant // denominator)
        # floor((L + q*d + r) / d) = floor((L + r) / d) + q, with 0 <= r < d
        quotient, remainder = divmod(self.constant, denominator)
        return Size.of(FloorDiv(Size(self.terms, remainder), denominator)) + quotient

    def ceildiv(self, denominator: int) -> Size:
        """ceil(self / denominator), for a positive `denominator`."""
        return (self + (denominator - 1)).floordiv(denominator)

    def evaluate(self, sizes: Mapping[str, int]) -> int:
        """The value with every size name bound (a KeyError names a missing one)."""
        return self.constant + sum(c * _evaluate_atom(a, sizes) for a, c in self.terms)

    def names(self) -> set[str]:
        """The size names the expression uses."""
        found: set[str] = set()
        for atom, _ in self.terms:
            found |= _atom_names(atom)
        return found

    def __str__(self) -> str:
        text = ""
        # Positive terms first: "W - KW + 1", not "-KW + W + 1".
        for atom, coefficient in sorted(self.terms, key=lambda t: t[1] < 0):
            magnitude = abs(coefficient)
            piece = str(atom) if magnitude == 1 else f"{magnitude}*{atom}"
            if not text:
                text = piece if coefficient > 0 else f"-{piece}"
            else:
                text += f" + {piece}" if coefficient > 0 else f" - {piece}"
        if not text:
            return str(self.constant)
        if self.constant:
            text += f" + {self.constant}" if self.constant > 0 else f" - {-self.constant}"
        return text


def smallest(values: Iterable[Size]) -> Size:
    """min(values): the one value, a constant when all are constants, else a Min atom (values
    that differ only by a constant keep the smallest)."""
    return _extreme(list(values), lowest=True)


def largest(values: Iterable[Size]) -> Size:
    """max(values), simplified like `smallest`."""
    return _extreme(list(values), lowest=False)


def _extreme(values: list[Size], *, lowest: bool) -> Size:
    if not values:
        raise ValueError("min/max of no sizes")
    pick = min if lowest else max
    # Values with the same symbolic part differ by constants only: keep the extreme one.
    by_part: dict[tuple[tuple[Atom, int], ...], int] = {}
    for value in values:
        known = by_part.get(value.terms)
        by_part[value.terms] = value.constant if known is None else pick(known, value.constant)
    kept = frozenset(Size(terms, constant) for terms, constant in by_part.items())
    if len(kept) == 1:
        return next(iter(kept))
    return Size.of(Min(kept) if lowest else Max(kept))


def _lift(value: Size | int) -> Size:
    return value if isinstance(value, Size) else Size.of(value)


def _atom_key(atom: Atom) -> tuple[int, str]:
    return (0, atom) if isinstance(atom, str) else (1, str(atom))


def _evaluate_atom(atom: Atom, sizes: Mapping[str, int]) -> int:
    if isinstance(atom, str):
        return sizes[atom]
    if isinstance(atom, FloorDiv):
        return atom.numerator.evaluate(sizes) // atom.denominator
    values = [arg.evaluate(sizes) for arg in atom.args]
    return min(values) if isinstance(atom, Min) else max(values)


def _atom_names(atom: Atom) -> set[str]:
    if isinstance(atom, str):
        return {atom}
    if isinstance(atom, FloorDiv):
        return atom.numerator.names()
    found: set[str] = set()
    for arg in atom.args:
        found |= arg.names()
    return found
