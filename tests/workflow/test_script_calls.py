"""Every Snakemake script's call into the package binds to the callee's signature.

The scripts only adapt Snakemake's inputs to package calls, and only a workflow run executes them: a
renamed or removed keyword would otherwise surface as a failed job minutes into a run. Each call of a name
imported from ``condeval`` (a function, a class, or a class's method such as ``TrainRecipe.from_config``)
is bound with :meth:`inspect.Signature.bind` to placeholders for its arguments.
"""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[2] / "workflow" / "scripts").rglob("*.py"))


def _imported_names(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Local name -> (module, attribute) of every ``from condeval... import name``."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("condeval"):
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
    return names


def _resolve(module: str, attribute: str):
    """``from module import attribute``'s object (a submodule when the package does not import it)."""
    try:
        return getattr(importlib.import_module(module), attribute)
    except AttributeError:
        return importlib.import_module(f"{module}.{attribute}")


def _callee(call: ast.Call, names: dict) -> tuple[str, object] | None:
    """(the call as written, the object it calls) for a call of an imported name or of its attribute."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in names:
        return func.id, _resolve(*names[func.id])
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in names:
        owner = _resolve(*names[func.value.id])
        if inspect.isclass(owner):
            return f"{func.value.id}.{func.attr}", getattr(owner, func.attr)
    return None


def _unbindable(call: ast.Call, target) -> str | None:
    """Why ``call``'s arguments cannot bind to ``target``'s signature (None when they can, or when a
    ``*args`` or ``**kwargs`` unpacking makes them unknowable here)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*range(len(call.args)), **{k.arg: None for k in call.keywords})
    except TypeError as error:
        return str(error)
    return None


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_every_package_call_in_a_script_binds_to_its_signature(script):
    tree = ast.parse(script.read_text(), filename=str(script))
    names = _imported_names(tree)
    problems = []
    for call in (node for node in ast.walk(tree) if isinstance(node, ast.Call)):
        callee = _callee(call, names)
        if callee and (why := _unbindable(call, callee[1])):
            problems.append(f"{script.name}:{call.lineno}: {callee[0]}(...): {why}")
    assert not problems, "\n".join(problems)


def test_a_call_with_a_removed_keyword_is_caught():
    from condeval.core.training import TrainRecipe

    def call(source: str) -> ast.Call:
        return ast.parse(source).body[0].value

    assert _unbindable(call("TrainRecipe(1, batch_size=2, lr=0.1, held_out=3, seed=0)"), TrainRecipe) is None
    renamed = call("TrainRecipe(1, batch_size=2, lr=0.1, held_out=3, seed=0, val_images=3)")
    assert "val_images" in _unbindable(renamed, TrainRecipe)
