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

A source the catalogue does not pin is fetched once as it is upstream, and that fetch writes its
**lock** (``<lock folder>/<name>.yaml``: each URL's sha256 and size; each hub repository's commit and
every file's sha256), which the lab commits. Every later fetch, by anyone, gets exactly those bytes
or stops naming the file. A lock records the catalogue entry it was written for: one written for
another entry is refused. Gated hub repositories (``gated: true``) read a token from ``HF_TOKEN``.
"""

from __future__ import annotations

import hashlib
import http.client
import json
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
    "read_lock",
    "write_lock",
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
    "catalogue_table",
    "model_parameters",
]

CHUNK_BYTES = 1 << 20
PROBE_TIMEOUT_S = 10
READ_TIMEOUT_S = 60
HUB = "https://huggingface.co"


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
    entry : str
        sha256 of the catalogue entry as written (config keys, not paths), less its `about` and models' `parameters`:
        the entry a lock was written for.
    """

    name: str
    kind: str
    about: str
    files: tuple[str, ...]
    folders: tuple[str, ...]
    spec: dict = field(compare=False)
    checked: tuple[str, ...] = ()
    entry: str = ""

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

    def as_params(self) -> dict:
        """What a fetch job needs of the source, as Snakemake params: no description and no models' sizes, so
        rewording the catalogue or restating a size refetches nothing, and no path of the checkout."""
        return {
            "name": self.name,
            "kind": self.kind,
            "files": list(self.files),
            "folders": list(self.folders),
            "spec": _pinned_part(self.spec),
            "checked": list(self.checked),
            "entry": self.entry,
        }

    @classmethod
    def from_params(cls, params: Mapping) -> Source:
        """The source a fetch job was given by :meth:`as_params`."""
        return cls(
            params["name"],
            params["kind"],
            params["name"],
            tuple(params["files"]),
            tuple(params["folders"]),
            dict(params["spec"]),
            tuple(params["checked"]),
            params["entry"],
        )


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
        digest = hashlib.sha256(json.dumps(_pinned_part(entry), sort_keys=True).encode()).hexdigest()
        sources.append(Source(name, kind, entry["about"], tuple(files), tuple(folders), spec, checked, digest))
    return sources


def _pinned_part(entry: Mapping) -> dict:
    """What a lock is written for: the entry less its description and its sizes (models', manual data's)."""
    pinned = {key: value for key, value in entry.items() if key not in ("about", "disk_gb")}
    if "hub" in pinned:
        pinned["hub"] = [{key: value for key, value in item.items() if key != "parameters"} for item in pinned["hub"]]
    return pinned


def model_parameters(catalog: Mapping) -> dict[str, dict]:
    """Each hub repository's stated ``parameters``, by the config key it is fetched to."""
    return {
        item["to"]: dict(item["parameters"])
        for entry in catalog["sources"].values()
        for item in entry.get("hub", ())
        if "parameters" in item
    }


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
    label: str, url: str, got: str, count: int, sha256: str | None, size: int | None, pinned_by: str
) -> None:
    if size is not None and count != size:
        raise FetchError(f"{label}: {url} gave {count} bytes, {pinned_by} pins {size}; nothing was kept")
    if sha256 is not None and got != sha256.lower():
        raise FetchError(f"{label}: {url} has sha256 {got}, {pinned_by} pins {sha256}; nothing was kept")


def download(
    url: str,
    path: str | os.PathLike,
    label: str,
    sha256: str | None = None,
    size: int | None = None,
    pinned_by: str = "the catalogue",
) -> tuple[str, int]:
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
        The pins; ``None`` checks nothing (a first fetch, whose values the caller locks).
    pinned_by : str
        Who pins them, for messages (the catalogue, or a lock file).

    Returns
    -------
    tuple of (str, int)
        The sha256 and byte count of what arrived.
    """
    with atomic_path(path, suffix=".part") as tmp:
        with open(tmp, "wb") as handle:
            got, count = _stream(url, handle, label)
        _check_pin(label, url, got, count, sha256, size, pinned_by)
    return got, count


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


def lock_file(lock_dir: str | os.PathLike, source: Source) -> Path:
    """Where ``source``'s lock lives in the lock folder."""
    return Path(lock_dir) / f"{source.name}.yaml"


