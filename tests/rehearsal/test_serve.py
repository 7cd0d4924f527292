"""The rehearsal's loopback server through the project's own fetch code (condeval.core.fetch), and the
catalogue and config overlay that point the paper config's fetch rules at it (127.0.0.1 only)."""

import copy
import hashlib
import http.client
import os
import re
import shutil
import subprocess
import sys
import types
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import yaml
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from safetensors.numpy import save as safetensors_bytes

from condeval.core.fetch import FetchError, fetch_source, preflight, read_catalog, resolve_sources
from condeval.rehearsal.run import (
    CONFIGS,
    TOKEN,
    file_pin,
    merged_config,
    rehearsal_catalogue,
    rehearsal_environment,
    snakemake_command,
    write_rehearsal_catalogue,
    write_rehearsal_config,
)
from condeval.rehearsal.serve import LoopbackServer, git_blob_id, is_lfs, lfs_pointer

REPO = Path(__file__).resolve().parents[2]
HOST = "images.example.org"
RECORDS = b'[{"image": "a.jpg", "caption": "a red cube"}]'
REPO_ID = "org/tiny-clip"
HUB_FILES = {
    "config.json": b'{"model_type": "clip", "hidden_size": 8}',
    "tokenizer.json": b'{"version": "1.0"}',
    "model.safetensors": safetensors_bytes({"weight": np.arange(12, dtype=np.float32).reshape(3, 4)}),
    "flax_model.msgpack": b"\x81\xa6weight\xc4\x00",
    "text/vocab.txt": b"a\nred\ncube\n",
}


def _quiet(message: str) -> None:
    pass


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def roots(tmp_path):
    """A served file under ``serve/<HOST>/`` and one hub repository under ``hub/org/tiny-clip/``."""
    serve, hub = tmp_path / "serve", tmp_path / "hub"
    (serve / HOST / "v1").mkdir(parents=True)
    (serve / HOST / "v1" / "records.json").write_bytes(RECORDS)
    for name, data in HUB_FILES.items():
        (hub / REPO_ID / name).parent.mkdir(parents=True, exist_ok=True)
        (hub / REPO_ID / name).write_bytes(data)
    (tmp_path / "secret.txt").write_bytes(b"outside the served root")
    return serve, hub


@pytest.fixture
def server(roots, monkeypatch):
    """The loopback server of ``roots``, ``HF_ENDPOINT`` on its hub; stopped after the test."""
    with LoopbackServer(*roots) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.hub_endpoint)
        yield running


def _http_source(tmp_path, sha256, size=None, name="records"):
    item = {"url": f"https://{HOST}/v1/records.json", "sha256": sha256, "to": "crc.data.records"}
    if size is not None:
        item["size"] = size
    config = {"crc": {"data": {"records": str(tmp_path / "data/records.json")}}}
    return resolve_sources({"sources": {name: {"about": "records", "http": [item]}}}, config)[0]


def _hub_source(tmp_path, revision, name="clip", **patterns):
    item = {"repo": REPO_ID, "revision": revision, "to": "encoders.clip.path", **patterns}
    config = {"encoders": {"clip": {"path": str(tmp_path / "models/clip")}}}
    return resolve_sources({"sources": {name: {"about": "a tiny CLIP", "hub": [item]}}}, config)[0]


def _files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


# Plain files


def _get(url: str, method: str = "GET") -> tuple[int, dict, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method)) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), b""


def test_a_served_file_answers_get_and_head_with_its_length(server):
    status, headers, body = _get(f"{server.mirror}/{HOST}/v1/records.json")
    assert (status, body, int(headers["Content-Length"])) == (200, RECORDS, len(RECORDS))
    status, headers, body = _get(f"{server.mirror}/{HOST}/v1/records.json", method="HEAD")
    assert (status, body, int(headers["Content-Length"])) == (200, b"", len(RECORDS))


