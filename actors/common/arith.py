"""Safe arithmetic for the calculator tool.

Expressions come from model output or user text, so they are never handed to
``eval``: they are parsed with ``ast`` and only a small whitelist of nodes is
interpreted here.
"""

from __future__ import annotations

import ast
import math
import operator
import re
import statistics
from typing import Callable, Union

from actors.common.errors import IriisError

Number = Union[int, float]

MAX_LENGTH: int = 200
# Bounds recursion in the walker; 200 characters cannot legitimately nest
# deeper than this (a chain of 100 additions is depth ~100).
MAX_DEPTH: int = 120
MAX_EXPONENT: int = 1000
# Results beyond this many digits are refused: they are useless to a person
# and big-int arithmetic on them can take noticeable CPU.
MAX_DIGITS: int = 100
_MAX_INT: int = 10 ** (MAX_DIGITS + 1)


class CalcError(IriisError, ValueError):
    """Bad or refused input; the message is safe to show to a person."""

    code = "bad_expression"


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    # Over any number of values ("average(5000, 7000, 6500)", as people and models write it).
    "sum": lambda *values: math.fsum(values),
    "average": lambda *values: statistics.fmean(values),
    "mean": lambda *values: statistics.fmean(values),
    "avg": lambda *values: statistics.fmean(values),
    "floor": math.floor,
    "ceil": math.ceil,
    "log": math.log,
    "log10": math.log10,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e}

_BINARY: dict[type[ast.operator], Callable[[Number, Number], Number]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}

# Commas between groups of exactly three digits are thousands separators;
# anything else (e.g. "max(1,2)") is left alone so argument lists still work.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


# A percentage as people write it: "15% of 80", and "17.5%" standing for 0.175 where a number
# ends with % and no operand follows it at once ("10 % 3" and "10%3" stay modulo).
_PERCENT_OF_NUMBER = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\s+", re.IGNORECASE)
_PERCENT_ALONE = re.compile(r"(\d+(?:\.\d+)?)%(?=\s*(?:$|[-+*/)×÷]|\s(?!\s*[\d(.])))")
# Words the calculator does not know, named in its refusal so the caller can write them out.
_WORD = re.compile(r"(?<![\d.])[A-Za-z_]\w*")   # not an exponent's e (1.5e3)


def _normalise(expression: str) -> str:
    text = expression.strip()
    text = text.replace("×", "*").replace("÷", "/").replace("^", "**")
    text = text.replace("−", "-")  # typographic minus sign
    # "x" as multiply only between operands, so names like "exp" survive.
    text = re.sub(r"(?<=[\d)\s])\s*[xX]\s*(?=[\d(.])", "*", text)
    text = _THOUSANDS.sub("", text)
    text = _PERCENT_OF_NUMBER.sub(r"(\1/100)*", text)
    text = _PERCENT_ALONE.sub(r"(\1/100)", text)
    return text


def _unknown_words(text: str) -> list[str]:
    known = {*_FUNCTIONS, *_CONSTANTS}
    return [w for w in _WORD.findall(text) if w not in known]


def _check_power(base: Number, exponent: Number) -> None:
    if abs(exponent) > MAX_EXPONENT:
        raise CalcError("exponent too large")
    if base == 0 or exponent <= 0:
        return
    magnitude = abs(base)
    if magnitude <= 1:
        return
    # Digit count of the result, estimated before computing it.
    if exponent * math.log10(magnitude) > MAX_DIGITS:
        raise CalcError("result too large")


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise CalcError("expression nested too deeply")
    if isinstance(node, ast.Expression):
        return _eval(node.body, depth + 1)
    if isinstance(node, ast.Constant):
        # bool is an int subclass; "True" must not be a number here.
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalcError(f"unsupported syntax: {node.value!r}")
        return _check_result(node.value)
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise CalcError(f"unsupported syntax: name {node.id!r}")
    if isinstance(node, ast.UnaryOp):
        operand = _eval(node.operand, depth + 1)
        if isinstance(node.op, ast.UAdd):
            return +operand
        if isinstance(node.op, ast.USub):
            return -operand
        raise CalcError(f"unsupported syntax: {type(node.op).__name__}")
    if isinstance(node, ast.BinOp):
        left = _eval(node.left, depth + 1)
        right = _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow):
            _check_power(left, right)
            result = left**right
        elif type(node.op) in _BINARY:
            try:
                result = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise CalcError("division by zero") from None
        else:
            raise CalcError(f"unsupported syntax: {type(node.op).__name__}")
        return _check_result(result)
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
            raise CalcError("unsupported syntax: function call")
        if node.keywords:
            raise CalcError("unsupported syntax: keyword arguments")
        args = [_eval(arg, depth + 1) for arg in node.args]
        try:
            return _check_result(_FUNCTIONS[node.func.id](*args))
        except CalcError:
            raise
        except OverflowError:
            raise CalcError("result too large") from None
        except (TypeError, ValueError) as exc:
            raise CalcError(f"invalid arguments to {node.func.id}: {exc}") from None
    raise CalcError(f"unsupported syntax: {type(node).__name__}")


