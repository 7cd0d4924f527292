"""The rehearsal's loopback server: plain downloads under a mirror, and a minimal Hugging Face hub.

One :class:`LoopbackServer` answers on 127.0.0.1 (OS-chosen ports, daemon threads):

- ``GET``/``HEAD /<host>/<path>``: the file ``serve_root/<host>/<path>``, as ``fetch.mirror`` asks
  for ``{mirror}/{host}/{path}`` (:func:`condeval.core.fetch.mirrored`);
- under ``/hub`` (``HF_ENDPOINT``), what ``huggingface_hub`` 2.4 calls for ``snapshot_download`` at a
  commit and ``HfApi.repo_info(..., files_metadata=True)``: ``/api/models/<repo>[/revision/<rev>]``
  (``?blobs=true`` adds sizes, blob ids and LFS records), ``/api/models/<repo>/tree/<rev>[/<path>]``
  and ``/<repo>/resolve/<rev>/<file>``. A plain file resolves to its bytes (``ETag`` its git blob id);
  an LFS file redirects, as the hub does, to a second origin standing for the hub's CDN, with the file's
  sha256 and size in ``X-Linked-Etag`` / ``X-Linked-Size``: so the client takes the same path as on
  huggingface.co, and drops its token before the CDN. No Xet header is ever sent (plain HTTP downloads).

Each folder ``hub_root/<owner>/<name>/`` is one repository at one commit: a sha1 of its files' names and
blob ids (so of their bytes), which ``main`` resolves to; any other revision, an unknown repository or
file answers 404 with the hub's ``X-Error-Code``. A folder is read once, at its first request.
Directory entries are left out of tree listings (``snapshot_download`` reads files only).
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import re
import secrets
import shutil
import sys
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlsplit

__all__ = ["HubFile", "HubRepo", "LoopbackServer", "git_blob_id", "index_repo", "is_lfs", "lfs_pointer"]

CHUNK_BYTES = 1 << 20
# The hub's default .gitattributes for a new repository (huggingface.co), plus the images the hub
# stores in LFS: every other file is a plain git blob.
LFS_PATTERNS = (
    "*.7z",
    "*.arrow",
    "*.bin",
    "*.bz2",
    "*.ckpt",
    "*.ftz",
    "*.gz",
    "*.h5",
    "*.joblib",
    "*.lfs.*",
    "*.mlmodel",
    "*.model",
    "*.msgpack",
    "*.npy",
    "*.npz",
    "*.onnx",
    "*.ot",
    "*.parquet",
    "*.pb",
    "*.pickle",
    "*.pkl",
    "*.pt",
    "*.pth",
    "*.rar",
    "*.safetensors",
    "saved_model/**/*",
    "*.tar.*",
    "*.tar",
    "*.tflite",
    "*.tgz",
    "*.wasm",
    "*.xz",
    "*.zip",
    "*.zst",
    "*tfevents*",
    "*.png",
    "*.jpg",
    "*.jpeg",
    "*.webp",
)
NAME = re.compile(r"^[A-Za-z0-9_.-]+$")
LAST_MODIFIED = "2024-01-01T00:00:00.000Z"


def is_lfs(path: str) -> bool:
    """Whether the hub's default ``.gitattributes`` stores ``path`` (repository-relative) in LFS."""
    name = path.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatchcase(name, pattern) or fnmatch.fnmatchcase(path, pattern) for pattern in LFS_PATTERNS)