@pytest.mark.parametrize(
    "path",
    [
        f"/{HOST}/v1/missing.json",
        f"/{HOST}/v1",
        f"/{HOST}/../../secret.txt",
        f"/{HOST}/%2e%2e/%2e%2e/secret.txt",
        "/%2Fetc%2Fpasswd",
    ],
)
def test_a_missing_file_a_folder_or_a_path_outside_the_root_is_404(server, path):
    connection = http.client.HTTPConnection(server.mirror.removeprefix("http://"))
    connection.request("GET", path)  # sent as written: urllib would not keep the dots
    assert connection.getresponse().status == 404
    connection.close()


def test_an_http_source_fetched_through_the_mirror_lands_with_the_served_bytes(server, tmp_path):
    fetch_source(_http_source(tmp_path, _sha(RECORDS), len(RECORDS)), mirror=server.mirror, log=_quiet)
    assert _files(tmp_path / "data") == {"records.json": RECORDS}


def test_a_served_file_whose_sha256_differs_from_the_pin_is_refused_and_nothing_kept(server, tmp_path):
    with pytest.raises(
        FetchError, match=f"records: .*records.json has sha256 {_sha(RECORDS)}, the catalogue pins 0{{64}}"
    ):
        fetch_source(_http_source(tmp_path, "0" * 64), mirror=server.mirror, log=_quiet)
    assert list((tmp_path / "data").iterdir()) == []


# The hub


def test_files_are_recorded_as_the_hub_records_them(roots):
    """LFS by the hub's default .gitattributes; git blob ids of the bytes, or of the LFS pointer."""
    assert [name for name in HUB_FILES if is_lfs(name)] == ["model.safetensors", "flax_model.msgpack"]
    assert all(
        is_lfs(name)
        for name in ("a/b.bin", "spiece.model", "x.pt", "x.pth", "x.ckpt", "x.h5", "x.onnx", "img.png", "img.jpg")
    )
    assert not any(is_lfs(name) for name in ("a.json", "b.txt", "c.py", "README.md"))
    assert git_blob_id(b"hello\n") == "ce013625030ba8dba906f756967f9e9ca394464a"  # git hash-object
    server = LoopbackServer(*roots)
    files = server.site.repo(REPO_ID).files
    assert sorted(path for path, entry in files.items() if entry.sha256) == ["flax_model.msgpack", "model.safetensors"]
    weights = HUB_FILES["model.safetensors"]
    pointer = lfs_pointer(_sha(weights), len(weights))
    assert (
        pointer
        == f"version https://git-lfs.github.com/spec/v1\noid sha256:{_sha(weights)}\nsize {len(weights)}\n".encode()
    )
    assert files["model.safetensors"].sibling(blobs=True) == {
        "rfilename": "model.safetensors",
        "size": len(weights),
        "blobId": git_blob_id(pointer),
        "lfs": {"sha256": _sha(weights), "size": len(weights), "pointerSize": len(pointer)},
    }
    assert files["config.json"].sibling(blobs=True) == {
        "rfilename": "config.json",
        "size": len(HUB_FILES["config.json"]),
        "blobId": git_blob_id(HUB_FILES["config.json"]),
    }


def test_the_commit_is_deterministic_and_follows_the_bytes(roots, tmp_path):
    first = LoopbackServer(*roots).commit(REPO_ID)
    assert len(first) == 40 and int(first, 16) >= 0
    assert LoopbackServer(*roots).commit(REPO_ID) == first
    (roots[1] / REPO_ID / "config.json").write_bytes(b"{}")
    assert LoopbackServer(*roots).commit(REPO_ID) != first
    (roots[1] / "org/.tiny-clip.unfinished").mkdir()
    assert LoopbackServer(*roots).commits == {REPO_ID: LoopbackServer(*roots).commit(REPO_ID)}


