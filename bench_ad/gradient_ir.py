"""What the text of a compiled gradient says about its memory and its races: the arrays the
gradient function allocates for itself (tapes, shadows of local arrays) after the `grad` stage,
and its atomic operations after `affine-opt` and `llvm-dialect`."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

ATOMIC_STAGES = ("affine-opt", "llvm-dialect")
_ALLOC = re.compile(r"memref\.alloca?\(([^)]*)\)[^:\n]*:\s*memref<([^,>]*)")
_MAP = re.compile(r"^(#\w+) = affine_map<(.*)>$", re.M)
_NAME = r"%[\w.#]+"
_CONSTANT = re.compile(rf"({_NAME}) = arith\.constant (-?\d+) : (?:index|i\d+)")
_CAST = re.compile(rf"({_NAME}) = arith\.index_cast ({_NAME}) ")
_AFFINE = re.compile(
    rf"({_NAME}) = affine\.(max|min|apply) (#\w+|affine_map<.*?>)\(([^)]*)\)(?:\[([^\]]*)\])?"
)
_ELEMENT_BYTES = {"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "index": 8}


@dataclass(frozen=True)
class GradientIR:
    """The gradient function's name (`@f_grad`), the compile's kept stages by name, and the
    values of the function's integer arguments by SSA name (`%arg0`) where sizes depend on them."""

    function: str
    stages: Mapping[str, str]
    arguments: Mapping[str, int] = field(default_factory=dict)


def function_text(module: str, name: str) -> str | None:
    """The text of function `@name` in `module` (func or llvm dialect): from its header to the
    closing brace at the header's indentation."""
    header = re.search(rf"^( *)(?:func\.func|llvm\.func)\b[^\n]*@{re.escape(name)}\(", module, re.M)
    if header is None:
        return None
    end = re.compile(rf"^{header.group(1)}}}", re.M).search(module, header.end())
    return module[header.start() : end.end() if end else len(module)]


def _element_bytes(element: str) -> int | None:
    if element in _ELEMENT_BYTES:
        return _ELEMENT_BYTES[element]
    width = re.fullmatch(r"[su]?i(\d+)", element)
    return None if width is None else (int(width.group(1)) + 7) // 8


def _apply(body: str, operands: list[int]) -> list[int] | None:
    """The results of the affine map `(d..)[s..] -> (e, ..)` on `operands` (dims, then symbols),
    or None for what this does not evaluate (ceildiv)."""
    parts = re.fullmatch(r"\(([^)]*)\)(?:\[([^\]]*)\])? -> \((.*)\)", body.strip())
    if parts is None or "ceildiv" in body:
        return None
    names = [n.strip() for group in parts.groups()[:2] if group for n in group.split(",")]
    if len(names) != len(operands):
        return None
    value = dict(zip(names, operands, strict=True))
    expression = re.sub(r"\b[ds]\d+\b", lambda m: f"({value[m.group()]})", parts.group(3))
    expression = expression.replace("floordiv", "//").replace("mod", "%")
    if not re.fullmatch(r"[\d\s+\-*/%(),]*", expression):
        return None
    results = eval(f"[{expression}]", {"__builtins__": {}})  # digits and operators only
    return [int(r) for r in results]


def _index_values(text: str, module: str, arguments: Mapping[str, int]) -> dict[str, int]:
    """The values of the index constants, casts and affine.max/min/apply of `text` computable
    from `arguments` (those of module-level maps `#map` looked up in `module`)."""
    maps = dict(_MAP.findall(module))
    values = dict(arguments)
    for line in text.splitlines():
        if found := _CONSTANT.search(line):
            values[found.group(1)] = int(found.group(2))
        elif (found := _CAST.search(line)) and found.group(2) in values:
            values[found.group(1)] = values[found.group(2)]
        elif found := _AFFINE.search(line):
            name, kind, map_, dims, symbols = found.groups()
            body = maps.get(map_) if map_.startswith("#") else map_[len("affine_map<") : -1]
            names = [o.strip() for o in f"{dims},{symbols or ''}".split(",") if o.strip()]
            if body is None or any(o not in values for o in names):
                continue
            results = _apply(body, [values[o] for o in names])
            if results:
                values[name] = max(results) if kind == "max" else min(results)
    return values


def allocated_bytes(ir: GradientIR) -> tuple[int, int] | None:
    """(the bytes of the `memref.alloc`s and `memref.alloca`s of the gradient function after
    the `grad` stage, how many more have a size this cannot compute), or None where that
    stage or function is missing."""
    module = ir.stages.get("grad", "")
    text = function_text(module, ir.function)
    if text is None:
        return None
    values = _index_values(text, module, ir.arguments)
    total, dynamic = 0, 0
    for operands, shape in _ALLOC.findall(text):
        *dims, element = shape.strip().split("x")
        sizes = iter(values.get(o.strip(), -1) for o in operands.split(",") if o.strip())
        extents = [next(sizes, -1) if dim == "?" else int(dim) for dim in dims]
        size = _element_bytes(element)
        if size is None or -1 in extents:
            dynamic += 1
        else:
            total += size * math.prod(extents)
    return total, dynamic


def count_atomics(ir: GradientIR) -> dict[str, int]:
    """Occurrences of `atomic` in the gradient function's text, by stage of `ATOMIC_STAGES`
    (stages not kept, or without the function, are left out)."""
    found: dict[str, int] = {}
    for stage in ATOMIC_STAGES:
        text = function_text(ir.stages.get(stage, ""), ir.function)
        if text is not None:
            found[stage] = text.count("atomic")
    return found