def git_blob_id(data: bytes) -> str:
    """Git's object id of a blob: the sha1 of ``blob <size>\\0`` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The Git LFS pointer file git stores in place of an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def _digest(path: Path, digest) -> str:
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class HubFile:
    """One file of a repository as the hub records it.

    Attributes
    ----------
    path : str
        Repository-relative, ``/``-separated.
    location : Path
        Where its bytes are on this machine.
    size : int
        Its size in bytes.
    blob_id : str
        The git blob id: of the bytes for a plain file, of the LFS pointer for an LFS file.
    sha256 : str or None
        The LFS oid (sha256 of the bytes); None for a plain file.
    pointer_size : int or None
        The LFS pointer's size in bytes; None for a plain file.
    """

    path: str
    location: Path
    size: int
    blob_id: str
    sha256: str | None = None
    pointer_size: int | None = None

    def lfs(self, oid_key: str) -> dict | None:
        """The LFS record, its oid under ``oid_key`` (``sha256`` in repo info, ``oid`` in tree listings)."""
        if self.sha256 is None:
            return None
        return {oid_key: self.sha256, "size": self.size, "pointerSize": self.pointer_size}

    def sibling(self, blobs: bool) -> dict:
        """The entry of the repo info's ``siblings``; sizes, blob id and LFS record with ``blobs``."""
        if not blobs:
            return {"rfilename": self.path}
        entry = {"rfilename": self.path, "size": self.size, "blobId": self.blob_id}
        return entry | ({"lfs": self.lfs("sha256")} if self.sha256 else {})

    def tree_entry(self) -> dict:
        """The entry of a tree listing (``/api/models/<repo>/tree/<rev>``)."""
        entry = {"type": "file", "oid": self.blob_id, "size": self.size, "path": self.path}
        return entry | ({"lfs": self.lfs("oid")} if self.sha256 else {})


def index_file(path: str, location: Path) -> HubFile:
    """``location`` recorded as the hub records the file ``path`` of a repository."""
    size = location.stat().st_size
    if not is_lfs(path):
        return HubFile(path, location, size, _digest(location, hashlib.sha1(b"blob %d\0" % size)))
    sha256 = _digest(location, hashlib.sha256())
    pointer = lfs_pointer(sha256, size)
    return HubFile(path, location, size, git_blob_id(pointer), sha256, len(pointer))


@dataclass(frozen=True)
class HubRepo:
    """One repository at its one commit.

    Attributes
    ----------
    repo_id : str
        ``owner/name``.
    commit : str
        40 hex digits: the sha1 of the sorted file names and their blob ids.
    files : dict
        Repository-relative path -> :class:`HubFile`.
    """

    repo_id: str
    commit: str
    files: dict[str, HubFile] = field(compare=False)


def index_repo(repo_id: str, folder: Path) -> HubRepo:
    """Every file under ``folder`` as one repository ``repo_id`` at a deterministic commit."""
    files = {}
    for location in sorted(path for path in folder.rglob("*") if path.is_file()):
        relative = location.relative_to(folder).as_posix()
        files[relative] = index_file(relative, location)
    listing = "".join(f"{path}\0{entry.blob_id}\n" for path, entry in files.items())
    return HubRepo(repo_id, hashlib.sha1(listing.encode()).hexdigest(), files)