def _check_result(value: object) -> Number:
    # A negative base with a fractional exponent yields complex; refuse it
    # rather than surprise the person with "(1.2+3.4j)".
    if isinstance(value, complex):
        raise CalcError("result is not a real number")
    if not isinstance(value, (int, float)):
        raise CalcError("unsupported result")
    if isinstance(value, int) and abs(value) >= _MAX_INT:
        raise CalcError("result too large")
    # Float overflow in * and + gives inf rather than raising.
    if isinstance(value, float) and math.isinf(value):
        raise CalcError("result too large")
    if isinstance(value, float) and math.isnan(value):
        raise CalcError("result is not a number")
    return value


def evaluate(expression: str) -> Number:
    if len(expression) > MAX_LENGTH:
        raise CalcError(f"expression too long (max {MAX_LENGTH} characters)")
    text = _normalise(expression)
    if not text:
        raise CalcError("empty expression")
    words = _unknown_words(text)
    if words:
        # Units and prose ("5 miles * 1.60934 kilometers per mile"): say what to send instead.
        raise CalcError(f"unsupported syntax: words the calculator does not read ({', '.join(words[:4])}); send only numbers, "
                        "operators and functions, e.g. '5 * 1.60934' for 5 miles in km or '15% of 80'")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        raise CalcError(f"unsupported syntax: {expression.strip()}; write it like '(12.5 * 4) / 3', "
                        "'sqrt(2)' or '15% of 80'") from None
    except RecursionError:
        raise CalcError("expression nested too deeply") from None
    try:
        return _eval(tree, 0)
    except ZeroDivisionError:
        raise CalcError("division by zero") from None
    except OverflowError:
        raise CalcError("result too large") from None


# "15% of 80" -> "15/100*80"; the numbers may carry thousands separators.
_PERCENT_OF = re.compile(
    r"(\d[\d,]*(?:\.\d+)?)\s*%\s*of\s*(\d[\d,]*(?:\.\d+)?)", re.IGNORECASE
)
# Spelled-out operators, rewritten only between operands so prose such as
# "plus a tip" is left alone.
_WORD_OPERATORS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"(?<=[\d)])\s+{words}\s+(?=[\d(-])", re.IGNORECASE), symbol)
    for words, symbol in (
        (r"plus", " + "),
        (r"minus", " - "),
        (r"(?:times|multiplied\s+by)", " * "),
        (r"divided\s+by", " / "),
    )
]
# A run of calculator characters. Names are limited to our own functions and
# constants, as whole words, so ordinary words ("the") never join a run.
_NAMES = "|".join(sorted((*_FUNCTIONS, *_CONSTANTS), key=len, reverse=True))
_CANDIDATE = re.compile(
    rf"(?:\b(?:{_NAMES})\b|[\d.,()+\-*/%^×÷−]|[ \t]|(?<=[\d)\s])[xX](?=\s*[\d(]))+"
)


def _trim(chunk: str) -> str:
    chunk = chunk.strip(" \t,").rstrip(".").strip(" \t,")
    # A run can swallow a bracket that belongs to the surrounding prose.
    while chunk.endswith(")") and chunk.count(")") > chunk.count("("):
        chunk = chunk[:-1].rstrip(" \t,")
    while chunk.startswith("(") and chunk.count("(") > chunk.count(")"):
        chunk = chunk[1:].lstrip(" \t,")
    return chunk


def _is_arithmetic(chunk: str) -> bool:
    """True when the chunk evaluates and does more than state a number."""
    try:
        evaluate(chunk)
        tree = ast.parse(_normalise(chunk), mode="eval")
    except (CalcError, SyntaxError, ValueError):
        return False
    # "-5", "pi" or "1,000" alone are values, not calculations.
    return any(isinstance(node, (ast.BinOp, ast.Call)) for node in ast.walk(tree))


def find_expression(text: str) -> str | None:
    """Return the arithmetic in a question, or None when there is none."""
    percent = _PERCENT_OF.search(text)
    if percent:
        return f"{percent.group(1)}/100*{percent.group(2)}"
    for pattern, symbol in _WORD_OPERATORS:
        text = pattern.sub(symbol, text)
    best: str | None = None
    for match in _CANDIDATE.finditer(text):
        chunk = _trim(match.group(0))
        if not chunk or not _is_arithmetic(chunk):
            continue
        # The longest run wins: "what is 2 and also 3 * (4 + 5)" wants the latter.
        if best is None or len(chunk) > len(best):
            best = chunk
    return best


def format_number(x: Number) -> str:
    if isinstance(x, bool):
        return str(int(x))
    if isinstance(x, int):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if x.is_integer() and abs(x) < 1e15:
        return str(int(x))
    # "g" both rounds to significant digits and drops trailing zeros.
    return f"{x:.10g}"
