"""condeval.core.fetch against a loopback HTTP server serving small fixtures (127.0.0.1 only)."""

import hashlib
import http.server
import io
import json
import shutil
import socket
import threading
import zipfile
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import pytest

from condeval.core.fetch import (
    FetchError,
    fetch_source,
    model_parameters,
    named_by,
    preflight,
    read_catalog,
    resolve_sources,
)

REPO = Path(__file__).resolve().parents[2]

HOST = "data.example.org"  # the catalogue's host; the mirror serves it as <mirror>/<HOST>/<path>
RECORDS = json.dumps([{"image_path": "a.jpg", "caption": "a red cube"}]).encode()


class Handler(http.server.SimpleHTTPRequestHandler):
    """Files under the served folder; ``/cut/...`` promises 1,000 bytes and closes after 100."""

    def do_GET(self):
        if self.path.startswith("/cut/"):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"x" * 100)
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()

    def log_message(self, *args):
        pass


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


@pytest.fixture
def server(tmp_path):
    """A loopback server of the fixture files: its base URL; stopped after the test."""
    served = tmp_path / "served" / HOST
    served.mkdir(parents=True)
    (served / "records.json").write_bytes(RECORDS)
    (served / "images.zip").write_bytes(
        _zip({"images/a.jpg": b"jpeg-a", "images/sub/b.jpg": b"jpeg-b", "notes.txt": b"n"})
    )
    (served / "evil.zip").write_bytes(_zip({"images/a.jpg": b"ok", "images/../../escape.txt": b"gotcha"}))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(tmp_path / "served")))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join(timeout=5)