def test_a_hub_source_at_the_served_commit_is_fetched_and_every_file_matches(roots, tmp_path, monkeypatch):
    lines = []
    with LoopbackServer(*roots, log=lines.append) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.hub_endpoint)
        fetch_source(_hub_source(tmp_path, server.commit(REPO_ID)), log=_quiet)
        mirror = server.mirror
    assert _files(tmp_path / "models/clip") == HUB_FILES  # .cache removed, nothing else
    # the LFS file went the hub's way: a 302 from /resolve, then its bytes from the other (CDN) origin
    resolve = f'{mirror} "HEAD /hub/{REPO_ID}/resolve/{server.commit(REPO_ID)}/model.safetensors HTTP/1.1" 302'
    assert any(line.startswith(resolve) for line in lines)
    assert any(
        line.startswith(f'{server.site.cdn_base} "GET /{REPO_ID}/')
        and "model.safetensors?Signature=" in line
        and '" 200 ' in line
        for line in lines
    )


def test_allow_and_ignore_patterns_are_honoured(server, tmp_path):
    commit = server.commit(REPO_ID)
    fetch_source(_hub_source(tmp_path, commit, allow=["*.json"]), log=_quiet)
    assert _files(tmp_path / "models/clip") == {k: v for k, v in HUB_FILES.items() if k.endswith(".json")}
    fetch_source(_hub_source(tmp_path, commit, ignore=["*.msgpack", "text/*"]), log=_quiet)
    assert sorted(_files(tmp_path / "models/clip")) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_a_revision_the_server_does_not_know_fails_with_a_clear_error_and_keeps_nothing(server, tmp_path):
    with pytest.raises(RevisionNotFoundError, match="Revision Not Found.*" + "f" * 40):
        fetch_source(_hub_source(tmp_path, "f" * 40), log=_quiet)
    assert list((tmp_path / "models").iterdir()) == []
    with pytest.raises(RevisionNotFoundError, match="Invalid rev id: dev"):
        from huggingface_hub import HfApi

        HfApi(endpoint=server.hub_endpoint).repo_info(REPO_ID, revision="dev")


def test_main_resolves_to_the_commit_and_an_unknown_repo_is_not_found(server):
    from huggingface_hub import HfApi

    api = HfApi(endpoint=server.hub_endpoint)
    assert api.repo_info(REPO_ID).sha == server.commit(REPO_ID)
    assert [s.rfilename for s in api.repo_info(REPO_ID).siblings] == sorted(HUB_FILES)
    with pytest.raises(RepositoryNotFoundError):
        api.repo_info("org/absent")


# Locks: what the catalogue does not pin, the first fetch locks


def test_the_first_fetch_of_unpinned_sources_writes_their_lock_and_a_second_fetch_gets_the_same_bytes(server, tmp_path):
    locks, logged = tmp_path / "locks", []
    records, clip = _http_source(tmp_path, None), _hub_source(tmp_path, None)
    fetch_source(records, mirror=server.mirror, lock_dir=locks, log=logged.append)
    fetch_source(clip, lock_dir=locks, log=logged.append)
    http_lock, hub_lock = (
        yaml.safe_load((locks / "records.yaml").read_text()),
        yaml.safe_load((locks / "clip.yaml").read_text()),
    )
    assert http_lock["http"] == [
        {"url": f"https://{HOST}/v1/records.json", "sha256": _sha(RECORDS), "size": len(RECORDS)}
    ]
    assert hub_lock["hub"][0]["revision"] == server.commit(REPO_ID)
    assert hub_lock["hub"][0]["files"] == {name: _sha(data) for name, data in HUB_FILES.items()}
    assert sum("commit it" in line for line in logged) == 2
    first = {**_files(tmp_path / "data"), **_files(tmp_path / "models")}
    shutil.rmtree(tmp_path / "data"), shutil.rmtree(tmp_path / "models")
    fetch_source(records, mirror=server.mirror, lock_dir=locks, log=_quiet)
    fetch_source(clip, lock_dir=locks, log=_quiet)
    assert {**_files(tmp_path / "data"), **_files(tmp_path / "models")} == first
    assert yaml.safe_load((locks / "clip.yaml").read_text()) == hub_lock  # a lock is written once


