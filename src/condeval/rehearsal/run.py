"""The rehearsal, put together: data and checkpoints written, served on loopback, the paper DAG run on them.

``rehearse(workdir)`` (``tools/rehearse.py``, ``make rehearse``):

1. :func:`prepare` writes the raw data (:mod:`condeval.rehearsal.data`: the manual sources into
   ``workdir`` at the config's paths, the HTTP sources' files under ``workdir/.rehearsal/serve``) and the
   hub repositories (:mod:`condeval.rehearsal.models`, ``workdir/.rehearsal/hub``), skipping both when
   a stamp says they were written for the same seed and config and every file is still there;
2. a :class:`~condeval.rehearsal.serve.LoopbackServer` serves them, the catalogue's gated repositories
   only to the token :data:`TOKEN`; :func:`rehearsal_catalogue` replaces the catalogue's pins by what it
   serves (each pinned HTTP file's sha256 and size, each pinned repository's commit; what the catalogue
   leaves unpinned stays so, and its first fetch locks it) and :func:`write_rehearsal_config` points
   ``fetch.sources``, ``fetch.lock`` (inside ``workdir``) and ``fetch.mirror`` at it;
3. Snakemake runs the paper config's targets in ``workdir`` (:func:`snakemake_command`) with
   ``HF_ENDPOINT`` on the server and ``HF_TOKEN`` set, so that the paper config's own fetch rules bring
   everything in, then builds the report.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from condeval.core.fetch import read_catalog, resolve_sources
from condeval.core.io import atomic_path, files_sha256
from condeval.rehearsal.serve import LoopbackServer

__all__ = [
    "CONFIGS",
    "DEFAULT_TARGETS",
    "Prepared",
    "TOKEN",
    "gated_repositories",
    "merged_config",
    "prepare",
    "rehearsal_catalogue",
    "rehearsal_environment",
    "rehearse",
    "snakemake_command",
    "write_rehearsal_catalogue",
    "write_rehearsal_config",
]

REPOSITORY = Path(__file__).resolve().parents[3]
CATALOGUE = Path("config/sources.yaml")
SOURCES_SCHEMA = Path("workflow/schemas/sources.schema.yaml")
CONFIGS = (Path("config/paper.yaml"), Path("config/allow_pickles.yaml"), Path("config/rehearsal.yaml"))
DEFAULT_TARGETS = ("all", "ablations", "crel_i2t_num_z0", "scaling")
#: The token the loopback hub asks for the catalogue's gated repositories (HF_TOKEN in the rehearsal's jobs).
TOKEN = "hf_rehearsal"
STATE = ".rehearsal"  # inside the work folder: served files, hub repositories, catalogue, overlay, HF home
CHUNK_BYTES = 1 << 20


class _PlainDumper(yaml.SafeDumper):
    """YAML without anchors: the catalogue's shared ``ignore`` lists are written out at each use."""

    def ignore_aliases(self, data) -> bool:
        return True


def _write_yaml(path: Path, payload: Mapping) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(yaml.dump(dict(payload), Dumper=_PlainDumper, sort_keys=False))
    return path


def _deep_merge(base: dict, overlay: Mapping) -> dict:
    """``overlay`` laid over ``base`` as Snakemake merges config files: mappings key by key, the rest replaced."""
    for key, value in overlay.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def merged_config(paths: Iterable[str | os.PathLike]) -> dict:
    """The config Snakemake sees for ``--configfile <paths>``: each file laid over the ones before it."""
    merged: dict = {}
    for path in paths:
        _deep_merge(merged, yaml.safe_load(Path(path).read_text()) or {})
    return merged