def _closed_port_url() -> str:
    """A loopback URL nothing listens on (connections are refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


CONFIG = {"crc": {"data": {"records": "data/bench/records.json", "images": "data/bench"}, "tagger": "models/stanza"}}


def _source(catalog_entry: dict, config=CONFIG, name="bench"):
    return resolve_sources({"sources": {name: {"about": "a test benchmark", **catalog_entry}}}, config)[0]


def _records_source(sha256, tmp_path, size=None):
    item = {"url": f"http://{HOST}/records.json", "sha256": sha256, "to": "crc.data.records"}
    if size is not None:
        item["size"] = size
    config = {"crc": {"data": {"records": str(tmp_path / "data/bench/records.json")}}}
    return _source({"http": [item]}, config), tmp_path / "data/bench"


def test_a_good_download_lands_with_the_pinned_bytes_and_nothing_else(server, tmp_path):
    source, folder = _records_source(_sha(RECORDS), tmp_path, size=len(RECORDS))
    fetch_source(source, mirror=server, log=lambda message: None)
    assert (folder / "records.json").read_bytes() == RECORDS
    assert [p.name for p in folder.iterdir()] == ["records.json"]  # no temporary file left beside it


def test_a_wrong_checksum_is_refused_naming_the_source_and_leaves_no_file(server, tmp_path):
    source, folder = _records_source("0" * 64, tmp_path)
    with pytest.raises(FetchError, match=r"bench: .*records\.json has sha256 " + _sha(RECORDS) + ".*pins 0{64}"):
        fetch_source(source, mirror=server)
    assert not (folder / "records.json").exists() and list(folder.iterdir()) == []


def test_an_unpinned_download_is_refused_without_a_lock_folder_and_locked_with_one(server, tmp_path):
    source, folder = _records_source(None, tmp_path)
    with pytest.raises(FetchError, match=r"bench: not pinned in the catalogue, and no lock folder .*fetch\.lock"):
        fetch_source(source, mirror=server)
    assert not folder.exists()
    fetch_source(source, mirror=server, lock_dir=tmp_path / "locks", log=lambda message: None)
    assert (folder / "records.json").read_bytes() == RECORDS
    assert _sha(RECORDS) in (tmp_path / "locks/bench.yaml").read_text()


def test_a_cut_download_leaves_no_output(server, tmp_path):
    source, folder = _records_source(_sha(b"x" * 1000), tmp_path)
    with pytest.raises(FetchError, match="bench: download of .*failed"):
        fetch_source(source, mirror=f"{server}/cut")
    assert list(folder.iterdir()) == []


def test_an_archive_folder_member_is_extracted_whole_and_only_it(server, tmp_path):
    item = {
        "url": f"http://{HOST}/images.zip",
        "sha256": _sha((tmp_path / "served" / HOST / "images.zip").read_bytes()),
        "extract": ["images/"],
        "to": "crc.data.root",
    }
    source = _source({"http": [item]}, {"crc": {"data": {"root": str(tmp_path / "out")}}})
    assert source.folders == (str(tmp_path / "out/images"),)
    fetch_source(source, mirror=server, log=lambda message: None)
    assert (tmp_path / "out/images/a.jpg").read_bytes() == b"jpeg-a" and (
        tmp_path / "out/images/sub/b.jpg"
    ).read_bytes() == b"jpeg-b"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["images"]  # notes.txt not taken, no archive left


def test_an_archive_member_climbing_out_of_its_folder_is_refused(server, tmp_path):
    item = {
        "url": f"http://{HOST}/evil.zip",
        "sha256": _sha((tmp_path / "served" / HOST / "evil.zip").read_bytes()),
        "extract": ["images/"],
        "to": "crc.data.root",
    }
    source = _source({"http": [item]}, {"crc": {"data": {"root": str(tmp_path / "out/deep")}}})
    with pytest.raises(FetchError, match=r"evil\.zip: member 'images/\.\./\.\./escape\.txt' would land outside"):
        fetch_source(source, mirror=server)
    assert not list((tmp_path / "out").rglob("*.txt")) and not (tmp_path / "out/deep/images").exists()


def _every_kind(tmp_path):
    config = {
        "crc": {
            "data": {"records": str(tmp_path / "d/records.json"), "images": str(tmp_path / "d/images")},
            "model": str(tmp_path / "m/clip"),
            "tagger": str(tmp_path / "m/stanza"),
        }
    }
    catalog = {
        "sources": {
            "records": {
                "about": "records",
                "http": [{"url": f"http://{HOST}/records.json", "sha256": _sha(RECORDS), "to": "crc.data.records"}],
            },
            "images": {
                "about": "images",
                "http": [
                    {
                        "url": f"http://{HOST}/images.zip",
                        "sha256": None,
                        "extract": ["images/"],
                        "to": "crc.data.images",
                    }
                ],
            },
            "clip": {"about": "a CLIP", "hub": [{"repo": "org/clip", "revision": "a" * 40, "to": "crc.model"}]},
            "tagger": {"about": "tagger models", "manual": "run the tagger's download", "folders": ["crc.tagger"]},
        }
    }
    return resolve_sources(catalog, config)


def test_offline_one_message_lists_every_missing_source_and_where_to_place_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", _closed_port_url())
    sources = _every_kind(tmp_path)
    with pytest.raises(FetchError) as refused:
        preflight(sources[:1], mirror=_closed_port_url(), others=sources[1:], lock_dir=tmp_path / "locks")
    message = str(refused.value)
    assert message.startswith("4 source(s) of the config are missing and cannot be fetched now")
    for source in sources:
        assert f"- {source.name}: " in message
        for path in source.outputs:
            assert path in message
    assert "offline: http://127.0.0.1:" in message and "run the tagger's download" in message


def test_online_the_preflight_refuses_only_manual_sources_and_unpinned_ones_without_a_lock_folder(
    server, tmp_path, monkeypatch
):
    monkeypatch.setenv("HF_ENDPOINT", server)  # answers 404 to the hub API: reachable
    sources = _every_kind(tmp_path)
    with pytest.raises(FetchError) as refused:
        preflight(sources, mirror=server)
    message = str(refused.value)
    assert message.startswith("2 source(s)") and "- images: " in message and "- tagger: " in message
    assert "no lock folder" in message and "- records: " not in message and "offline" not in message
    with pytest.raises(FetchError) as refused:
        preflight(sources, mirror=server, lock_dir=tmp_path / "locks")
    assert str(refused.value).startswith("1 source(s)") and "- tagger: " in str(refused.value)
    needed = [s for s in sources if s.name in ("records", "clip")]
    preflight(
        needed, mirror=server, others=[s for s in sources if s not in needed]
    )  # nothing this run needs is refused


def test_a_source_of_a_track_the_config_lacks_is_left_out_and_a_bad_key_is_named():
    catalog = {
        "sources": {
            "trust": {"about": "x", "manual": "y", "files": ["trust.data.file"]},
            "typo": {"about": "x", "manual": "y", "files": ["crc.data.recrods"]},
        }
    }
    with pytest.raises(FetchError, match="source 'typo': config key 'crc.data.recrods' is not in the config"):
        resolve_sources(catalog, CONFIG)
    del catalog["sources"]["typo"]
    assert resolve_sources(catalog, CONFIG) == []


def test_the_catalogue_is_checked_against_its_schema_naming_the_entry(tmp_path):
    schema = REPO / "workflow/schemas/sources.schema.yaml"
    assert "coco2014" in read_catalog(REPO / "config/sources.yaml", schema)["sources"]
    bad = tmp_path / "sources.yaml"
    bad.write_text(
        "sources:\n  bench:\n    about: x\n    http:\n      - {url: 'http://h/x', sha256: 'abc', to: crc.data.records}\n"
    )
    with pytest.raises(FetchError, match=r"sources\.yaml: sources\.bench\.http\.0\.sha256: 'abc' does not match"):
        read_catalog(bad, schema)


class FakeHub:
    """The hub's two calls, offline: snapshot_download writes ``served``; repo_info tells ``recorded`` hashes."""

    COMMIT = "c" * 40

    def __init__(self, served: dict[str, bytes], recorded: dict[str, bytes]):
        self.served, self.recorded, self.revisions = served, recorded, []

    def snapshot_download(self, repo_id, *, revision, local_dir, **options):
        self.revisions.append(revision)
        for name, data in self.served.items():
            (Path(local_dir) / name).write_bytes(data)
        (Path(local_dir) / ".cache").mkdir()

    def api(self, endpoint=None):
        hub = self

        class Api:
            def repo_info(self, repo_id, repo_type="model", revision=None, files_metadata=False):
                siblings = [
                    SimpleNamespace(
                        rfilename=name,
                        lfs=SimpleNamespace(sha256=_sha(data)) if name.endswith(".safetensors") else None,
                        blob_id=hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
                    )
                    for name, data in hub.recorded.items()
                ]
                return SimpleNamespace(sha=hub.COMMIT, siblings=siblings)

        return Api()