def test_a_changed_upstream_is_refused_naming_the_file_and_the_lock(roots, server, tmp_path):
    locks = tmp_path / "locks"
    records = _http_source(tmp_path, None)
    fetch_source(records, mirror=server.mirror, lock_dir=locks, log=_quiet)
    (roots[0] / HOST / "v1" / "records.json").write_bytes(RECORDS.replace(b"red", b"tan"))
    (tmp_path / "data/records.json").unlink()
    with pytest.raises(
        FetchError,
        match=rf"records: .*records\.json has sha256 {_sha(RECORDS.replace(b'red', b'tan'))}, {locks}/records\.yaml pins {_sha(RECORDS)}",
    ):
        fetch_source(records, mirror=server.mirror, lock_dir=locks, log=_quiet)
    assert not (tmp_path / "data/records.json").exists()
    clip = _hub_source(tmp_path, None)
    fetch_source(clip, lock_dir=locks, log=_quiet)
    lock = yaml.safe_load((locks / "clip.yaml").read_text())
    lock["hub"][0]["files"]["tokenizer.json"] = "0" * 64  # the bytes at the locked commit are not the locked ones
    (locks / "clip.yaml").write_text(yaml.safe_dump(lock))
    shutil.rmtree(tmp_path / "models/clip")
    with pytest.raises(
        FetchError, match=rf"clip: {REPO_ID}@\w+: file tokenizer\.json has sha256 \w+, {locks}/clip\.yaml locks 0{{64}}"
    ):
        fetch_source(clip, lock_dir=locks, log=_quiet)
    assert list((tmp_path / "models").iterdir()) == []


def test_a_lock_written_for_another_catalogue_entry_is_refused_by_the_fetch_and_the_preflight(server, tmp_path):
    locks = tmp_path / "locks"
    fetch_source(_hub_source(tmp_path, None), lock_dir=locks, log=_quiet)
    edited = _hub_source(tmp_path, None, allow=["*.json"])  # the entry changed since its lock was written
    message = rf"{locks}/clip\.yaml: this lock was written for another catalogue entry of source 'clip'"
    with pytest.raises(FetchError, match=message):
        fetch_source(edited, lock_dir=locks, log=_quiet)
    with pytest.raises(FetchError, match=message):
        preflight([edited], lock_dir=locks)
    preflight([_hub_source(tmp_path, None)], lock_dir=locks)  # the entry it was written for passes


def test_the_cdn_serves_only_the_urls_the_hub_signed(server):
    commit = server.commit(REPO_ID)
    base = f"{server.site.cdn_base}/{REPO_ID}/{commit}/model.safetensors"
    assert _get(f"{base}?Signature={'0' * 64}")[0] == 403
    assert (
        _get(f"{base}?Signature={server.site.sign(REPO_ID, commit, 'model.safetensors')}")[2]
        == HUB_FILES["model.safetensors"]
    )


def test_a_gated_repo_without_its_token_is_refused_naming_the_licence_page_and_with_it_lands(
    roots, tmp_path, monkeypatch
):
    with LoopbackServer(*roots, gated={REPO_ID: "hf_rehearsal"}) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.hub_endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no token saved by a login either
        monkeypatch.delenv("HF_TOKEN", raising=False)
        source = _hub_source(tmp_path, server.commit(REPO_ID), gated=True)
        licence = rf"gated: accept the licence at https://huggingface\.co/{REPO_ID} .* HF_TOKEN"
        with pytest.raises(FetchError, match=f"- clip: a tiny CLIP \\[{licence}"):
            preflight([source])  # before any job
        with pytest.raises(FetchError, match=f"clip: {REPO_ID} is {licence}"):
            fetch_source(source, log=_quiet)  # and by the hub itself, were the preflight skipped
        assert list((tmp_path / "models").iterdir()) == []
        monkeypatch.setenv("HF_TOKEN", "hf_another")
        preflight([source])
        with pytest.raises(FetchError, match="is gated"):
            fetch_source(source, log=_quiet)
        monkeypatch.setenv("HF_TOKEN", "hf_rehearsal")
        fetch_source(source, log=_quiet)
    assert _files(tmp_path / "models/clip") == HUB_FILES


# Preflight


