"""Atomic, validated file I/O shared by every workflow step.

Every artifact is written to a temporary file in the destination folder and
then renamed into place, so a killed job never leaves a half-written file that
a later job could consume. Readers name the file and the field on any problem.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import polars as pl

from condeval.core.settings import check_integer  # noqa: F401 (re-exported; its home imports nothing)

__all__ = [
    "DataFileError",
    "atomic_path",
    "atomic_directory",
    "write_parquet",
    "read_parquet",
    "read_matrix",
    "matrix_column_names",
    "write_json",
    "read_json",
    "write_npz",
    "read_npz",
    "check_finite",
    "check_integer",
    "integer_array",
    "real_array",
    "open_unit",
    "image_batch",
    "fingerprint",
    "files_sha256",
    "write_folder_manifest",
    "saved_folder",
]

MANIFEST_SUFFIX = ".sha256"
# Snakemake marks a finished directory() output with this file, after the job wrote its manifest.
_SNAKEMAKE_MARKER = ".snakemake_timestamp"


def is_torch(*arrays) -> bool:
    """Whether any of ``arrays`` is a torch tensor (read from its type: torch is never imported here)."""
    return any(type(a).__module__.startswith("torch") for a in arrays)


def as_numpy(values) -> np.ndarray:
    """``values`` as a NumPy array; a torch tensor is detached and moved to the CPU first (with
    tensor methods only: the analysis environment has no torch to import).

    Examples
    --------
    A list becomes an array; an array comes back as it is, not copied (a torch tensor, with gradients or on
    a GPU, comes back as its CPU values):

    >>> import numpy as np
    >>> from condeval.core.io import as_numpy
    >>> as_numpy([[1, 2], [3, 4]]).sum(axis=1).tolist()
    [3, 7]
    >>> features = np.zeros((2, 3))
    >>> as_numpy(features) is features
    True
    """
    if is_torch(values):
        values = values.detach().cpu().numpy()
    return np.asarray(values)


class DataFileError(ValueError):
    """A file is missing, unreadable, or lacks a required field."""


def _remove_killed_writes(target: Path) -> None:
    """Remove what a killed job's :func:`atomic_directory` of ``target`` left beside it: a temporary folder
    named as ``tempfile`` names ours (``.<name>.`` + 8 characters). Nothing reads it, but it sits inside
    the DVC-tracked output and would be pushed to the lab's remote."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[a-z0-9_]{{8}}")
    for leftover in target.parent.iterdir():
        if pattern.fullmatch(leftover.name):
            logging.getLogger(__name__).info("removing %s, left by a killed write of %s", leftover, target)
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike, suffix: str | None = None) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it onto ``path`` on success.

    On an exception the temporary file is removed and ``path`` is untouched. (A killed job can leave its
    temporary file: looking for one would list the folder at every write, quadratic in the thousands of
    images a miniature writes into one folder; :func:`atomic_directory` does look.)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=suffix or target.suffix or ".tmp", dir=target.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600 files; artifacts are shared
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a fresh temporary folder next to ``path``; on success it replaces ``path`` whole.

    A saved model folder (``save_pretrained``) is never seen half-written: readers find the old
    folder or the complete new one. On an exception the temporary folder is removed; one a killed write
    of ``path`` left is removed first.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_killed_writes(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~_umask())
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def link_or_copy(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Hard-link ``source`` at ``target`` (no second copy of a finished chunk's file), or copy it where
    the filesystem has no hard links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def check_finite(array: np.ndarray, name: str, source: str | os.PathLike | None = None) -> np.ndarray:
    """Raise ``ValueError`` naming ``name`` (and ``source``) if ``array`` holds NaN or inf."""
    array = np.asarray(array)
    if np.issubdtype(array.dtype, np.number) and not np.isfinite(array).all():
        bad = np.argwhere(~np.isfinite(array))[0]
        where = f" in {source}" if source is not None else ""
        raise ValueError(
            f"non-finite value in '{name}'{where} at index {tuple(int(i) for i in bad)}: "
            f"{array[tuple(bad)]!r}; refusing to continue"
        )
    return array


def integer_array(values, name: str, *, ndim: int | None = None, least: int | None = None) -> np.ndarray:
    """``values`` as an int64 array, refused naming ``name`` unless every entry is an integer.

    A float array is refused even where its values are whole (an id of 0.5 must not become 0, a NaN
    must not become -2**63), as are bools, strings and uint64 values past int64's range. Tensors are
    read on the CPU.

    Raises
    ------
    TypeError
        Not an integer array.
    ValueError
        Another number of dimensions than ``ndim``, or a value below ``least``.
    """

    array = np.asarray(as_numpy(values))
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D; got shape {array.shape}")
    if array.size and (not np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        raise TypeError(f"{name} must hold integers; got dtype {array.dtype} (refused rather than truncated)")
    if array.dtype == np.uint64 and array.size and int(array.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name}: {int(array.max())} is past the int64 range")
    array = array if array.dtype == np.int64 else array.astype(np.int64)  # no copy: callers' layouts kept
    if least is not None and array.size and int(array.min()) < least:
        raise ValueError(f"{name} must be integers >= {least}; got {int(array.min())}")
    return array


def real_array(values, name: str, *, ndim: int | None = None) -> np.ndarray:
    """``values`` as a float64 array, refused naming ``name`` unless its entries are real numbers.

    Strings (numeric ones too), bools (flags are not scores), complex numbers and objects are refused,
    rather than converted; tensors are detached and read on the CPU.

    Raises
    ------
    TypeError
        Not a real-valued array.
    ValueError
        Another number of dimensions than ``ndim``.
    """

    array = np.asarray(as_numpy(values))
    if array.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers; got dtype {array.dtype}")
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D; got shape {array.shape}")
    return array if array.dtype == np.float64 else array.astype(np.float64)  # no copy, as np.asarray read them


def open_unit(value, name: str) -> float:
    """``value`` as a float in the open interval (0, 1) (a level α or δ), refused naming ``name``: a
    string or a bool is a TypeError, not converted; NaN, 0, 1 and a percent (10 for 0.1) a ValueError."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number in (0, 1); got {type(value).__name__} {value!r}")
    value = float(value)
    if not 0.0 < value < 1.0:  # NaN fails too
        raise ValueError(f"{name} must lie in (0, 1); got {value!r}")
    return value


def image_batch(images, name: str = "images", *, kind: str = "uint8", channels: int | None = None) -> np.ndarray:
    """``images`` as an (N, C, H, W) array of the ``kind`` a model reads, refused naming ``name``.

    Parameters
    ----------
    images : ndarray or Tensor, shape (N, C, H, W)
    name : str
        The argument, as messages name it.
    kind : {"uint8", "signed"}
        uint8 pixels 0..255, or finite floats in [-1, 1] (the autoencoders' and denoisers' range).
    channels : int, optional
        The channel count the model was built for.

    Raises
    ------
    TypeError
        Another dtype (uint8 where floats in [-1, 1] belong is named with its scaling, and the converse).
    ValueError
        Not 4-D, an (N, H, W, C) array (named as such), another channel count, a non-finite value or
        one outside [-1, 1].
    """

    array = as_numpy(images)
    if array.ndim != 4:
        raise ValueError(f"{name} must be (N, C, H, W); got shape {array.shape}")
    # channels last: the model's count there and not first, or (count unknown) at most 4 last and more first
    last_is_channels = array.shape[-1] == channels if channels is not None else array.shape[-1] <= 4 < array.shape[1]
    if array.shape[1] != channels and last_is_channels:
        raise ValueError(
            f"{name} of shape {array.shape} look like (N, H, W, C); pass (N, C, H, W), e.g. "
            f"{name}.transpose(0, 3, 1, 2)"
        )
    if channels is not None and array.shape[1] != channels:
        raise ValueError(f"{name} must have {channels} channels (the model's); got shape {array.shape}")
    if kind == "uint8":
        if array.dtype != np.uint8:
            hint = (
                (
                    " (floats in [-1, 1]: ((x + 1) * 127.5).round().astype(np.uint8); in [0, 1]: "
                    "(x * 255).round().astype(np.uint8))"
                )
                if array.dtype.kind == "f"
                else ""
            )
            raise TypeError(f"{name} must be uint8 pixels 0..255; got {array.dtype}{hint}")
        return array
    if kind != "signed":
        raise ValueError(f"kind must be 'uint8' or 'signed'; got {kind!r}")
    if array.dtype.kind != "f":
        raise TypeError(f"{name} must be floats in [-1, 1]; got {array.dtype} (uint8 pixels: x / 127.5 - 1)")
    finite = np.isfinite(array).reshape(len(array), -1).all(axis=1)
    if not finite.all():
        raise ValueError(f"{name}[{int(np.flatnonzero(~finite)[0])}] holds NaN or infinite values")
    if array.size and (array.min() < -1.0 - 1e-5 or array.max() > 1.0 + 1e-5):
        raise ValueError(
            f"{name} must lie in [-1, 1]; got {array.min():g}..{array.max():g} (pixels 0..255: "
            "x / 127.5 - 1; 0..1: 2 * x - 1)"
        )
    return array


def write_parquet(frame: pl.DataFrame, path: str | os.PathLike) -> None:
    """Write a polars frame to Parquet atomically."""
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)


def read_parquet(
    path: str | os.PathLike,
    columns: Sequence[str] | None = None,
    finite: Sequence[str] = (),
    *,
    integer: Sequence[str] = (),
    text: Sequence[str] = (),
) -> pl.DataFrame:
    """Read a Parquet file, naming the file and the missing column on failure.

    ``finite`` names columns that must hold no NaN or infinite value: the first one found is refused
    naming the file, the column and the row. ``integer`` and ``text`` name columns that must be there,
    of an integer or a string type, without a null (a float id of 1.5 or a null file is refused, not cast).

    Examples
    --------
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> pl.DataFrame({"image_id": [1, 2], "file": ["a.png", None]}).write_parquet(f"{folder}/m.parquet")
    >>> read_parquet(f"{folder}/m.parquet", integer=["image_id"], text=["file"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    condeval.core.io.DataFileError: .../m.parquet: record 1: 'file' is null
    """
    path = Path(path)
    if not path.exists():
        raise DataFileError(f"{path}: file not found")
    try:
        frame = pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for truncated or corrupt files
        raise DataFileError(f"{path}: not a readable Parquet file ({exc.__class__.__name__}: {exc})") from exc
    for column in [*(columns or ()), *integer, *text]:
        if column not in frame.columns:
            raise DataFileError(f"{path}: required field '{column}' is missing (has {frame.columns})")
    for columns_of_kind, kind in ((integer, "integer"), (text, "string")):
        for column in columns_of_kind:
            _check_complete(frame[column], kind, path)
    for column in finite:
        values = frame[column].to_numpy()
        if not np.isfinite(values).all():
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            raise DataFileError(
                f"{path}: row {row} holds a non-finite '{column}' ({values[row]!r}); refusing to continue"
            )
    return frame


def _check_complete(values: pl.Series, kind: str, path: Path) -> None:
    """Refuse a column of another type than ``kind`` ("integer" or "string") or with a null, naming the record."""
    typed = values.dtype.is_integer() if kind == "integer" else values.dtype in (pl.String, pl.Categorical)
    if not typed and values.dtype != pl.Null:
        raise DataFileError(f"{path}: '{values.name}' must be of {kind} type; it is {values.dtype}")
    if values.null_count():
        record = int(values.is_null().arg_max())
        raise DataFileError(f"{path}: record {record}: '{values.name}' is null")


def matrix_column_names(frame: pl.DataFrame, prefix: str, path, width: int | None = None) -> list[str]:
    """The columns ``{prefix}0 .. {prefix}{k-1}`` of a frame, checked to be complete.

    A gap (``x3`` dropped from ``x0 .. x7``) or, when ``width`` is given, a count other than
    ``width`` raises, so a damaged file never reaches a model as a narrower matrix.

    Raises
    ------
    DataFileError
        Naming ``path`` and the missing or unexpected field.
    """
    numbered = sorted(
        int(c[len(prefix) :]) for c in frame.columns if c.startswith(prefix) and c[len(prefix) :].isdigit()
    )
    expected = range(width if width is not None else (numbered[-1] + 1 if numbered else 1))
    missing = [j for j in expected if j not in set(numbered)]
    if missing:
        what = (
            f"the config expects {prefix}0..{prefix}{len(expected) - 1}"
            if width is not None
            else f"has {frame.columns}"
        )
        raise DataFileError(f"{path}: required field '{prefix}{missing[0]}' is missing ({what})")
    extra = [j for j in numbered if j not in expected]
    if extra:
        raise DataFileError(
            f"{path}: unexpected field '{prefix}{extra[0]}': the config expects {prefix}0..{prefix}{len(expected) - 1}"
        )
    return [f"{prefix}{j}" for j in expected]


def read_matrix(path: str | os.PathLike, prefix: str, width: int | None = None) -> np.ndarray:
    """Stack the columns ``{prefix}0, {prefix}1, ...`` of a Parquet file into an (n, k) array.

    ``width`` (k from the config) is checked when given; see :func:`matrix_column_names`.
    Raises ``DataFileError`` on a missing, extra or gapped column or an empty file, and
    ``ValueError`` on NaN/inf, each naming the file.
    """
    frame = read_parquet(path)
    names = matrix_column_names(frame, prefix, path, width)
    if frame.height == 0:
        raise DataFileError(f"{path}: has no rows")
    matrix = frame.select(names).to_numpy().astype(np.float64)
    return check_finite(matrix, f"{prefix}*", path)


def matrix_columns(prefix: str, matrix: np.ndarray) -> dict[str, np.ndarray]:
    """Columns ``{prefix}j`` of a 2-D array, for building a polars frame."""
    matrix = np.atleast_2d(np.asarray(matrix))
    return {f"{prefix}{j}": matrix[:, j] for j in range(matrix.shape[1])}


def write_json(obj: Mapping, path: str | os.PathLike) -> None:
    """Write a JSON document atomically (sorted keys, indented)."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def _json_default(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def read_image(path: str | os.PathLike, error: type[Exception] = DataFileError):
    """The PIL image of ``path`` with its pixels read, so a truncated file fails here, not later.

    Raises ``error`` naming the file when PIL cannot read it (not an image, truncated, unreadable).

    Examples
    --------
    >>> import tempfile
    >>> from pathlib import Path
    >>> from PIL import Image
    >>> from condeval.core.io import read_image
    >>> folder = tempfile.TemporaryDirectory()
    >>> Image.new("RGB", (4, 3), (255, 0, 0)).save(Path(folder.name) / "red.png")
    >>> image = read_image(Path(folder.name) / "red.png")
    >>> image.size, image.getpixel((0, 0))                    # pixels read: usable after the file is closed
    ((4, 3), (255, 0, 0))
    >>> _ = (Path(folder.name) / "notes.png").write_text("not an image")
    >>> read_image(Path(folder.name) / "notes.png", error=ValueError)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: .../notes.png: not a readable image (cannot identify image file ...)
    >>> folder.cleanup()
    """
    from PIL import Image

    if not Path(path).is_file():
        raise error(f"{path}: file not found")
    try:
        with Image.open(path) as image:
            image.load()
            return image
    except (OSError, Image.DecompressionBombError) as exc:  # UnidentifiedImageError is an OSError
        raise error(f"{path}: not a readable image ({exc})") from None


class DuplicateKeyError(ValueError):
    """A JSON object names one key twice (Python's json keeps the last and drops the rest silently)."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``object_pairs_hook`` of :func:`json.loads` that refuses an object naming one key twice."""
    document = {}
    for key, value in pairs:
        if key in document:
            raise DuplicateKeyError(f"the key {key!r} appears twice in one object (the first would be dropped)")
        document[key] = value
    return document


def read_json(path: str | os.PathLike, required: Sequence[str] = ()) -> dict:
    """Read a JSON object, naming the file and the missing key on failure; an object naming one key twice
    is refused."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(f"{path}: file not found")
    try:
        document = json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=unique_keys)
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: malformed JSON ({exc})") from exc
    except DuplicateKeyError as exc:
        raise DataFileError(f"{path}: {exc}") from None
    for key in required:
        if key not in document:
            raise DataFileError(f"{path}: required field '{key}' is missing")
    return document


def write_npz(path: str | os.PathLike, **arrays: np.ndarray) -> None:
    """Write named arrays to a compressed ``.npz`` atomically."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(tmp, **arrays)


def read_npz(path: str | os.PathLike, required: Sequence[str] = ()) -> dict[str, np.ndarray]:
    """Read an ``.npz`` archive, naming the file and the missing array on failure."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(f"{path}: file not found")
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {key: archive[key] for key in archive.files}
    except Exception as exc:
        raise DataFileError(f"{path}: not a readable .npz archive ({exc})") from exc
    for key in required:
        if key not in arrays:
            raise DataFileError(f"{path}: required field '{key}' is missing (has {sorted(arrays)})")
    return arrays


def fingerprint(paths: Sequence[str | os.PathLike], params: Mapping | None = None) -> str:
    """SHA-256 of the bytes of ``paths`` (a folder: its files, by name) and of the JSON of ``params``: the
    identity of a job."""
    digest = _digest_files(paths)
    digest.update(json.dumps(params or {}, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def files_sha256(paths: Sequence[str | os.PathLike]) -> str:
    """SHA-256 of the bytes of ``paths`` read one after the other (of one file: its ``sha256sum``)."""
    return _digest_files(paths).hexdigest()


def _digest_files(paths: Sequence[str | os.PathLike]):
    digest = hashlib.sha256()
    for path in paths:
        if Path(path).is_dir():  # a configured checkpoint folder (the hub's sd-vae-ft-mse): its files, by name
            files = _folder_files(Path(path))
            digest.update(_digest_files(files).digest())
            digest.update("\n".join(str(file.relative_to(path)) for file in files).encode())
            continue
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest


def write_folder_manifest(folder: str | os.PathLike, manifest: str | os.PathLike) -> Path:
    """Write the SHA-256 of every file under ``folder`` to ``manifest`` (``sha256sum`` format).

    A saved-model folder is a directory, which Snakemake can compare only by modification time:
    after ``dvc pull`` (fresh timestamps) every job reading it would rerun. The manifest is a small
    file that changes exactly when a file of the folder does, so rules take it as their input and
    Snakemake's checksums make a pulled run up to date. ``manifest`` must be named
    ``<folder>.sha256`` so that :func:`saved_folder` finds the folder.
    """
    folder, manifest = Path(folder), Path(manifest)
    if manifest.name != folder.name + MANIFEST_SUFFIX or manifest.parent != folder.parent:
        raise ValueError(f"{manifest}: a folder manifest must be named {folder.name}{MANIFEST_SUFFIX} beside {folder}")
    files = _folder_files(folder)
    if not files:
        raise DataFileError(f"{folder}: no files to list in a manifest")
    lines = [f"{files_sha256([p])}  {p.relative_to(folder).as_posix()}\n" for p in files]
    with atomic_path(manifest) as tmp:
        tmp.write_text("".join(lines))
    return manifest


def saved_folder(path: str | os.PathLike, verify: bool = True) -> Path:
    """The saved folder a rule input stands for: the folder itself, or the one a manifest lists.

    Given ``<folder>.sha256`` (see :func:`write_folder_manifest`), every listed file is checked
    against its hash when ``verify`` is true. Raises :class:`DataFileError` naming the manifest and
    the file that is missing, changed or not listed.
    """
    path = Path(path)
    if path.is_dir() or path.suffix != MANIFEST_SUFFIX:
        if not path.is_dir():
            raise DataFileError(f"{path}: saved folder not found")
        return path
    folder = path.with_suffix("")
    listed = {}
    for number, line in enumerate(_read_text(path).splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            raise DataFileError(f"{path}: line {number} is not '<sha256>  <file>'")
        listed[name] = digest
    if verify:
        present = {p.relative_to(folder).as_posix() for p in _folder_files(folder)}
        for name, digest in listed.items():
            if name not in present:
                raise DataFileError(f"{path}: listed file {folder / name} is missing")
            if files_sha256([folder / name]) != digest:
                raise DataFileError(f"{path}: {folder / name} does not match its SHA-256 (changed after the manifest)")
        if extra := sorted(present - listed.keys()):
            raise DataFileError(f"{path}: {folder / extra[0]} is not listed in the manifest")
    return folder


def _folder_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != _SNAKEMAKE_MARKER)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DataFileError(f"{path}: file not found") from None
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None