@pytest.fixture
def hub(monkeypatch):
    import huggingface_hub

    files = {"config.json": b"{}", "model.safetensors": b"weights"}
    fake = FakeHub(dict(files), files)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake.snapshot_download)
    monkeypatch.setattr(huggingface_hub, "HfApi", fake.api)
    return fake


def _hub_source(tmp_path, revision):
    config = {"encoders": {"clip": {"path": str(tmp_path / "models/clip")}}}
    return _source({"hub": [{"repo": "org/clip", "revision": revision, "to": "encoders.clip.path"}]}, config)


def test_a_hub_checkpoint_lands_at_its_pinned_commit_checked_file_by_file(hub, tmp_path):
    fetch_source(_hub_source(tmp_path, "a" * 40), log=lambda message: None)
    assert hub.revisions == ["a" * 40]
    assert sorted(p.name for p in (tmp_path / "models/clip").iterdir()) == ["config.json", "model.safetensors"]


def test_a_hub_file_that_differs_from_the_hubs_record_is_refused_and_nothing_kept(hub, tmp_path):
    hub.served["model.safetensors"] = b"tampered"
    with pytest.raises(FetchError, match="bench: org/clip@a{40} file model.safetensors does not match"):
        fetch_source(_hub_source(tmp_path, "a" * 40))
    hub.served["model.safetensors"], hub.served["config.json"] = b"weights", b"{ }"
    with pytest.raises(FetchError, match="file config.json does not match"):
        fetch_source(_hub_source(tmp_path, "a" * 40))
    assert list((tmp_path / "models").iterdir()) == []


def test_an_unpinned_hub_checkpoint_is_fetched_at_main_and_locked_then_fetched_as_locked(hub, tmp_path):
    logged = []
    fetch_source(_hub_source(tmp_path, None), lock_dir=tmp_path / "locks", log=logged.append)
    assert hub.revisions == [FakeHub.COMMIT] and any(f"at {FakeHub.COMMIT}, and locking it" in line for line in logged)
    hub.COMMIT = "d" * 40  # main moved on: the lock's commit is fetched, not main
    shutil.rmtree(tmp_path / "models/clip")
    fetch_source(_hub_source(tmp_path, None), lock_dir=tmp_path / "locks", log=logged.append)
    assert hub.revisions == ["c" * 40, "c" * 40]


def test_an_optional_source_is_left_out_when_the_config_does_not_name_its_key():
    catalog = {"sources": {"train": {"about": "x", "optional": True, "manual": "y", "files": ["crc.data.train"]}}}
    assert resolve_sources(catalog, CONFIG) == []
    with_train = {"crc": {**CONFIG["crc"], "data": {**CONFIG["crc"]["data"], "train": "data/bench/train.json"}}}
    assert resolve_sources(catalog, with_train)[0].files == ("data/bench/train.json",)
    del catalog["sources"]["train"]["optional"]
    with pytest.raises(FetchError, match="config key 'crc.data.train' is not in the config"):
        resolve_sources(catalog, CONFIG)


def test_a_missing_source_a_job_names_but_no_job_writes_is_refused(server, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server)
    records, images, clip, tagger = _every_kind(tmp_path)
    params = [f"{{'images': '{images.folders[0]}', 'seed': 0}}", "{'alpha': 0.1}"]
    assert named_by([images, tagger, clip], params) == [images]
    with pytest.raises(FetchError) as refused:
        preflight([], mirror=server, unscheduled=[images], others=[clip], lock_dir=tmp_path / "locks")
    message = str(refused.value)
    assert (
        message.startswith("1 source(s)")
        and "- images: " in message
        and "run `snakemake fetch_images` first" in message
    )


def test_a_lock_is_written_for_the_pin_not_the_description_or_the_models_size():
    """Rewording `about`, restating `parameters` or `disk_gb` keeps a lab's lock; changing what is fetched does not."""
    config = {"crc": {"model": "models/clip"}}
    entry = {"about": "a CLIP", "hub": [{"repo": "org/clip", "revision": None, "to": "crc.model"}]}

    def digest(changed):
        return resolve_sources({"sources": {"clip": changed}}, config)[0].entry

    sized = {"about": "a CLIP, sized", "hub": [{**entry["hub"][0], "parameters": {"loaded": 4.28e8}}], "disk_gb": 1.7}
    assert digest(sized) == digest(entry)
    assert digest({**entry, "hub": [{**entry["hub"][0], "repo": "org/other"}]}) != digest(entry)
    assert model_parameters({"sources": {"clip": sized}}) == {"crc.model": {"loaded": 4.28e8}}