def test_the_preflight_passes_with_the_server_up_and_names_every_source_when_it_is_down(roots, tmp_path, monkeypatch):
    with LoopbackServer(*roots) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.hub_endpoint)
        records, clip = _http_source(tmp_path, _sha(RECORDS)), _hub_source(tmp_path, server.commit(REPO_ID))
        preflight([records, clip], mirror=server.mirror)
        preflight([clip])  # the hub's own probe: HEAD {HF_ENDPOINT}/api/models/<repo>
        mirror = server.mirror
    with pytest.raises(FetchError) as refused:
        preflight([records, clip], mirror=mirror)
    message = str(refused.value)
    assert message.startswith("2 source(s)") and "- records: " in message and "- clip: " in message
    assert f"offline: {mirror} unreachable" in message


# Catalogue and overlay


def test_the_rehearsal_catalogue_replaces_exactly_the_catalogues_pins_by_what_is_served(tmp_path):
    catalogue = read_catalog(REPO / "config/sources.yaml")
    before = copy.deepcopy(catalogue)
    annotations = "http://images.cocodataset.org/annotations/annotations_trainval2014.zip"
    foil = next(item["url"] for item in catalogue["sources"]["foil_nocaps"]["http"])
    (tmp_path / "a.zip").write_bytes(b"annotations")
    (tmp_path / "foil.json").write_bytes(b"[]")
    served = {annotations: tmp_path / "a.zip", foil: tmp_path / "foil.json"}
    commits = {"openai/clip-vit-large-patch14": "a" * 40, "FacebookAI/xlm-roberta-base": "b" * 40}
    pinned = rehearsal_catalogue(catalogue, served, commits)
    assert catalogue == before  # the input is left alone
    expected = copy.deepcopy(before)
    for entry in expected["sources"].values():
        for item in entry.get("http", []):
            if item["url"] in served and item["sha256"]:
                item |= {"sha256": _sha(served[item["url"]].read_bytes()), "size": served[item["url"]].stat().st_size}
        for item in entry.get("hub", []):
            if item["revision"]:
                item["revision"] = commits.get(item["repo"], item["revision"])
    assert pinned == expected
    assert pinned["sources"]["coco2014"]["http"][0]["sha256"] == _sha(b"annotations")
    # the catalogue pins no hub revision: the rehearsal's first fetch locks each, as a lab's does
    assert pinned["sources"]["clip_vit_l14"]["hub"][0]["revision"] is None
    written = write_rehearsal_catalogue(tmp_path / "work", served, commits)  # checked against the schema
    assert read_catalog(written) == pinned


def test_the_overlay_validates_against_the_config_schema_and_its_catalogue_survives_the_join(tmp_path):
    overlay = write_rehearsal_config(tmp_path / "work", tmp_path / "work/.rehearsal/sources.yaml", "http://127.0.0.1:1")
    fetch = yaml.safe_load(overlay.read_text())
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    jsonschema.Draft202012Validator(schema).validate(fetch)
    assert fetch == {
        "fetch": {
            "sources": str(tmp_path / "work/.rehearsal/sources.yaml"),
            "mirror": "http://127.0.0.1:1",
            "lock": str(tmp_path / "work/.rehearsal/sources.lock"),
        }
    }
    assert REPO / fetch["fetch"]["sources"] == tmp_path / "work/.rehearsal/sources.yaml"  # as fetch.smk joins it