def read_lock(source: Source, lock_dir: str | os.PathLike) -> dict | None:
    """``source``'s lock, or None before its first fetch.

    Raises
    ------
    FetchError
        The lock was written for another catalogue entry of the source (an edited URL, pin, pattern or
        key), or does not have the entry's shape; the message names the file.
    """
    import yaml

    path = lock_file(lock_dir, source)
    if not path.is_file():
        return None
    lock = yaml.safe_load(path.read_text())
    if not isinstance(lock, dict) or lock.get("entry") != source.entry:
        raise FetchError(
            f"{path}: this lock was written for another catalogue entry of source '{source.name}' than the "
            f"catalogue holds now; restore the entry, or delete the lock to fetch the source as it is upstream and lock it again"
        )
    items = source.spec.get("http") or source.spec.get("hub") or []
    if len(lock.get(source.kind, [])) != len(items):
        raise FetchError(
            f"{path}: locks {len(lock.get(source.kind, []))} {source.kind} item(s), the entry has {len(items)}"
        )
    return lock


def write_lock(source: Source, lock_dir: str | os.PathLike, items: list[dict]) -> Path:
    """Write ``source``'s lock (atomically): the entry it is for and what its first fetch got."""
    import yaml

    path = lock_file(lock_dir, source)
    header = (
        f"# The lock of source '{source.name}' (condeval.core.fetch), written by its first fetch: commit it.\n"
        "# Every later fetch gets exactly these bytes or stops; delete it to fetch the source anew.\n"
    )
    body = yaml.safe_dump({"source": source.name, "entry": source.entry, source.kind: items}, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        Path(tmp).write_text(header + body)
    return path


def _fetch_http(source: Source, mirror: str | None, lock: dict | None, pinned_by: str, log) -> list[dict]:
    got = []
    for index, item in enumerate(source.spec["http"]):
        url = mirrored(item["url"], mirror)
        locked = lock["http"][index] if lock else {}
        by = "the catalogue" if item.get("sha256") else pinned_by
        pins = {"sha256": item.get("sha256") or locked.get("sha256"), "size": item.get("size") or locked.get("size")}
        if "extract" not in item:
            sha256, size = download(url, item["path"], source.name, **pins, pinned_by=by)
            log(f"{source.name}: {url} -> {item['path']} (sha256 {sha256})")
        else:
            folder = Path(item["path"])
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(prefix=f".{source.name}.", dir=folder) as scratch:
                archive = Path(scratch) / PurePosixPath(urllib.parse.urlsplit(url).path).name
                sha256, size = download(url, archive, source.name, **pins, pinned_by=by)
                log(f"{source.name}: {url} (sha256 {sha256}) -> {', '.join(item['extract'])} under {folder}")
                extract_members(archive, item["extract"], folder)
        got.append({"url": item["url"], "sha256": sha256, "size": size})
    return got


def _gated_message(repos: Iterable[str]) -> str:
    pages = ", ".join(f"{HUB}/{repo}" for repo in repos)
    return (
        f"gated: accept the licence at {pages} with your Hugging Face account, then set HF_TOKEN to a read "
        f"token of that account ({HUB}/settings/tokens)"
    )


def _fetch_repo(label: str, hub: Mapping, locked: Mapping, pinned_by: str, log) -> dict:
    """One repository of a hub source at its pinned (or locked, or current) commit, checked file by file
    against the hub's record and the lock, renamed into place; its commit and files' sha256."""
    from huggingface_hub import HfApi, snapshot_download  # only hub sources need it
    from huggingface_hub.errors import GatedRepoError

    endpoint = os.environ.get("HF_ENDPOINT")
    try:
        revision = hub.get("revision") or locked.get("revision")
        if revision is None:
            revision = HfApi(endpoint=endpoint).repo_info(hub["repo"], repo_type=hub.get("type", "model")).sha
            log(f"{label}: {hub['repo']} is not pinned; fetching its main branch, at {revision}, and locking it")
        with atomic_directory(hub["path"]) as tmp:
            snapshot_download(
                hub["repo"],
                repo_type=hub.get("type", "model"),
                revision=revision,
                local_dir=tmp,
                allow_patterns=hub.get("allow"),
                ignore_patterns=hub.get("ignore"),
                endpoint=endpoint,
            )
            shutil.rmtree(Path(tmp) / ".cache", ignore_errors=True)
            files = _folder_digests(Path(tmp))  # each file read once: the lock's and the hub's LFS check
            _verify_hub_files(label, hub, revision, Path(tmp), endpoint, files)
            if locked:
                _check_locked_files(f"{label}: {hub['repo']}@{revision}", files, locked["files"], pinned_by)
    except GatedRepoError as error:
        raise FetchError(f"{label}: {hub['repo']} is {_gated_message([hub['repo']])}") from error
    log(f"{label}: {hub['repo']}@{revision} -> {hub['path']}")
    return {"repo": hub["repo"], "revision": revision, "files": files}


def _folder_digests(folder: Path) -> dict[str, str]:
    """Every file under ``folder``, by its POSIX path there, with its sha256."""
    paths = sorted(path for path in folder.rglob("*") if path.is_file())
    return {path.relative_to(folder).as_posix(): _file_digest(path, hashlib.sha256()) for path in paths}


def _check_locked_files(label: str, got: Mapping[str, str], locked: Mapping[str, str], pinned_by: str) -> None:
    for name in sorted(got.keys() | locked.keys()):
        if name not in got:
            raise FetchError(f"{label}: file {name} locked by {pinned_by} did not arrive; nothing was kept")
        if name not in locked:
            raise FetchError(f"{label}: file {name} arrived, {pinned_by} does not lock it; nothing was kept")
        if got[name] != locked[name]:
            raise FetchError(
                f"{label}: file {name} has sha256 {got[name]}, {pinned_by} locks {locked[name]}; nothing was kept"
            )


def _verify_hub_files(
    label: str, hub: Mapping, revision: str, folder: Path, endpoint: str | None, sha256s: Mapping[str, str]
) -> None:
    """Check each downloaded file against the hub's record: sha256 for LFS files (``sha256s``, already read),
    the git blob id otherwise."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=endpoint).repo_info(
        hub["repo"], repo_type=hub.get("type", "model"), revision=revision, files_metadata=True
    )
    for sibling in info.siblings or []:
        path = folder / sibling.rfilename
        if not path.is_file():
            continue  # left out by `allow`
        if sibling.lfs is not None:
            got, want = sha256s[sibling.rfilename], sibling.lfs.sha256
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


def fetch_source(
    source: Source, mirror: str | None = None, lock_dir: str | os.PathLike | None = None, log=print
) -> None:
    """Fetch one source into the paths it writes; a manual source only explains itself.

    Parameters
    ----------
    source : Source
        One entry of :func:`resolve_sources`.
    mirror : str, optional
        ``fetch.mirror``: a base URL serving every HTTP(S) download.
    lock_dir : path-like, optional
        The lock folder (``fetch.lock``). A source the catalogue does not pin is fetched as it is
        upstream and locked there on its first fetch, and fetched as locked afterwards. Without one, only
        pinned sources are fetched.
    log : callable
        Takes one line per download.

    Raises
    ------
    FetchError
        A failed download, or one that differs from the catalogue's pin or the lock (nothing is left at
        the source's paths); a lock written for another entry; a gated repository without a token that
        may read it; an unpinned source without a lock folder; a manual source.
    """
    if source.kind == "manual":
        raise FetchError(cannot_fetch([source], {}))
    lock = read_lock(source, lock_dir) if lock_dir is not None else None
    if lock_dir is None and _unpinned(source):
        raise FetchError(f"{source.name}: not pinned in the catalogue, and no lock folder to lock it in (fetch.lock)")
    pinned_by = str(lock_file(lock_dir, source)) if lock_dir is not None else "the catalogue"
    if source.kind == "http":
        items = _fetch_http(source, mirror, lock, pinned_by, log)
    else:
        locks = lock["hub"] if lock else [{}] * len(source.spec["hub"])
        items = [
            _fetch_repo(source.name, hub, locked, pinned_by, log) for hub, locked in zip(source.spec["hub"], locks)
        ]
    if lock_dir is not None and lock is None:
        log(f"{source.name}: locked in {write_lock(source, lock_dir, items)}: commit it")


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
            f"huggingface.co/{hub['repo']} at {hub.get('revision') or 'its locked or current commit'}"
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
        Source name -> why (unreachable, gated, a stale lock); a manual source needs none.
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


def _gated_without_token(sources: Iterable[Source]) -> dict[str, list[str]]:
    """Source name -> its gated repositories, when no Hugging Face token is set (``HF_TOKEN`` or a login)."""
    gated = {s.name: [hub["repo"] for hub in s.spec["hub"] if hub.get("gated")] for s in sources if s.kind == "hub"}
    gated = {name: repos for name, repos in gated.items() if repos}
    if not gated:
        return {}
    from huggingface_hub import get_token

    return {} if get_token() else gated


def preflight(
    needed: Sequence[Source],
    mirror: str | None = None,
    others: Sequence[Source] = (),
    unscheduled: Sequence[Source] = (),
    lock_dir: str | os.PathLike | None = None,
) -> None:
    """Before any download: refuse in one message if a needed source cannot be fetched now.

    A source cannot be fetched when it is manual; when its lock was written for another catalogue
    entry; when it is gated and no Hugging Face token is set; when it is unpinned and there is no lock
    folder; or when the host of any automatic source does not answer (offline, every automatic
    source must then be placed by hand).

    Parameters
    ----------
    needed : sequence of Source
        The missing sources this run fetches.
    mirror : str, optional
        The config's ``fetch.mirror``.
    others : sequence of Source
        Missing sources this run does not need: they never cause a refusal, but a refusal lists
        them too, so that one message says everything to place.
    unscheduled : sequence of Source
        Missing sources this run reads (an image folder passed as a parameter) but no job of it
        writes: always refused, since no job will fetch them.
    lock_dir : path-like, optional
        The lock folder (``fetch.lock``).

    Raises
    ------
    FetchError
        Listing every source that cannot be fetched now, where it comes from and where it goes.
    """
    everything = [*needed, *unscheduled, *others]
    automatic = [s for s in everything if s.kind != "manual"]
    reasons = {name: _gated_message(repos) for name, repos in _gated_without_token(automatic).items()}
    for source in automatic:
        if lock_dir is None and _unpinned(source):
            reasons[source.name] = "not pinned in the catalogue, and no lock folder to lock it in (fetch.lock)"
        elif lock_dir is not None:
            try:
                read_lock(source, lock_dir)
            except FetchError as error:
                reasons[source.name] = str(error)
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
    unscheduled: Sequence[Source] = (),
    lock_dir: str | os.PathLike | None = None,
) -> None:
    """The workflow's preflight: ``preflight`` with its verdict written to ``log_path``."""
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    try:
        preflight(needed, mirror, others, unscheduled, lock_dir)
    except FetchError as error:
        Path(log_path).write_text(f"{error}\n")
        raise
    Path(log_path).write_text(f"{len(needed)} source(s) to fetch: {', '.join(s.name for s in needed)}\n")


def named_by(sources: Iterable[Source], texts: Iterable[str]) -> list[Source]:
    """The sources one of whose paths occurs in ``texts`` (the parameters of the jobs a run executes)."""
    joined = "\n".join(texts)
    return [source for source in sources if any(path in joined for path in source.checked or source.outputs)]


def _pin_words(entry: Mapping) -> str:
    if "manual" in entry:
        return "placed by hand (the run's message says how)"
    if "http" in entry:
        pinned = [bool(item.get("sha256")) for item in entry["http"]]
        return "sha256 in the catalogue" if all(pinned) else "locked by its first fetch"
    pinned = [bool(item.get("revision")) for item in entry["hub"]]
    words = "commit in the catalogue" if all(pinned) else "locked by its first fetch"
    return words + ("; gated (`HF_TOKEN`)" if any(item.get("gated") for item in entry["hub"]) else "")


def catalogue_table(catalog: Mapping) -> list[str]:
    """The catalogue as the docs show it: a count line, then one Markdown table row per source."""
    entries = catalog["sources"]
    repos = [item for entry in entries.values() for item in entry.get("hub", [])]
    downloads = [item for entry in entries.values() for item in entry.get("http", [])]
    manual = [name for name, entry in entries.items() if "manual" in entry]
    lines = [
        f"{len(entries)} sources: {len(repos)} hub repositories ({sum(bool(r.get('gated')) for r in repos)} gated, "
        f"{sum(bool(r.get('revision')) for r in repos)} with a commit in the catalogue), {len(downloads)} HTTP "
        f"downloads ({sum(bool(d.get('sha256')) for d in downloads)} with a sha256 in the catalogue), "
        f"{len(manual)} placed by hand.",
        "",
        "| source | kind | what | pin |",
        "|---|---|---|---|",
    ]
    for name, entry in entries.items():
        kind = next(kind for kind in ("http", "hub", "manual") if kind in entry)
        what = entry["about"] + (" (optional)" if entry.get("optional") else "")
        lines.append(f"| `{name}` | {kind} | {what} | {_pin_words(entry)} |")
    return lines
