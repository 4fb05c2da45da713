"""Parser of the Tensor Comprehensions language: source text to a `syntax.Program`.

    program     := definition*
    definition  := 'def' id '(' [param {',' param}] ')' '->' '(' [output {',' output}] ')'
                   '{' statement* '}'
    param       := type id                     output := [type] id
    type        := element ['(' dim {',' dim} ')']      dim := id | integer
    statement   := id '(' [id {',' id}] ')' op expr ['where' range {',' range}]
                 | id {',' id} '=' id '(' [id {',' id}] ')'        (a call of another def)
    op          := '=' | '+=' | '*=' | 'min=' | 'max=', the reductions optionally followed by '!'
    range       := id 'in' expr ':' expr
    expr        := C's precedence: ?: || && == != < <= > >= + - * / % unary(- ! +), then
                   number, id, id '(' [expr {',' expr}] ')', id '.' integer, '(' expr ')'

Statements are separated by nothing but their shape, as in TC. Errors are `CompileError`s at the
offending token, naming what was expected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn, TypeVar

from . import syntax as ast
from .lexer import Kind, Token, error_at, tokenize

_T = TypeVar("_T")

# Element types a tensor may have, as written (`int` is int32).
ELEMENT_TYPES = frozenset(
    ["float", "double", "half", "float16", "float32", "float64", "bool", "int"]
    + [f"{sign}int{bits}" for sign in ("", "u") for bits in (8, 16, 32, 64)]
)
REDUCTIONS = ("+=", "*=", "min=", "max=")

_BINARY_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",),
    ("&&",),
    ("==", "!="),
    ("<", "<=", ">", ">="),
    ("+", "-"),
    ("*", "/", "%"),
)


def parse(source: str, *, file: str = "<tc>") -> ast.Program:
    """The definitions of `source`; a `CompileError` at the first thing that does not parse."""
    return _Parser(source, file).program()


class _Parser:
    def __init__(self, source: str, file: str) -> None:
        self.source = source
        self.file = file
        self.tokens = tokenize(source, file=file)
        self.at = 0

    # ----- token helpers

    @property
    def token(self) -> Token:
        return self.tokens[self.at]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def is_symbol(self, text: str, token: Token | None = None) -> bool:
        token = token or self.token
        return token.kind is Kind.PUNCT and token.text == text

    def is_word(self, text: str, token: Token | None = None) -> bool:
        token = token or self.token
        return token.kind is Kind.IDENT and token.text == text

    def advance(self) -> Token:
        token = self.token
        if token.kind is not Kind.EOF:
            self.at += 1
        return token

    def accept(self, text: str) -> bool:
        if self.is_symbol(text):
            self.advance()
            return True
        return False

    def expect(self, text: str, what: str | None = None) -> Token:
        if not self.is_symbol(text):
            self.fail(f"expected {what or repr(text)}, found {self.token.describe()}")
        return self.advance()

    def identifier(self, what: str) -> Token:
        if self.token.kind is not Kind.IDENT:
            self.fail(f"expected {what}, found {self.token.describe()}")
        return self.advance()

    def name(self, what: str) -> ast.Name:
        token = self.identifier(what)
        return ast.Name(token.text, self.pos(token))

    def separated(self, item: Callable[[], _T]) -> list[_T]:
        """One or more `item`s separated by commas."""
        items = [item()]
        while self.accept(","):
            items.append(item())
        return items

    def until_closing(self, item: Callable[[], _T], expected: str) -> list[_T]:
        """Zero or more `item`s separated by commas, then the ')' closing them."""
        items = [] if self.is_symbol(")") else self.separated(item)
        self.expect(")", expected)
        return items

    def fail(self, message: str, token: Token | None = None) -> NoReturn:
        token = token or self.token
        raise error_at(message, self.source, self.file, token.line, token.column)

    @staticmethod
    def pos(token: Token) -> ast.Pos:
        return ast.Pos(token.line, token.column)

    # ----- definitions

    def program(self) -> ast.Program:
        definitions = []
        while self.token.kind is not Kind.EOF:
            definitions.append(self.definition())
        if not definitions:
            self.fail("expected a definition ('def name(...) -> (...) { ... }')")
        return ast.Program(tuple(definitions))

    def definition(self) -> ast.Definition:
        start = self.token
        if not self.is_word("def"):
            self.fail(f"expected 'def', found {start.describe()}")
        self.advance()
        name = self.identifier("the definition's name").text
        self.expect("(", "'(' and the parameters")
        params = self.until_closing(self.param, "',' or ')' after a parameter")
        self.expect("->", "'->' and the outputs")
        self.expect("(", "'(' and the outputs")
        outputs = self.until_closing(self.output, "',' or ')' after an output")
        self.expect("{", "'{' and the statements")
        body: list[ast.Statement] = []
        while not self.is_symbol("}"):
            if self.token.kind is Kind.EOF:
                self.fail(f"expected '}}' to close definition '{name}', found end of input")
            body.append(self.statement())
        self.advance()
        return ast.Definition(name, tuple(params), tuple(outputs), tuple(body), self.pos(start))

    def tensor_type(self) -> ast.TensorType:
        token = self.token
        if token.kind is not Kind.IDENT or token.text not in ELEMENT_TYPES:
            self.fail(
                f"expected an element type (float, double, int32, ...), found {token.describe()}"
            )
        self.advance()
        dims: list[str | int] = []
        if self.accept("("):
            dims = self.separated(self.dim)
            self.expect(")", "',' or ')' after a size")
        return ast.TensorType(token.text, tuple(dims), self.pos(token))

    def dim(self) -> str | int:
        dim = self.token
        if dim.kind is Kind.IDENT:
            self.advance()
            return dim.text
        if dim.kind is Kind.INT:
            self.advance()
            return int(dim.text)
        self.fail(f"expected a size (a name or an integer), found {dim.describe()}")

    def param(self) -> ast.Param:
        start = self.token
        kind = self.tensor_type()
        name = self.identifier("the parameter's name")
        return ast.Param(name.text, kind, self.pos(start))

    def output(self) -> ast.Output:
        start = self.token
        if (
            start.text in ELEMENT_TYPES
            and start.kind is Kind.IDENT
            and (self.peek().kind is Kind.IDENT or self.is_symbol("(", self.peek()))
        ):
            kind: ast.TensorType | None = self.tensor_type()
        else:
            kind = None
        name = self.identifier("the output's name")
        return ast.Output(name.text, kind, self.pos(start))

    # ----- statements

    def statement(self) -> ast.Statement:
        start = self.identifier("a statement ('out(i, ...) = ...')")
        if self.is_symbol(",") or self.is_symbol("="):
            return self.call_statement(start)
        self.expect("(", "'(' and the indices of the tensor written")
        indices = self.until_closing(
            lambda: self.name("an index name (left-hand sides take plain indices)"),
            "',' or ')' after an index",
        )
        op = self.assignment()
        init = False
        if op != "=" and self.is_symbol("!"):
            self.advance()
            init = True
        rhs = self.expr()
        ranges: list[ast.RangeClause] = []
        if self.is_word("where"):
            self.advance()
            ranges = self.separated(self.range_clause)
        return ast.Comprehension(
            start.text, tuple(indices), op, init, rhs, tuple(ranges), self.pos(start)
        )

    def assignment(self) -> str:
        token = self.token
        if token.kind is Kind.PUNCT and token.text in ("=", "+=", "*="):
            self.advance()
            return token.text
        if (
            token.kind is Kind.IDENT
            and token.text in ("min", "max")
            and self.is_symbol("=", self.peek())
        ):
            self.advance()
            self.advance()
            return f"{token.text}="
        self.fail(f"expected '=', '+=', '*=', 'min=' or 'max=', found {token.describe()}")

    def call_statement(self, first: Token) -> ast.CallStatement:
        outputs = [ast.Name(first.text, self.pos(first))]
        while self.accept(","):
            outputs.append(self.name("an output name"))
        self.expect("=", "'=' and the called definition")
        callee = self.identifier("the name of the definition called")
        self.expect("(", "'(' and the arguments")
        args = self.until_closing(
            lambda: self.name("a tensor name (calls take whole tensors)"),
            "',' or ')' after an argument",
        )
        return ast.CallStatement(tuple(outputs), callee.text, tuple(args), self.pos(first))

    def range_clause(self) -> ast.RangeClause:
        index = self.identifier("an index name")
        if not self.is_word("in"):
            self.fail(f"expected 'in' after '{index.text}', found {self.token.describe()}")
        self.advance()
        low = self.expr()
        self.expect(":", "':' between the bounds ('i in low:high')")
        high = self.expr()
        return ast.RangeClause(index.text, low, high, self.pos(index))

    # ----- expressions

    def expr(self) -> ast.Expr:
        cond = self.binary(0)
        if self.is_symbol("?"):
            question = self.advance()
            then = self.expr()
            self.expect(":", "':' in a conditional expression")
            otherwise = self.expr()
            return ast.Ternary(cond, then, otherwise, self.pos(question))
        return cond

    def binary(self, level: int) -> ast.Expr:
        if level == len(_BINARY_LEVELS):
            return self.unary()
        left = self.binary(level + 1)
        while self.token.kind is Kind.PUNCT and self.token.text in _BINARY_LEVELS[level]:
            op = self.advance()
            right = self.binary(level + 1)
            left = ast.Binary(op.text, left, right, self.pos(op))
        return left

    def unary(self) -> ast.Expr:
        token = self.token
        if self.is_symbol("-") or self.is_symbol("!"):
            self.advance()
            return ast.Unary(token.text, self.unary(), self.pos(token))
        if self.is_symbol("+"):
            self.advance()
            return self.unary()
        return self.primary()

    def primary(self) -> ast.Expr:
        token = self.token
        if token.kind is Kind.INT:
            self.advance()
            return ast.Number(int(token.text), False, self.pos(token))
        if token.kind is Kind.FLOAT:
            self.advance()
            return ast.Number(float(token.text.rstrip("fF")), True, self.pos(token))
        if self.is_symbol("("):
            self.advance()
            inner = self.expr()
            self.expect(")", "')' to close '('")
            return inner
        if token.kind is Kind.IDENT:
            self.advance()
            if self.is_symbol("("):
                self.advance()
                args = self.until_closing(self.expr, "',' or ')' after an argument")
                return ast.Apply(token.text, tuple(args), self.pos(token))
            if self.is_symbol("."):
                self.advance()
                dim = self.token
                if dim.kind is not Kind.INT:
                    self.fail(
                        f"expected a dimension number after '{token.text}.', found {dim.describe()}"
                    )
                self.advance()
                return ast.DimSize(token.text, int(dim.text), self.pos(token))
            return ast.Name(token.text, self.pos(token))
        self.fail(f"expected an expression, found {token.describe()}")