def file_pin(path: str | os.PathLike) -> tuple[str, int]:
    """The sha256 and size of a file, as the catalogue pins a download."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def rehearsal_catalogue(catalogue: Mapping, served: Mapping[str, Path], commits: Mapping[str, str]) -> dict:
    """The catalogue pinned to what the rehearsal serves.

    Parameters
    ----------
    catalogue : mapping
        The parsed ``config/sources.yaml``.
    served : mapping
        URL -> the file served for it (under ``fetch.mirror``).
    commits : mapping
        Hub repository id -> the commit the loopback hub serves it at.

    Returns
    -------
    dict
        A copy in which each pinned HTTP item whose URL is served has that file's ``sha256`` and ``size``,
        and each pinned hub item whose repository is served has its commit as ``revision``; unpinned items,
        every URL, repository, key and other entry as they were.
    """
    pinned = copy.deepcopy(dict(catalogue))
    for entry in pinned["sources"].values():
        for item in entry.get("http", []):
            if item["url"] in served and item.get("sha256"):
                item["sha256"], item["size"] = file_pin(served[item["url"]])
        for item in entry.get("hub", []):
            if item["repo"] in commits and item.get("revision"):
                item["revision"] = commits[item["repo"]]
    return pinned


def gated_repositories(catalogue: Mapping) -> list[str]:
    """The hub repositories the catalogue marks ``gated``."""
    return [
        item["repo"] for entry in catalogue["sources"].values() for item in entry.get("hub", []) if item.get("gated")
    ]


def write_rehearsal_catalogue(
    workdir: str | os.PathLike,
    served: Mapping[str, Path],
    commits: Mapping[str, str],
    catalogue_path: str | os.PathLike = REPOSITORY / CATALOGUE,
) -> Path:
    """:func:`rehearsal_catalogue` of ``catalogue_path`` written to ``workdir/.rehearsal/sources.yaml``,
    checked against the catalogue schema; its path."""
    catalogue = read_catalog(catalogue_path, REPOSITORY / SOURCES_SCHEMA)
    target = _write_yaml(Path(workdir) / STATE / "sources.yaml", rehearsal_catalogue(catalogue, served, commits))
    read_catalog(target, REPOSITORY / SOURCES_SCHEMA)  # a pin of the wrong form fails here, not in Snakemake
    return target


def write_rehearsal_config(workdir: str | os.PathLike, catalogue_path: str | os.PathLike, mirror: str) -> Path:
    """A config overlay ``fetch: {sources: <catalogue>, lock: <workdir/.rehearsal/sources.lock>, mirror:
    <mirror>}`` in ``workdir/.rehearsal`` (absolute paths).

    fetch.smk joins ``fetch.sources`` and ``fetch.lock`` to the repository's folder; an absolute path
    survives that join, so the rehearsal's locks never land in the repository's. The lock folder starts
    empty: the served commits follow the seed.
    """
    lock = (Path(workdir) / STATE / "sources.lock").resolve()
    shutil.rmtree(lock, ignore_errors=True)
    overlay = {"fetch": {"sources": str(Path(catalogue_path).resolve()), "lock": str(lock), "mirror": mirror}}
    return _write_yaml(Path(workdir) / STATE / "fetch.yaml", overlay)


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` wrote.

    Attributes
    ----------
    workdir : Path
        The run's folder (absolute), holding the manual sources at the config's paths.
    serve_root, hub_root : Path
        The HTTP sources' files (``<host>/<path>``) and the hub repositories (``<owner>/<name>/``).
    served : dict
        URL -> served file.
    config : dict
        The merged paper + trust pickles + rehearsal config.
    """

    workdir: Path
    serve_root: Path
    hub_root: Path
    served: dict[str, Path]
    config: dict


def _fingerprint(payload) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _read_stamp(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _write_stamp(path: Path, stamp: Mapping) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(stamp, indent=1, sort_keys=True))


def _manual_paths(config: Mapping, workdir: Path) -> list[Path]:
    """Every path the catalogue's manual sources of ``config`` write, inside ``workdir``."""
    catalogue = read_catalog(REPOSITORY / CATALOGUE)
    manual = [source for source in resolve_sources(catalogue, config) if source.kind == "manual"]
    return [workdir / path for source in manual for path in (source.checked or source.outputs)]


