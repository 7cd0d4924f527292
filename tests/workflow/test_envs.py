"""The rules' conda environments (envs/*.yaml): generated from the lock, and enough for every rule.

Each rule with ``conda:`` and ``script:`` is read from the workflow itself (Snakemake's API on the
default config, which includes every track). Its script's imports, and those of every condeval module
it reaches, must map (``importlib.metadata.packages_distributions``) to distributions in the rule's
environment. Imports are read statically: module-level ones always count; one inside a function or
class counts when that function or class is mentioned by code already reached (e.g. stanza, imported
in ``StanzaTagger.__init__``, is needed only where ``StanzaTagger`` is named).
"""

import ast
import importlib.util
import sys
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import distribution, packages_distributions
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src"
# Snakemake's script preamble appends its own install to sys.path and imports it: not the env's job.
PROVIDED_BY_SNAKEMAKE = {"snakemake"}


def _load_make_envs():
    spec = importlib.util.spec_from_file_location("make_envs", REPO / "tools/make_envs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_envs"] = module  # dataclasses resolve annotations through sys.modules
    spec.loader.exec_module(module)
    return module


make_envs = _load_make_envs()


# --- static imports ---------------------------------------------------------------------------------


@dataclass
class Unit:
    """Code that runs together: a module's top level, or one top-level function or class."""

    imports: set[str] = field(default_factory=set)
    mentions: set[str] = field(default_factory=set)


@dataclass
class Module:
    """A parsed source file: its top-level code, its top-level functions/classes, lazy names."""

    top: Unit
    definitions: dict[str, Unit]
    # module-level names a ``__getattr__`` serves lazily (PEP 562): reached when imported by name
    lazy: Unit | None


