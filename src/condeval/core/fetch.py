"""Raw data in: the datasets and checkpoints a config reads, downloaded pinned and checked.

A catalogue (``config/sources.yaml``, schema ``workflow/schemas/sources.schema.yaml``) names each
source once: an HTTP(S) download with its sha256 (optionally an archive and the members to take),
a Hugging Face repository at a commit, or instructions for data only a person can fetch. It names
*config keys*, never paths: a source writes exactly the paths the config holds at those keys, so the
rules that read them and the rules that fetch them meet in one DAG.

Downloads stream to a temporary file beside the target, are checked against their sha256 and size,
and are renamed into place; an archive's members are refused if they would land outside their
folder. Nothing downloaded is unpickled. ``fetch.mirror`` (a base URL) and ``HF_ENDPOINT`` redirect
every download, for a site mirror or a test server.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from condeval.core.io import atomic_directory, atomic_path

__all__ = [
    "FetchError",
    "Source",
    "resolve_sources",
    "source_paths",
    "missing_sources",
    "named_by",
    "mirrored",
    "download",
    "extract_members",
    "fetch_source",
    "cannot_fetch",
    "preflight",
    "read_catalog",
    "run_preflight",
]

CHUNK_BYTES = 1 << 20
PROBE_TIMEOUT_S = 10
READ_TIMEOUT_S = 60
OPT_IN = "--config 'fetch={unpinned: true}'"


class FetchError(RuntimeError):
    """A source could not be fetched, or what arrived is not what the catalogue pins."""


@dataclass(frozen=True)
class Source:
    """One catalogue entry, its config keys resolved to the paths it writes.

    Attributes
    ----------
    name : str
        The catalogue key (rule ``fetch_<name>``).
    kind : str
        ``http``, ``hub`` or ``manual``.
    about : str
        What it is and where it comes from, shown in messages.
    files, folders : tuple of str
        The output paths (Snakemake outputs; folders as ``directory()``).
    spec : dict
        The catalogue entry with every ``to`` key replaced by its path (``path``).
    checked : tuple of str
        Paths whose absence makes the source missing: the outputs, plus a manual source's folders
        that hold one of its files (not outputs: Snakemake forbids an output inside another).
    """

    name: str
    kind: str
    about: str
    files: tuple[str, ...]
    folders: tuple[str, ...]
    spec: dict = field(compare=False)
    checked: tuple[str, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        return self.files + self.folders

    def missing(self) -> bool:
        """True when any path the source writes is absent."""
        return any(not os.path.exists(path) for path in self.checked or self.outputs)

    def placement(self) -> str:
        """Where a person places the source by hand: every path it writes."""
        return ", ".join([*self.files, *(f"{folder}/" for folder in self.folders), *self.checked_only()])

    def checked_only(self) -> list[str]:
        return [f"{path}/" for path in self.checked if path not in self.outputs]


def config_value(config: Mapping, key: str, where: str) -> str:
    """The path at dotted ``key`` of ``config``; an error names the key and the catalogue entry."""
    value = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise FetchError(f"{where}: config key '{key}' is not in the config")
        value = value[part]
    if not isinstance(value, str):
        raise FetchError(f"{where}: config key '{key}' holds {value!r}, not a path")
    return value


def _http_outputs(downloads: Sequence[Mapping], config: Mapping, where: str) -> tuple[list[str], list[str], list[dict]]:
    files, folders, resolved = [], [], []
    for index, item in enumerate(downloads):
        path = config_value(config, item["to"], f"{where}.http[{index}]")
        resolved.append({**item, "path": path})
        if "extract" not in item:
            files.append(path)
            continue
        for member in item["extract"]:
            target = str(PurePosixPath(path) / member.rstrip("/"))
            (folders if member.endswith("/") else files).append(target)
    return files, folders, resolved


def _manual_outputs(spec: Mapping, config: Mapping, where: str) -> tuple[list[str], list[str], list[str]]:
    files = [config_value(config, key, where) for key in spec.get("files", [])]
    folders = [config_value(config, key, where) for key in spec.get("folders", [])]
    holding = [folder for folder in folders if any(Path(folder) in Path(file).parents for file in files)]
    return files, [folder for folder in folders if folder not in holding], holding


def _keys(entry: Mapping) -> list[str]:
    """Every config key a catalogue entry names."""
    return (
        [item["to"] for item in entry.get("http", []) + entry.get("hub", [])]
        + entry.get("files", [])
        + entry.get("folders", [])
    )


def _has_key(config: Mapping, key: str) -> bool:
    value = config
    for part in key.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


def resolve_sources(catalog: Mapping, config: Mapping, catalog_name: str = "sources") -> list[Source]:
    """Every catalogue entry with its config keys turned into the paths it writes.

    Parameters
    ----------
    catalog : mapping
        The parsed catalogue (``{"sources": {name: entry}}``), already schema-checked.
    config : mapping
        The workflow config whose keys the entries name.
    catalog_name : str
        The catalogue's file name, for messages.

    An entry whose keys lie in a section the config does not have (a track it does not run), or
    an ``optional`` entry whose keys the config does not all hold, is left out; any other missing
    key is an error naming it.
    """
    sources, claimed = [], {}
    for name, entry in catalog["sources"].items():
        where = f"{catalog_name}: source '{name}'"
        if not all(key.split(".")[0] in config for key in _keys(entry)):
            continue  # a track the config does not run
        if entry.get("optional") and not all(_has_key(config, key) for key in _keys(entry)):
            continue  # an optional input this config does not name
        spec, extra = dict(entry), []
        if "http" in entry:
            kind = "http"
            files, folders, spec["http"] = _http_outputs(entry["http"], config, where)
        elif "hub" in entry:
            kind = "hub"
            spec["hub"] = [
                {**item, "path": config_value(config, item["to"], f"{where}.hub[{index}]")}
                for index, item in enumerate(entry["hub"])
            ]
            files, folders = [], [item["path"] for item in spec["hub"]]
        else:
            kind = "manual"
            files, folders, extra = _manual_outputs(entry, config, where)
        for path in files + folders:
            if path in claimed:
                raise FetchError(f"{where}: writes {path}, which source '{claimed[path]}' writes too")
            claimed[path] = name
        checked = tuple(files + folders + extra) if extra else ()
        sources.append(Source(name, kind, entry["about"], tuple(files), tuple(folders), spec, checked))
    return sources


def source_paths(sources: Iterable[Source]) -> dict[str, str]:
    """Each path a fetch rule writes, mapped to its source's name.

    A check that configured files exist uses this to tell a path the workflow will fetch from
    one a person must place.
    """
    return {path: source.name for source in sources for path in source.outputs}


def missing_sources(sources: Iterable[Source]) -> list[Source]:
    """The sources with at least one path absent."""
    return [source for source in sources if source.missing()]


def mirrored(url: str, mirror: str | None) -> str:
    """``url`` as a mirror serves it: ``{mirror}/{host}/{path}``; unchanged without a mirror."""
    if not mirror:
        return url
    parts = urllib.parse.urlsplit(url)
    tail = f"{parts.netloc}{parts.path}" + (f"?{parts.query}" if parts.query else "")
    return f"{mirror.rstrip('/')}/{tail}"


def _stream(url: str, handle, label: str) -> tuple[str, int]:
    """Copy ``url`` into ``handle``; its sha256 and byte count."""
    digest, count = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=READ_TIMEOUT_S) as response:
            promised = response.headers.get("Content-Length")
            while chunk := response.read(CHUNK_BYTES):
                digest.update(chunk)
                handle.write(chunk)
                count += len(chunk)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as error:  # IncompleteRead: a cut connection
        raise FetchError(f"{label}: download of {url} failed ({error.__class__.__name__}: {error})") from error
    if promised is not None and count != int(promised):  # a cut connection can end the body without an error
        raise FetchError(f"{label}: download of {url} failed (cut short: {count} of {promised} bytes)")
    return digest.hexdigest(), count


def _check_pin(
    label: str, url: str, got: str, count: int, sha256: str | None, size: int | None, unpinned: bool
) -> None:
    if size is not None and count != size:
        raise FetchError(f"{label}: {url} gave {count} bytes, the catalogue pins {size}; nothing was kept")
    if sha256 is None and not unpinned:
        raise FetchError(
            f"{label}: {url} has no sha256 in the catalogue; it gave sha256 {got} ({count} bytes). "
            f"Pin that value if you trust it, or rerun with {OPT_IN}; nothing was kept"
        )
    if sha256 is not None and got != sha256.lower():
        raise FetchError(f"{label}: {url} has sha256 {got}, the catalogue pins {sha256}; nothing was kept")


def download(url: str, path: str | os.PathLike, label: str, sha256: str | None = None, size: int | None = None,
             unpinned: bool = False) -> str:  # fmt: skip
    """Download ``url`` to ``path``, renamed into place only once its sha256 (and size) match.

    Parameters
    ----------
    url : str
        What to download (already mirrored).
    path : path-like
        Where it lands; nothing is written there unless every check passes.
    label : str
        The source's name, for messages.
    sha256, size
        The catalogue's pins; with ``sha256=None`` the download is refused unless ``unpinned``.
    unpinned : bool
        Keep a download that has no pinned sha256 (the user opted in).

    Returns
    -------
    str
        The sha256 of what arrived (for a lab to pin).
    """
    with atomic_path(path, suffix=".part") as tmp:
        with open(tmp, "wb") as handle:
            got, count = _stream(url, handle, label)
        _check_pin(label, url, got, count, sha256, size, unpinned)
    return got


def _safe_name(name: str, archive: Path) -> PurePosixPath:
    member = PurePosixPath(name)
    if member.is_absolute() or ".." in member.parts or "\\" in name:
        raise FetchError(f"{archive}: member {name!r} would land outside its folder; refusing the archive")
    return member


def _members(archive: Path) -> list[tuple[PurePosixPath, object]]:
    """Every member of a zip or tar archive with its safe relative name; links and devices refused."""
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as handle:
            return [(_safe_name(info.filename, archive), info) for info in handle.infolist()]
    with tarfile.open(archive) as handle:
        members = []
        for info in handle.getmembers():
            if not (info.isfile() or info.isdir()):
                raise FetchError(f"{archive}: member {info.name!r} is a link or device; refusing the archive")
            members.append((_safe_name(info.name, archive), info))
        return members


def _write_member(archive: Path, info, destination: Path) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(info, zipfile.ZipInfo):
        with zipfile.ZipFile(archive) as handle, handle.open(info) as source, open(destination, "wb") as sink:
            shutil.copyfileobj(source, sink, CHUNK_BYTES)
        return
    with tarfile.open(archive) as handle, handle.extractfile(info.name) as source, open(destination, "wb") as sink:
        shutil.copyfileobj(source, sink, CHUNK_BYTES)


def extract_members(archive: str | os.PathLike, wanted: Sequence[str], folder: str | os.PathLike) -> list[Path]:
    """Extract ``wanted`` members of a zip or tar archive into ``folder``, each placed atomically.

    A member ending in ``/`` is a folder, extracted whole into a temporary folder and renamed into
    place. Every member name of the archive is checked first: one that is absolute or climbs
    with ``..`` refuses the whole archive, before anything is written.

    Returns
    -------
    list of Path
        The placed files and folders, in the order of ``wanted``.
    """
    archive, folder = Path(archive), Path(folder)
    members = _members(archive)
    placed = []
    for want in wanted:
        prefix = PurePosixPath(want.rstrip("/"))
        if want.endswith("/"):
            inside = [(name, info) for name, info in members if prefix in name.parents and not _is_dir(info)]
            if not inside:
                raise FetchError(f"{archive}: no member under {want!r}")
            with atomic_directory(folder / prefix) as tmp:
                for name, info in inside:
                    _write_member(archive, info, tmp / name.relative_to(prefix))
        else:
            match = [info for name, info in members if name == prefix and not _is_dir(info)]
            if not match:
                raise FetchError(f"{archive}: no member {want!r}")
            with atomic_path(folder / prefix) as tmp:
                _write_member(archive, match[0], tmp)
        placed.append(folder / prefix)
    return placed


def _is_dir(info) -> bool:
    return info.is_dir() if isinstance(info, zipfile.ZipInfo) else info.isdir()


def _fetch_http(source: Source, mirror: str | None, unpinned: bool, log) -> None:
    for item in source.spec["http"]:
        url = mirrored(item["url"], mirror)
        pins = {"sha256": item.get("sha256"), "size": item.get("size"), "unpinned": unpinned}
        if "extract" not in item:
            got = download(url, item["path"], source.name, **pins)
            log(f"{source.name}: {url} -> {item['path']} (sha256 {got})")
            continue
        folder = Path(item["path"])
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f".{source.name}.", dir=folder) as scratch:
            archive = Path(scratch) / PurePosixPath(urllib.parse.urlsplit(url).path).name
            got = download(url, archive, source.name, **pins)
            log(f"{source.name}: {url} (sha256 {got}) -> {', '.join(item['extract'])} under {folder}")
            extract_members(archive, item["extract"], folder)


def _fetch_hub(source: Source, unpinned: bool, log) -> None:
    for hub in source.spec["hub"]:
        _fetch_repo(source.name, hub, unpinned, log)


def _fetch_repo(label: str, hub: Mapping, unpinned: bool, log) -> None:
    """One repository of a hub source at its pinned commit, checked file by file, renamed into place."""
    from huggingface_hub import HfApi, snapshot_download  # only hub sources need it

    endpoint = os.environ.get("HF_ENDPOINT")
    revision = hub.get("revision")
    if revision is None:
        resolved = HfApi(endpoint=endpoint).repo_info(hub["repo"], repo_type=hub.get("type", "model")).sha
        if not unpinned:
            raise FetchError(f"{label}: {hub['repo']} has no revision in the catalogue; its main branch is at {resolved}. "
                             f"Pin that commit if you trust it, or rerun with {OPT_IN}")  # fmt: skip
        log(f"{label}: unpinned, fetching {hub['repo']} at {resolved}: pin `revision: {resolved}`")
        revision = resolved
    with atomic_directory(hub["path"]) as tmp:
        snapshot_download(hub["repo"], repo_type=hub.get("type", "model"), revision=revision, local_dir=tmp,
                          allow_patterns=hub.get("allow"), ignore_patterns=hub.get("ignore"), endpoint=endpoint)  # fmt: skip
        _verify_hub_files(label, hub, revision, Path(tmp), endpoint)
        shutil.rmtree(Path(tmp) / ".cache", ignore_errors=True)
    log(f"{label}: {hub['repo']}@{revision} -> {hub['path']}")


def _verify_hub_files(label: str, hub: Mapping, revision: str, folder: Path, endpoint: str | None) -> None:
    """Check each downloaded file against the hub's record: sha256 for LFS files, the git blob id otherwise."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=endpoint).repo_info(
        hub["repo"], repo_type=hub.get("type", "model"), revision=revision, files_metadata=True
    )
    for sibling in info.siblings or []:
        path = folder / sibling.rfilename
        if not path.is_file():
            continue  # left out by `allow`
        if sibling.lfs is not None:
            got, want = _file_digest(path, hashlib.sha256()), sibling.lfs.sha256
        else:  # git's blob id: sha1 of a "blob <size>" header and the bytes
            got, want = _file_digest(path, hashlib.sha1(b"blob %d\0" % path.stat().st_size)), sibling.blob_id
        if want is not None and got != want:
            raise FetchError(
                f"{label}: {hub['repo']}@{revision} file {sibling.rfilename} does not match the hub's hash; nothing was kept"
            )