def _data(config: Mapping, workdir: Path, serve_root: Path, seed: int) -> dict[str, Path]:
    """The raw data written for ``seed`` and ``config``: from the stamp when every file is there, else anew."""
    from condeval.rehearsal.data import write_rehearsal_data

    stamp_path = workdir / STATE / "data.json"
    stamp = _read_stamp(stamp_path)
    writers = [Path(__file__).with_name(name) for name in ("data.py", "stanza_models.py")]
    key = {"seed": seed, "config": _fingerprint(config), "writers": files_sha256(writers)}  # new code, new data
    if stamp and {k: stamp.get(k) for k in key} == key:
        served = {url: Path(path) for url, path in stamp["served"].items()}
        if all(path.is_file() for path in served.values()) and all(p.exists() for p in _manual_paths(config, workdir)):
            return served
    served = {url: Path(path) for url, path in write_rehearsal_data(config, workdir, serve_root, seed=seed).items()}
    _write_stamp(stamp_path, key | {"served": {url: str(path) for url, path in served.items()}})
    return served


def _hub_repos(hub_root: Path, seed: int) -> list[str]:
    """Every repository of the catalogue under ``hub_root``, written for ``seed``.

    A repository the stamp lists for ``seed`` and this ``models.py`` is kept; any other folder (another
    seed's, older code's) is written anew. The stamp grows after each repository, so an interrupted write loses only the one in hand.
    """
    from condeval.rehearsal.models import catalogue_repos, write_hub_repos

    repos = catalogue_repos(REPOSITORY / CATALOGUE)
    stamp_path = hub_root.parent / "hub.json"
    stamp = _read_stamp(stamp_path) or {}
    writer = files_sha256([Path(__file__).with_name("models.py")])  # a repository of older code is written anew
    written = set(stamp.get("repos", [])) if (stamp.get("seed"), stamp.get("writer")) == (seed, writer) else set()
    for repo in repos:
        if repo in written and (hub_root / repo).is_dir():
            continue
        shutil.rmtree(hub_root / repo, ignore_errors=True)  # write_hub_repos keeps any folder it finds
        write_hub_repos(hub_root, repos=[repo], seed=seed)
        written.add(repo)
        _write_stamp(stamp_path, {"seed": seed, "writer": writer, "repos": sorted(written)})
    return repos


def prepare(workdir: str | os.PathLike, seed: int = 0) -> Prepared:
    """Write the rehearsal's raw data and hub repositories for ``workdir`` (what exists is kept).

    Parameters
    ----------
    workdir : path-like
        The run's folder; its ``.rehearsal/`` holds what is served.
    seed : int
        Seeds every generated file; another seed rewrites everything.
    """
    workdir = Path(workdir).resolve()
    state = workdir / STATE
    config = merged_config(REPOSITORY / path for path in CONFIGS)
    served = _data(config, workdir, state / "serve", seed)
    _hub_repos(state / "hub", seed)
    return Prepared(workdir, state / "serve", state / "hub", served, config)