@dataclass
class Reply:
    """What the handler sends: a status, headers and a body (bytes, or a file streamed from disk)."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Path = b""

    @property
    def length(self) -> int:
        return self.body.stat().st_size if isinstance(self.body, Path) else len(self.body)


def _json(status: int, payload, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, {"Content-Type": "application/json", **(headers or {})}, json.dumps(payload).encode())


def _hub_error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> Reply:
    """An error as the hub answers it: ``X-Error-Code`` and ``X-Error-Message`` (which huggingface_hub
    turns into RepositoryNotFoundError, RevisionNotFoundError, ...), and a JSON body."""
    return _json(status, {"error": message}, {"X-Error-Code": code, "X-Error-Message": message, **(headers or {})})


NOT_FOUND = Reply(404, {"Content-Type": "text/plain"}, b"not found\n")


class Site:
    """What the two origins answer; the HTTP handler only sends its :class:`Reply`.

    Parameters
    ----------
    serve_root : Path
        Plain files, as ``<host>/<path>``.
    hub_root : Path
        Hub repositories, as ``<owner>/<name>/``.
    gated : mapping
        Repository id -> the token its files need (``Authorization: Bearer <token>``).
    """

    def __init__(self, serve_root: Path, hub_root: Path, gated: Mapping[str, str]):
        self.serve_root, self.hub_root = Path(serve_root).resolve(), Path(hub_root).resolve()
        self.gated = dict(gated)
        self.cdn_base = ""
        self._secret = secrets.token_bytes(32)
        self._repos: dict[str, HubRepo] = {}
        self._lock = threading.Lock()

    def repo(self, repo_id: str) -> HubRepo | None:
        """The repository ``repo_id`` (read at its first request), or None when no folder holds it."""
        parts = repo_id.split("/")
        if len(parts) != 2 or not all(NAME.match(part) and part not in (".", "..") for part in parts):
            return None
        with self._lock:
            if repo_id not in self._repos:
                folder = self.hub_root.joinpath(*parts)
                if not folder.is_dir():
                    return None
                self._repos[repo_id] = index_repo(repo_id, folder)
            return self._repos[repo_id]

    def repo_ids(self) -> list[str]:
        """Every ``owner/name`` folder under the hub root."""

        def folders(parent: Path) -> list[Path]:  # hidden ones: a writer's unfinished temporary folders
            return sorted(p for p in parent.iterdir() if p.is_dir() and not p.name.startswith("."))

        owners = folders(self.hub_root) if self.hub_root.is_dir() else []
        return [f"{owner.name}/{name.name}" for owner in owners for name in folders(owner)]

    def answer(self, raw_path: str, authorization: str | None) -> Reply:
        """The main origin: ``/hub/...`` is the hub, anything else a plain file under the serve root."""
        url = urlsplit(raw_path)
        parts = [unquote(part) for part in url.path.split("/") if part]
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        if parts[:1] == ["hub"]:
            return self.hub(parts[1:], query, authorization)
        return self.plain_file(parts)

    def plain_file(self, parts: list[str]) -> Reply:
        """``serve_root/<parts>``: 404 when missing, a folder, or outside the root."""
        target = self.serve_root.joinpath(*parts).resolve() if parts else self.serve_root
        if not target.is_relative_to(self.serve_root) or not target.is_file():
            return NOT_FOUND
        return Reply(200, {"Content-Type": "application/octet-stream"}, target)

    def hub(self, parts: list[str], query: Mapping[str, str], authorization: str | None) -> Reply:
        """The hub's routes, ``parts`` the path after ``/hub``."""
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo_id, rest = "/".join(parts[2:4]), parts[4:]
            if not rest:
                return self.model_info(repo_id, "main", query)
            if rest[0] == "revision" and len(rest) == 2:
                return self.model_info(repo_id, rest[1], query)
            if rest[0] == "tree" and len(rest) >= 2:
                return self.tree(repo_id, rest[1], "/".join(rest[2:]))
        elif len(parts) >= 5 and parts[2] == "resolve":
            return self.resolve(f"{parts[0]}/{parts[1]}", parts[3], "/".join(parts[4:]), authorization)
        return _hub_error(404, "RepoNotFound", "Repository not found")

    def at_revision(self, repo_id: str, revision: str) -> HubRepo | Reply:
        """The repository when ``revision`` is ``main`` or its commit; else the hub's 404."""
        repo = self.repo(repo_id)
        if repo is None:
            return _hub_error(404, "RepoNotFound", "Repository not found")
        if revision not in ("main", repo.commit):
            return _hub_error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return repo

    def model_info(self, repo_id: str, revision: str, query: Mapping[str, str]) -> Reply:
        """``HfApi.model_info``: the commit and the files, with their hashes when ``blobs=true``."""
        repo = self.at_revision(repo_id, revision)
        if isinstance(repo, Reply):
            return repo
        blobs = query.get("blobs", "").lower() in ("1", "true")
        return _json(
            200,
            {
                "_id": hashlib.sha1(repo_id.encode()).hexdigest()[:24],
                "id": repo_id,
                "modelId": repo_id,
                "author": repo_id.split("/")[0],
                "sha": repo.commit,
                "lastModified": LAST_MODIFIED,
                "createdAt": LAST_MODIFIED,
                "private": False,
                "disabled": False,
                "gated": "manual" if repo_id in self.gated else False,
                "tags": [],
                "downloads": 0,
                "likes": 0,
                "siblings": [entry.sibling(blobs) for entry in repo.files.values()],
            },
        )

    def tree(self, repo_id: str, revision: str, folder: str) -> Reply:
        """``HfApi.list_repo_tree``: every file under ``folder``, recursively, on one page."""
        repo = self.at_revision(repo_id, revision)
        if isinstance(repo, Reply):
            return repo
        prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
        entries = [entry.tree_entry() for path, entry in repo.files.items() if path.startswith(prefix)]
        if prefix and not entries:
            return _hub_error(404, "EntryNotFound", f"{folder} does not exist on {revision}")
        return _json(200, entries)

    def gate(self, repo_id: str, authorization: str | None) -> Reply | None:
        """The hub's answer to a gated repository's file without the right token (None: let through)."""
        token = self.gated.get(repo_id)
        if token is None or (authorization or "") == f"Bearer {token}":
            return None
        if not authorization:
            message = f"Access to model {repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in."
            return _hub_error(401, "GatedRepo", message)
        message = f"Access to model {repo_id} is restricted and you are not in the authorized list. Visit https://huggingface.co/{repo_id} to ask for access."
        return _hub_error(403, "GatedRepo", message)

    def resolve(self, repo_id: str, revision: str, path: str, authorization: str | None) -> Reply:
        """``/<repo>/resolve/<rev>/<path>``: a plain file's bytes, or a redirect of an LFS file to the CDN."""
        repo = self.at_revision(repo_id, revision)
        if isinstance(repo, Reply):
            return repo
        refused = self.gate(repo_id, authorization)
        if refused is not None:
            return refused
        commit = {"X-Repo-Commit": repo.commit}
        entry = repo.files.get(path)
        if entry is None:
            return _hub_error(404, "EntryNotFound", "Entry not found", commit)
        if entry.sha256 is None:
            return Reply(
                200,
                {**commit, "ETag": f'"{entry.blob_id}"', "Content-Type": "application/octet-stream"},
                entry.location,
            )
        signature = self.sign(repo_id, repo.commit, path)
        location = f"{self.cdn_base}/{repo_id}/{repo.commit}/{quote(path)}?Signature={signature}"
        return Reply(
            302,
            {
                **commit,
                "Location": location,
                "ETag": f'"{entry.blob_id}"',
                "X-Linked-Etag": f'"{entry.sha256}"',
                "X-Linked-Size": str(entry.size),
            },
        )

    def sign(self, repo_id: str, commit: str, path: str) -> str:
        """The CDN URL's signature: only a URL the hub handed out (past the gate) downloads."""
        return hmac.new(self._secret, f"{repo_id}/{commit}/{path}".encode(), hashlib.sha256).hexdigest()

    def cdn(self, raw_path: str, authorization: str | None) -> Reply:
        """The CDN origin: ``/<owner>/<name>/<commit>/<path>?Signature=...``, an LFS file's bytes."""
        url = urlsplit(raw_path)
        parts = [unquote(part) for part in url.path.split("/") if part]
        signature = parse_qs(url.query).get("Signature", [""])[-1]
        if len(parts) < 4:
            return NOT_FOUND
        repo_id, commit, path = "/".join(parts[:2]), parts[2], "/".join(parts[3:])
        if not hmac.compare_digest(signature, self.sign(repo_id, commit, path)):
            return Reply(403, {"Content-Type": "text/plain"}, b"bad signature\n")
        repo = self.repo(repo_id)
        entry = repo.files.get(path) if repo is not None and repo.commit == commit else None
        if entry is None:
            return NOT_FOUND
        return Reply(200, {"ETag": f'"{entry.sha256}"', "Content-Type": "application/octet-stream"}, entry.location)