def _file_digest(path: Path, digest) -> str:
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def fetch_source(source: Source, mirror: str | None = None, unpinned: bool = False, log=print) -> None:
    """Fetch one source into the paths it writes; a manual source only explains itself.

    Raises
    ------
    FetchError
        A failed or mismatched download (nothing is left at the source's paths), an unpinned
        download the user did not opt in to, or a manual source.
    """
    if source.kind == "http":
        _fetch_http(source, mirror, unpinned, log)
    elif source.kind == "hub":
        _fetch_hub(source, unpinned, log)
    else:
        raise FetchError(cannot_fetch([source], {}))


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _probe_urls(sources: Iterable[Source], mirror: str | None) -> dict[str, str]:
    """One URL per origin that the automatic sources download from (the hub: its API)."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    urls = {}
    for source in sources:
        if source.kind == "http":
            for item in source.spec["http"]:
                url = mirrored(item["url"], mirror)
                urls.setdefault(_origin(url), url)
        elif source.kind == "hub":
            urls.setdefault(_origin(endpoint), f"{endpoint}/api/models/{source.spec['hub'][0]['repo']}")
    return urls


def _probe(url: str) -> str | None:
    """None when ``url`` answers a HEAD request; otherwise the error, in words."""
    request = urllib.request.Request(url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError as error:
        return None if error.code in (401, 403, 405) else f"HTTP {error.code} for {url}"
    except (urllib.error.URLError, OSError) as error:
        return f"{_origin(url)} unreachable ({getattr(error, 'reason', error)})"


def _unpinned(source: Source) -> bool:
    if source.kind == "http":
        return any(item.get("sha256") is None for item in source.spec["http"])
    return source.kind == "hub" and any(hub.get("revision") is None for hub in source.spec["hub"])


def _where_from(source: Source) -> str:
    if source.kind == "http":
        return " + ".join(item["url"] for item in source.spec["http"])
    if source.kind == "hub":
        return " + ".join(
            f"huggingface.co/{hub['repo']} at {hub.get('revision') or 'an unpinned revision'}"
            for hub in source.spec["hub"]
        )
    return source.spec["manual"]


def cannot_fetch(sources: Sequence[Source], reasons: Mapping[str, str]) -> str:
    """One message listing every source that must be placed by hand, where from and where to.

    Parameters
    ----------
    sources : sequence of Source
        The sources that cannot be fetched now.
    reasons : mapping
        Source name -> why (unreachable, unpinned); a manual source needs none.
    """
    head = f"{len(sources)} source(s) of the config are missing and cannot be fetched now. Place each at the path shown (or fix the reason), then rerun:"
    lines = [head]
    for source in sources:
        reason = reasons.get(source.name, "fetched by hand" if source.kind == "manual" else "")
        lines += [
            f"  - {source.name}: {source.about} [{reason}]",
            f"      from: {_where_from(source)}",
            f"      place at: {source.placement()}",
        ]
    return "\n".join(lines)


def preflight(
    needed: Sequence[Source],
    mirror: str | None = None,
    unpinned: bool = False,
    others: Sequence[Source] = (),
    unscheduled: Sequence[Source] = (),
) -> None:
    """Before any download: refuse in one message if a needed source cannot be fetched now.

    A source cannot be fetched when it is manual, unpinned without the user's opt-in, or when
    the host of any automatic source does not answer (offline, every automatic source must then
    be placed by hand).

    Parameters
    ----------
    needed : sequence of Source
        The missing sources this run fetches.
    mirror, unpinned
        The config's ``fetch.mirror`` and ``fetch.unpinned``.
    others : sequence of Source
        Missing sources this run does not need: they never cause a refusal, but a refusal lists
        them too, so that one message says everything to place.
    unscheduled : sequence of Source
        Missing sources this run reads (an image folder passed as a parameter) but no job of it
        writes: always refused, since no job will fetch them.

    Raises
    ------
    FetchError
        Listing every source that cannot be fetched now, where it comes from and where it goes.
    """
    everything = [*needed, *unscheduled, *others]
    reasons = {
        s.name: f"unpinned: pin it in the catalogue, or rerun with {OPT_IN}"
        for s in everything
        if _unpinned(s) and not unpinned
    }
    automatic = [s for s in everything if s.kind != "manual"]
    failures = [error for error in map(_probe, _probe_urls(automatic, mirror).values()) if error]
    if failures:
        offline = "offline: " + "; ".join(failures)
        reasons |= {s.name: offline for s in automatic}
    for source in unscheduled:
        if source.kind != "manual" and source.name not in reasons:
            reasons[source.name] = (
                f"read by this run, written by none of its jobs: run `snakemake fetch_{source.name}` first"
            )
    if unscheduled or any(s.kind == "manual" or s.name in reasons for s in needed):
        raise FetchError(cannot_fetch([s for s in everything if s.kind == "manual" or s.name in reasons], reasons))


def read_catalog(path: str | os.PathLike, schema: str | os.PathLike | None = None) -> dict:
    """The parsed catalogue file, checked against ``schema`` (workflow/schemas/sources.schema.yaml) when given.

    Raises
    ------
    FetchError
        Naming the file and, for a schema violation, the entry and key at fault.
    """
    import jsonschema
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: parsed at every DAG build
    path = Path(path)
    if not path.is_file():
        raise FetchError(f"{path}: catalogue of sources not found (config key 'fetch.sources')")
    catalog = yaml.load(path.read_text(), Loader=loader)
    if schema is not None:
        # A validator without the metaschema check snakemake.utils.validate runs: 0.04 s, not 0.2 s, per DAG build.
        validator = jsonschema.Draft202012Validator(yaml.load(Path(schema).read_text(), Loader=loader))
        error = jsonschema.exceptions.best_match(validator.iter_errors(catalog))
        if error is not None:
            where = ".".join(str(part) for part in error.absolute_path) or "top level"
            raise FetchError(f"{path}: {where}: {error.message}")
    if not isinstance(catalog, dict) or not isinstance(catalog.get("sources"), dict):
        raise FetchError(f"{path}: a catalogue is a mapping with a 'sources' mapping")
    return catalog


def run_preflight(
    needed: Sequence[Source],
    others: Sequence[Source],
    log_path: str | os.PathLike,
    mirror: str | None = None,
    unpinned: bool = False,
    unscheduled: Sequence[Source] = (),
) -> None:
    """The workflow's preflight: ``preflight`` with its verdict written to ``log_path``."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        preflight(needed, mirror, unpinned, others, unscheduled)
    except FetchError as error:
        Path(log_path).write_text(f"{error}\n")
        raise
    Path(log_path).write_text(f"{len(needed)} source(s) to fetch: {', '.join(s.name for s in needed)}\n")


def named_by(sources: Iterable[Source], texts: Iterable[str]) -> list[Source]:
    """The sources one of whose paths occurs in ``texts`` (the parameters of the jobs a run executes)."""
    joined = "\n".join(texts)
    return [source for source in sources if any(path in joined for path in source.checked or source.outputs)]
