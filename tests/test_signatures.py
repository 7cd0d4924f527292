"""No public function or constructor takes more than 8 parameters, but for any named here with the
reason; one that gets back under the limit must leave the list too. No function's body is over 60 lines
unless its docstring says why."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "condeval"
MAX_PARAMETERS = 8
MAX_BODY_LINES = 60
#: How a docstring gives the reason a function's body is longer than MAX_BODY_LINES.
LONG_BECAUSE = "Long because"

#: ``<module>:<qualified name>`` → why it takes more than MAX_PARAMETERS (none now; a new entry needs its reason).
EXCEPTIONS: dict[str, str] = {}


def _parameters(function: ast.FunctionDef) -> int:
    arguments = function.args
    named = [a for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs if a.arg not in ("self", "cls")]
    return len(named) + bool(arguments.vararg) + bool(arguments.kwarg)


def _public_callables(tree: ast.Module, prefix: str = ""):
    """(qualified name, node) of each public function, method and constructor, public classes only."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _public_callables(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if not node.name.startswith("_") or node.name == "__init__":
                yield f"{prefix}{node.name}", node


def _over_the_limit() -> dict[str, int]:
    return {
        f"{path.relative_to(SRC)}:{name}": _parameters(node)
        for path in sorted(SRC.rglob("*.py"))
        for name, node in _public_callables(ast.parse(path.read_text()))
        if _parameters(node) > MAX_PARAMETERS
    }


def test_no_public_callable_takes_more_than_8_parameters_but_the_named_ones():
    over = _over_the_limit()
    assert not set(over) - set(EXCEPTIONS), f"more than {MAX_PARAMETERS} parameters: {over}"
    assert not set(EXCEPTIONS) - set(over), f"back under the limit, so out of EXCEPTIONS: {set(EXCEPTIONS) - set(over)}"


def _body_lines(function: ast.FunctionDef) -> int:
    """Lines from the first statement after the docstring to the last."""
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def test_no_function_body_is_over_60_lines_without_a_reason_in_its_docstring():
    long = {
        f"{path.relative_to(SRC)}:{node.name}": _body_lines(node)
        for path in sorted(SRC.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _body_lines(node) > MAX_BODY_LINES
        and LONG_BECAUSE not in (ast.get_docstring(node) or "")
    }
    assert not long, f"over {MAX_BODY_LINES} lines without {LONG_BECAUSE!r} in the docstring: {long}"