def snakemake_command(
    workdir: str | os.PathLike,
    overlay: str | os.PathLike,
    targets: Sequence[str] = DEFAULT_TARGETS,
    cores: int = 2,
    dry_run: bool = False,
    report: str | os.PathLike | None = None,
    repository: Path = REPOSITORY,
    extra: Sequence[str] = (),
) -> list[str]:
    """The Snakemake command of the rehearsal: the repository's Snakefile run in ``workdir`` on the paper
    config, the trust pickles, the rehearsal overlay and ``overlay`` (the fetch section), in that order;
    ``extra`` arguments (``--keep-going``...) before the config files."""
    configs = [str(repository / path) for path in CONFIGS] + [str(overlay)]
    command = [
        sys.executable,
        "-m",
        "snakemake",
        *targets,
        "-s",
        str(repository / "workflow/Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        str(cores),
        *extra,
        "--configfile",
        *configs,
    ]
    if dry_run:
        command.append("--dry-run")
    if report is not None:
        command += ["--report", str(report), "--report-after-run"]  # one DAG for the run and its report
    return command


def rehearsal_environment(
    workdir: str | os.PathLike, hub_endpoint: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default ``os.environ``) with the hub on loopback and its token, Hugging Face's files inside ``workdir`` and the
    repository's CellProfiler (``make cellprofiler``) first on PATH, where the paper config looks for it."""
    home = Path(workdir) / STATE / "hf-home"
    environment = dict(os.environ if base is None else base)
    environment.pop("HF_HUB_OFFLINE", None)  # the fetch rules must reach the loopback hub
    program = REPOSITORY / ".cellprofiler" / "bin" / "cellprofiler"  # `make cellprofiler`'s
    if program.is_file():  # a folder holding it alone: the venv's own python must not shadow the jobs'
        bin_dir = Path(workdir) / STATE / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        (bin_dir / "cellprofiler").unlink(missing_ok=True)
        (bin_dir / "cellprofiler").symlink_to(program)
        environment["PATH"] = f"{bin_dir}{os.pathsep}{environment.get('PATH', '')}"
    return environment | {
        "HF_TOKEN": TOKEN,
        "HF_ENDPOINT": hub_endpoint,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def _serve_until_interrupted(server: LoopbackServer, overlay: Path, command: Sequence[str]) -> int:
    """``--serve-only``: say how to use the server, then serve until Ctrl-C."""
    print(f"mirror: {server.mirror}\nHF_ENDPOINT={server.hub_endpoint}\noverlay: {overlay}")
    print("run: HF_ENDPOINT=" + server.hub_endpoint + " " + " ".join(command))
    print("serving; Ctrl-C stops", flush=True)
    try:
        while True:  # short sleeps: a Ctrl-C the OS hands to a server thread runs at the next wake-up
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    return 0


def rehearse(
    workdir: str | os.PathLike,
    seed: int = 0,
    cores: int = 2,
    targets: Sequence[str] = DEFAULT_TARGETS,
    dry_run: bool = False,
    serve_only: bool = False,
    extra: Sequence[str] = (),
) -> int:
    """Prepare, serve, pin, run Snakemake and build the report; Snakemake's exit status.

    Parameters
    ----------
    workdir : path-like
        The run's folder (Snakemake's ``-d``).
    seed : int
        Seeds the written data and checkpoints.
    cores : int
        Snakemake's ``--cores``.
    targets : sequence of str
        Snakemake's targets.
    dry_run : bool
        ``--dry-run``, and no report.
    serve_only : bool
        Prepare and serve until interrupted; Snakemake is not run.
    extra : sequence of str
        More arguments for Snakemake (``--keep-going``, ``--forcerun RULE``...).
    """
    started = time.monotonic()
    prepared = prepare(workdir, seed)
    gated = gated_repositories(read_catalog(REPOSITORY / CATALOGUE))
    with LoopbackServer(prepared.serve_root, prepared.hub_root, gated=dict.fromkeys(gated, TOKEN)) as server:
        catalogue = write_rehearsal_catalogue(prepared.workdir, prepared.served, server.commits)
        overlay = write_rehearsal_config(prepared.workdir, catalogue, server.mirror)
        report = None if dry_run else prepared.workdir / "reports" / "report.html"
        command = snakemake_command(prepared.workdir, overlay, targets, cores, dry_run, report, extra=extra)
        if serve_only:
            return _serve_until_interrupted(server, overlay, command)
        if report is not None:
            report.parent.mkdir(parents=True, exist_ok=True)  # Snakemake's --report does not make it
        status = subprocess.run(command, env=rehearsal_environment(prepared.workdir, server.hub_endpoint)).returncode
    print(f"rehearsal: snakemake exited {status} after {time.monotonic() - started:.0f} s wall", flush=True)
    return status