def condeval_file(name: str) -> Path | None:
    """The source file of condeval module ``name``, or None if it is not one."""
    if name != "condeval" and not name.startswith("condeval."):
        return None
    base = SRC.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_of(node: ast.AST, package: str) -> set[str]:
    """Absolute names of the modules ``node`` imports (submodules named in ``from x import y`` too)."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
        base = f"{parent}.{base}" if base else parent
    submodules = {f"{base}.{alias.name}" for alias in node.names if condeval_file(f"{base}.{alias.name}")}
    return {base} | submodules


def _unit(nodes: list[ast.AST], package: str) -> Unit:
    unit = Unit()
    for root in nodes:
        for node in ast.walk(root):
            unit.imports |= _imports_of(node, package)
            if isinstance(node, ast.Name):
                unit.mentions.add(node.id)
            elif isinstance(node, ast.Attribute):
                unit.mentions.add(node.attr)
            elif isinstance(node, ast.ImportFrom):
                unit.mentions |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and condeval_file(node.value):
                unit.imports.add(node.value)  # importlib.import_module("condeval....")
    return unit


def _targets(assignment: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return assignment.targets if isinstance(assignment, ast.Assign) else [assignment.target]


@cache
def parse(path: Path, name: str) -> Module:
    """``path`` (module ``name``; a script has no package) split into top-level units."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    top_nodes, definitions = [], {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            top_nodes += node.decorator_list  # run at import time
            definitions[node.name] = _unit([node], package)
        else:
            top_nodes.append(node)
    lazy = None
    if "__getattr__" in definitions:  # the names it serves and the modules it imports them from
        assignments = [n for n in top_nodes if isinstance(n, (ast.Assign, ast.AnnAssign))]
        # `__all__` lists every public name, eager ones too: it says nothing about what __getattr__ serves
        served = [a for a in assignments if not any(isinstance(t, ast.Name) and t.id == "__all__" for t in _targets(a))]
        lazy = _unit(served, package)
        lazy.mentions = {
            n.value for a in served for n in ast.walk(a) if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        lazy.imports |= definitions["__getattr__"].imports
        top_nodes = [n for n in top_nodes if not isinstance(n, (ast.Assign, ast.AnnAssign))]
    return Module(_unit(top_nodes, package), definitions, lazy)


def third_party_imports(script: Path) -> dict[str, str]:
    """Top-level name of every non-condeval module ``script`` needs -> the file importing it."""
    needed: dict[str, str] = {}
    modules = {"__main__": parse(script, "__main__")}
    files = {"__main__": str(script)}
    done_units, mentioned = set(), set()
    pending = [("__main__", "<top>", modules["__main__"].top, str(script))]

    def import_module(name: str, importer: str):
        """Reach ``name`` and its parent packages (importing a.b.c runs a, a.b and a.b.c)."""
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            prefix = ".".join(parts[:depth])
            path = condeval_file(prefix)
            if path is None and SRC.joinpath(*prefix.split(".")).is_dir():
                continue  # a namespace package (no __init__.py) runs no code of its own; its modules do
            if path is None:
                if parts[0] != "condeval":
                    needed.setdefault(parts[0], importer)
                return
            if prefix not in modules:
                modules[prefix], files[prefix] = parse(path, prefix), str(path.relative_to(REPO))
                pending.append((prefix, "<top>", modules[prefix].top, files[prefix]))

    while pending:
        module, unit_name, unit, where = pending.pop()
        if (module, unit_name) in done_units:
            continue
        done_units.add((module, unit_name))
        for name in unit.imports:
            import_module(name, where)
        mentioned |= unit.mentions
        for name, parsed in list(modules.items()):
            for definition in mentioned & parsed.definitions.keys():
                pending.append((name, definition, parsed.definitions[definition], files[name]))
            if parsed.lazy and mentioned & parsed.lazy.mentions - parsed.definitions.keys():
                pending.append((name, "__getattr__", parsed.lazy, files[name]))
    return needed


# --- the workflow's rules and environments -------------------------------------------------------------


@cache
def rules_with_environments() -> tuple[tuple[str, Path, Path], ...]:
    """(rule, script, environment file) of every rule that has both, from the default config."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings, StorageSettings

    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(cores=1),
            config_settings=ConfigSettings(),
            storage_settings=StorageSettings(),
            snakefile=REPO / "workflow/Snakefile",
            workdir=REPO,
        )._workflow
        found = []
        for rule in workflow.rules:
            if rule.conda_env and rule.script:
                here = Path(rule.snakefile).parent
                found.append((rule.name, (here / str(rule.script)).resolve(), (here / str(rule.conda_env)).resolve()))
    return tuple(found)


def environment_packages(path: Path) -> dict[str, str]:
    """Normalized distribution -> version pinned in the ``pip:`` list of a conda environment file."""
    pip = [entry["pip"] for entry in yaml.safe_load(path.read_text())["dependencies"] if isinstance(entry, dict)]
    pins = {}
    for spec in pip[0] if pip else []:
        if not spec.startswith("-"):
            requirement = Requirement(spec)
            pins[make_envs.normalize(requirement.name)] = str(requirement.specifier).removeprefix("==")
    return pins


@cache
def providers() -> dict[str, list[str]]:
    """Top-level module -> the installed distributions that provide it."""
    return packages_distributions()


def missing_modules(script: Path, environment: Path) -> list[str]:
    """The modules ``script`` needs that no distribution of ``environment`` provides, with where from."""
    packages = environment_packages(environment)
    missing = []
    for module, importer in sorted(third_party_imports(script).items()):
        if module in sys.stdlib_module_names or module in PROVIDED_BY_SNAKEMAKE:
            continue
        distributions = {make_envs.normalize(d) for d in providers().get(module, [])}
        if not distributions:
            missing.append(
                f"{module} (imported by {importer}) is not installed in the test venv: add it to pyproject.toml"
            )
        elif not distributions & packages.keys():
            missing.append(f"{module} (imported by {importer}; distribution {sorted(distributions)[0]})")
    return missing


def test_every_rule_environment_provides_what_its_script_imports():
    rules = rules_with_environments()
    assert len({env for _, _, env in rules}) >= 2 and len(rules) > 40, rules
    problems = [
        f"{rule} ({environment.relative_to(REPO)}): {module}"
        for rule, script, environment in rules
        for module in missing_modules(script, environment)
    ]
    assert not problems, "\n".join(problems)


def test_lazy_imports_count_only_where_their_function_is_reached(tmp_path):
    helper = SRC / "condeval/crc/pos.py"  # StanzaTagger imports stanza inside __init__
    uses_constant = tmp_path / "constant.py"
    uses_constant.write_text("from condeval.crc.pos import MASKABLE_UPOS\nprint(MASKABLE_UPOS)\n")
    uses_tagger = tmp_path / "tagger.py"
    uses_tagger.write_text("from condeval.crc.pos import StanzaTagger\nStanzaTagger('models')\n")
    assert "stanza" in helper.read_text()
    assert "stanza" not in third_party_imports(uses_constant)
    assert third_party_imports(uses_tagger)["stanza"] == "src/condeval/crc/pos.py"


def test_package_getattr_is_followed_only_for_its_lazy_names(tmp_path):
    light = tmp_path / "light.py"
    light.write_text("from condeval.crel import design\n")
    heavy = tmp_path / "heavy.py"
    heavy.write_text("from condeval.crel import CReL\n")
    assert "torch" not in third_party_imports(light)
    assert "torch" in third_party_imports(heavy)


@pytest.mark.parametrize("environment", make_envs.ENVIRONMENTS, ids=lambda e: e.name)
def test_environment_file_is_generated_from_the_lock(environment):
    path = make_envs.env_path(environment)
    assert path.read_text() == make_envs.render(environment), f"{path} is out of date: run `make envs`"


@pytest.mark.parametrize("environment", make_envs.ENVIRONMENTS, ids=lambda e: e.name)
def test_environment_pins_everything_its_packages_require(environment):
    """Nothing floats: each pinned distribution's own requirements are pinned beside it."""
    packages = environment_packages(make_envs.env_path(environment))
    unpinned = []
    for name in packages:
        for spec in distribution(name).requires or []:
            requirement = Requirement(spec)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                if make_envs.normalize(requirement.name) not in packages:
                    unpinned.append(f"{requirement.name} (required by {name})")
    assert not unpinned, unpinned


def test_environment_pins_are_the_lock_versions():
    pins, _ = make_envs.read_lock()
    for environment in make_envs.ENVIRONMENTS:
        for name, version in environment_packages(make_envs.env_path(environment)).items():
            assert pins[name].split("+")[0] == version, (environment.name, name)
