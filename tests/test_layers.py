"""The package's layers: `core` imports nothing of the package above it, and the shared layers
(datasets, encoders, generators, metrics) import no track, at module level or inside a function."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "condeval"
TRACKS = ("crel", "crc", "trust", "rehearsal")
SHARED = ("datasets", "encoders", "generators", "metrics")


def _imports(paths, packages):
    pattern = re.compile(rf"^\s*(?:from|import) condeval\.({'|'.join(packages)})\b", flags=re.M)
    return [f"{path.relative_to(SRC)}: condeval.{match.group(1)}"
            for path in paths for match in pattern.finditer(path.read_text())]  # fmt: skip


def _modules(*names):
    return [path for name in names for path in (sorted((SRC / name).rglob("*.py")) or [SRC / f"{name}.py"])]


def test_the_shared_layers_import_no_track():
    assert not _imports(_modules(*SHARED), TRACKS)


def test_core_imports_nothing_above_it():
    assert not _imports(_modules("core"), (*SHARED, *TRACKS))