def test_config_files_merge_as_snakemake_merges_them(tmp_path):
    (tmp_path / "a.yaml").write_text("crel: {synthetic: {n: 50000, p: 38}, alphas: [0.1, 0.2]}\nfetch: {mirror: ''}\n")
    (tmp_path / "b.yaml").write_text("crel: {synthetic: {n: 3000}, alphas: [0.1]}\n")
    merged = merged_config([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    assert merged == {"crel": {"synthetic": {"n": 3000, "p": 38}, "alphas": [0.1]}, "fetch": {"mirror": ""}}


def test_the_snakemake_command_runs_the_repository_snakefile_in_the_workdir_on_every_config(tmp_path):
    command = snakemake_command(tmp_path, tmp_path / ".rehearsal/fetch.yaml", ["all", "scaling"], cores=3)
    assert command[1:5] == ["-m", "snakemake", "all", "scaling"]
    assert command[command.index("-s") + 1] == str(REPO / "workflow/Snakefile")
    assert command[command.index("-d") + 1] == str(tmp_path) and command[command.index("--cores") + 1] == "3"
    configs = command[command.index("--configfile") + 1 :]
    assert configs == [str(REPO / path) for path in CONFIGS] + [str(tmp_path / ".rehearsal/fetch.yaml")]
    report = snakemake_command(tmp_path, "o.yaml", report=tmp_path / "r.html", dry_run=True)
    assert report[-4:] == ["--dry-run", "--report", str(tmp_path / "r.html"), "--report-after-run"]
    assert report[report.index("--configfile") + 1 : report.index("--dry-run")][-1] == "o.yaml"


def test_the_environment_points_the_hub_at_the_server_and_hugging_face_into_the_workdir(tmp_path):
    environment = rehearsal_environment(tmp_path, "http://127.0.0.1:9/hub", {"HF_HUB_OFFLINE": "1", "PATH": "/bin"})
    path = environment.pop("PATH").split(os.pathsep)
    assert environment == {
        "HF_TOKEN": TOKEN,
        "HF_ENDPOINT": "http://127.0.0.1:9/hub",
        "HF_HOME": str(tmp_path / ".rehearsal/hf-home"),
        "HF_HUB_CACHE": str(tmp_path / ".rehearsal/hf-home/hub"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }
    assert path[-1] == "/bin"
    if len(path) > 1:  # the repository's CellProfiler, alone in a folder: the paper config's `cellprofiler`
        assert sorted(p.name for p in Path(path[0]).iterdir()) == ["cellprofiler"]


def test_the_cli_only_parses_its_arguments():
    result = subprocess.run(
        [str(REPO / ".venv/bin/python"), str(REPO / "tools/rehearse.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for option in ("--seed", "--cores", "--target", "--dry-run", "--serve-only"):
        assert option in result.stdout


# Orchestration (condeval.rehearsal.run), with stand-ins for the data and checkpoint writers


@pytest.fixture
def writers(monkeypatch):
    """Stand-ins for condeval.rehearsal.data and .models: every manual source's paths, one served file and
    a two-file folder per repository; each call recorded."""
    calls = {"data": [], "hub": []}

    def write_rehearsal_data(config, workdir, serve_root, seed=0):
        calls["data"].append(seed)
        catalogue = read_catalog(REPO / "config/sources.yaml")
        for source in resolve_sources(catalogue, config):
            if source.kind == "manual":
                for folder in {*source.folders, *source.checked} - set(source.files):
                    (workdir / folder).mkdir(parents=True, exist_ok=True)
                for file in source.files:
                    (workdir / file).parent.mkdir(parents=True, exist_ok=True)
                    (workdir / file).write_text(f"seed {seed}")
        served = {}
        for url in [
            f"https://{HOST}/v1/records.json",
            *(i["url"] for s in catalogue["sources"].values() for i in s.get("http", [])),
        ]:
            served[url] = serve_root / url.split("://", 1)[1]
            served[url].parent.mkdir(parents=True, exist_ok=True)
            served[url].write_bytes(RECORDS)
        return served

    def write_hub_repos(hub_root, repos=None, seed=0):
        calls["hub"] += list(repos)
        for repo in repos:
            (hub_root / repo).mkdir(parents=True, exist_ok=True)
            (hub_root / repo / "config.json").write_text(f'{{"seed": {seed}}}')
            (hub_root / repo / "model.safetensors").write_bytes(HUB_FILES["model.safetensors"])
        return {repo: hub_root / repo for repo in repos}

    def catalogue_repos(catalogue):
        return list(
            dict.fromkeys(i["repo"] for s in read_catalog(catalogue)["sources"].values() for i in s.get("hub", []))
        )

    data = types.SimpleNamespace(write_rehearsal_data=write_rehearsal_data)
    models = types.SimpleNamespace(write_hub_repos=write_hub_repos, catalogue_repos=catalogue_repos)
    monkeypatch.setitem(sys.modules, "condeval.rehearsal.data", data)
    monkeypatch.setitem(sys.modules, "condeval.rehearsal.models", models)
    return calls


def test_prepare_writes_once_and_a_rerun_rewrites_only_what_is_gone_or_of_another_seed(writers, tmp_path):
    from condeval.rehearsal.run import prepare

    prepared = prepare(tmp_path / "work")
    repos = writers["hub"][:]
    assert writers["data"] == [0] and len(repos) == len(set(repos)) > 10
    assert prepared.served[f"https://{HOST}/v1/records.json"] == prepared.serve_root / HOST / "v1/records.json"
    prepare(tmp_path / "work")
    assert writers == {"data": [0], "hub": repos}  # nothing written again
    shutil.rmtree(prepared.hub_root / repos[3])
    prepare(tmp_path / "work")
    assert writers == {"data": [0], "hub": repos + [repos[3]]}
    next(iter(prepared.served.values())).unlink()
    prepare(tmp_path / "work")
    assert writers["data"] == [0, 0]
    prepare(tmp_path / "work", seed=1)
    assert writers["data"] == [0, 0, 1] and writers["hub"] == repos + [repos[3]] + repos
    assert (prepared.hub_root / repos[0] / "config.json").read_text() == '{"seed": 1}'


@pytest.mark.slow
def test_a_dry_run_rehearsal_points_the_catalogue_at_the_server_and_plans_the_fetch_jobs(writers, tmp_path, capfd):
    """The whole glue: prepare, serve, pin, overlay and Snakemake's dry run of the paper config (3 s here)."""
    from condeval.rehearsal.run import rehearse

    assert rehearse(tmp_path / "work", targets=["all"], dry_run=True) == 0
    out = capfd.readouterr().out
    scheduled = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.MULTILINE))  # Snakemake's job counts
    assert scheduled["fetch_clip_vit_l14"] == "1" and scheduled["fetch_coco2014"] == "1"
    assert "fetch_celeba" not in scheduled  # a manual source the data writer placed
    catalogue = read_catalog(tmp_path / "work/.rehearsal/sources.yaml")
    pinned = catalogue["sources"]["coco2014"]["http"][0]
    assert (pinned["sha256"], pinned["size"]) == file_pin(
        tmp_path / "work/.rehearsal/serve/images.cocodataset.org/annotations/annotations_trainval2014.zip"
    )
    overlay = yaml.safe_load((tmp_path / "work/.rehearsal/fetch.yaml").read_text())
    assert overlay["fetch"]["sources"] == str(tmp_path / "work/.rehearsal/sources.yaml")
    assert "rehearsal: snakemake exited 0 after" in out


@pytest.mark.slow
def test_a_rehearsal_brings_a_hub_and_an_http_source_in_through_the_paper_configs_fetch_rules(writers, tmp_path):
    """Snakemake's preflight, fetch.smk's rules and their script against the server, then the report (15 s here)."""
    from condeval.rehearsal.run import rehearse

    work = tmp_path / "work"
    assert rehearse(work, targets=["fetch_clip_vit_l14", "fetch_foil_nocaps"]) == 0
    config = merged_config(REPO / path for path in CONFIGS)
    fetched = _files(work / config["encoders"]["clip"]["path"])
    assert fetched.pop(".snakemake_timestamp") == b""  # Snakemake's mark on a directory() output
    assert fetched == _files(work / ".rehearsal/hub/openai/clip-vit-large-patch14")
    assert (work / config["crc"]["data"]["foil_nocaps"]["file"]).read_bytes() == RECORDS
    assert "2 source(s) to fetch" in (work / "logs/fetch/preflight.log").read_text()
    lock = yaml.safe_load((work / ".rehearsal/sources.lock/clip_vit_l14.yaml").read_text())
    assert lock["hub"][0]["revision"] == LoopbackServer(work / ".rehearsal/serve", work / ".rehearsal/hub").commit(
        "openai/clip-vit-large-patch14"
    )  # unpinned in the catalogue: locked by its first fetch, inside the work folder
    assert (work / "reports/report.html").is_file()