class _Handler(BaseHTTPRequestHandler):
    """Sends what the server's ``answer`` replies, for GET and HEAD."""

    server: _Server

    def do_GET(self):
        self._send(with_body=True)

    def do_HEAD(self):
        self._send(with_body=False)

    def _send(self, with_body: bool) -> None:
        reply = self.server.answer(self.path, self.headers.get("Authorization"))
        self.send_response(reply.status)
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(reply.length))
        self.end_headers()
        if not with_body:
            return
        if isinstance(reply.body, Path):
            with open(reply.body, "rb") as handle:
                shutil.copyfileobj(handle, self.wfile, CHUNK_BYTES)
        else:
            self.wfile.write(reply.body)

    def log_message(self, format, *args):
        if self.server.log is not None:
            self.server.log(f"{self.server.url} {format % args}")


class _Server(ThreadingHTTPServer):
    """One origin on 127.0.0.1 at a port the OS picks."""

    daemon_threads = True

    def __init__(self, answer: Callable[[str, str | None], Reply], log: Callable[[str], None] | None):
        self.answer, self.log = answer, log
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request, client_address) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that hung up (a probe, a cancelled download)
        if self.log is None:
            super().handle_error(request, client_address)  # stderr: a bug here must not pass silently
        else:
            self.log(traceback.format_exc())


