"""The package's layers: `core` imports nothing of the package above it, and the shared layers
(datasets, encoders, generators, metrics) import no track, at module level or inside a function, and no
two modules import each other."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "condeval"
TRACKS = ("crel", "crc", "trust", "rehearsal")
SHARED = ("datasets", "encoders", "generators", "metrics")


def _imports(paths, packages):
    pattern = re.compile(rf"^\s*(?:from|import) condeval\.({'|'.join(packages)})\b", flags=re.M)
    return [
        f"{path.relative_to(SRC)}: condeval.{match.group(1)}"
        for path in paths
        for match in pattern.finditer(path.read_text())
    ]


def _modules(*names):
    return [path for name in names for path in (sorted((SRC / name).rglob("*.py")) or [SRC / f"{name}.py"])]


def test_the_shared_layers_import_no_track():
    assert not _imports(_modules(*SHARED), TRACKS)


def test_core_imports_nothing_above_it():
    assert not _imports(_modules("core"), (*SHARED, *TRACKS))


def _import_graph():
    """Module → every package module it imports, at module level or inside a function (``ast``)."""
    import ast

    import networkx as nx

    modules = {}
    for path in SRC.rglob("*.py"):
        parts = ("condeval", *path.relative_to(SRC).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = nx.DiGraph()
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("condeval"):
                targets = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            graph.add_edges_from((name, target) for target in targets if target in modules and target != name)
    return graph


def test_no_import_cycles_not_even_through_imports_inside_functions():
    import networkx as nx

    cycles = [
        sorted(component) for component in nx.strongly_connected_components(_import_graph()) if len(component) > 1
    ]
    assert not cycles, f"modules importing each other (move what both need into a lower module): {cycles}"


def test_no_private_name_is_imported_from_another_package():
    """A helper another package needs is public where it lives (``condeval.<package>``'s ``_name`` is not
    imported from outside ``<package>``, nor by the workflow, tools or benchmarks)."""
    import ast

    root = SRC.parents[1]
    crossing = []
    for path in [
        *SRC.rglob("*.py"),
        *(p for d in ("workflow", "tools", "benchmarks") for p in (root / d).rglob("*.py")),
    ]:
        inside = path.relative_to(SRC).parts[0].removesuffix(".py") if path.is_relative_to(SRC) else None
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("condeval.")):
                continue
            package = node.module.split(".")[1]
            crossing += [
                f"{path.relative_to(root)}:{node.lineno} {node.module}.{alias.name}"
                for alias in node.names
                if alias.name.startswith("_") and package != inside
            ]
    assert not crossing, f"private names imported across packages: {crossing}"