class LoopbackServer:
    """The rehearsal's downloads on loopback: a mirror of plain files and a Hugging Face hub.

    Parameters
    ----------
    serve_root : path-like
        Files served as ``{mirror}/<host>/<path>`` from ``serve_root/<host>/<path>``.
    hub_root : path-like
        Repositories ``hub_root/<owner>/<name>/``, each at one commit (:attr:`commits`).
    gated : mapping, optional
        Repository id -> token: its files answer the hub's 401 (no token) or 403 (another token)
        unless the request carries ``Authorization: Bearer <token>`` (``HF_TOKEN`` for huggingface_hub).
    log : callable, optional
        Receives one line per request (and a handler's traceback); by default nothing is logged.

    Examples
    --------
    >>> with LoopbackServer("serve", "hub") as server:  # doctest: +SKIP
    ...     os.environ["HF_ENDPOINT"] = server.hub_endpoint
    ...     fetch_source(source, mirror=server.mirror)
    """

    def __init__(
        self, serve_root, hub_root, gated: Mapping[str, str] | None = None, log: Callable[[str], None] | None = None
    ):
        self.site = Site(Path(serve_root), Path(hub_root), gated or {})
        self.log = log
        self._servers: list[_Server] = []
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> LoopbackServer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        """Start the main origin and the CDN origin, each in a daemon thread."""
        main, cdn = _Server(self.site.answer, self.log), _Server(self.site.cdn, self.log)
        self.site.cdn_base = cdn.url
        for server in (main, cdn):
            thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
            thread.start()
            self._servers.append(server)
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop both origins; their ports close."""
        for server, thread in zip(self._servers, self._threads):
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
        self._servers, self._threads = [], []

    @property
    def mirror(self) -> str:
        """The base URL for ``fetch.mirror``."""
        if not self._servers:
            raise RuntimeError("the loopback server is not running")
        return self._servers[0].url

    @property
    def hub_endpoint(self) -> str:
        """The base URL for ``HF_ENDPOINT``."""
        return f"{self.mirror}/hub"

    def commit(self, repo_id: str) -> str:
        """The commit ``repo_id`` is served at (its files are read and hashed at the first call)."""
        repo = self.site.repo(repo_id)
        if repo is None:
            raise KeyError(f"{repo_id}: no folder {self.site.hub_root / repo_id}")
        return repo.commit

    @property
    def commits(self) -> dict[str, str]:
        """Every repository under the hub root -> its commit."""
        return {repo_id: self.commit(repo_id) for repo_id in self.site.repo_ids()}
