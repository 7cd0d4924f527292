"""Raw data in (workflow/rules/shared/fetch.smk): the paper config fetches what it reads, first.

Real runs fetch from a loopback HTTP server (127.0.0.1) through `fetch.mirror`, with a small
catalogue pinned to the fixtures' sha256.
"""

import hashlib
import http.server
import json
import re
import socket
import subprocess
import sys
import threading
from functools import partial
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # starts Snakemake
PAPER = yaml.safe_load((REPO / "config/paper.yaml").read_text())
#: Sources whose paths are inputs of the paper targets (the CRC image folders and the stanza models
#: included, so that they are fetched before the jobs reading them).
DAG_SOURCES = {
    "coco2014",
    "foil_it",
    "foil_nocaps",
    "richhf18k",
    "pick_a_pic_prompts",
    "flickr8k",
    "polaris",
    "clipscore_bundle",
    "coco2014_train_images",
    "richhf18k_images",
    "foil_nocaps_images",
    "stanza_en",
    "blip_base",
    "blip_large",
    "git_base",
    "git_large",
    "clip_vit_l14",
    "bert_base",
    "ml_laion_b32",
    "ml_laion_h14",
    "dinov2_base",
    "sd3_medium",
    "sd35_large",
    "flux_dev",
    "kandinsky_22",
    "celeba",
    "rxrx1",
    "dinov3_vitl16",
    "siglip_so400m",
    "sd_vae_ft_mse",
}
RECORDS = json.dumps([{"image_path": "a.jpg", "references": ["a cube"]}]).encode()


def _snakemake(
    workdir: Path, *args: str, configs=("config/paper.yaml", "config/allow_pickles.yaml")
) -> subprocess.CompletedProcess:
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "workflow/Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "1",
        *args,
        "--configfile",
        *(str(REPO / c) for c in configs),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def _jobs(stdout: str) -> dict[str, int]:
    return {rule: int(n) for rule, n in re.findall(r"^(\w+)\s+(\d+)$", stdout, flags=re.M) if rule != "total"}


def test_from_an_empty_tree_the_paper_config_schedules_the_fetch_rules(tmp_path):
    result = _snakemake(tmp_path, "all", "-n", "--quiet", "rules")
    assert result.returncode == 0, result.stderr[-3000:]
    jobs = _jobs(result.stdout)
    fetched = {rule.removeprefix("fetch_") for rule in jobs if rule.startswith("fetch_")}
    calibrates_on_train = "train" in PAPER["crc"]["data"]["foil_it"]  # FOIL-it's train file is then an input too
    assert fetched == DAG_SOURCES | ({"foil_it_train"} if calibrates_on_train else set())
    assert all(jobs[f"fetch_{name}"] == 1 for name in fetched)


def test_the_offline_default_has_no_fetch_rule(tmp_path):
    result = _snakemake(tmp_path, "--list-rules", configs=("config/config.yaml",))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "crc_captions" in result.stdout and "fetch_" not in result.stdout


@pytest.fixture
def server(tmp_path):
    served = tmp_path / "served" / "data.example.org"
    served.mkdir(parents=True)
    (served / "nocaps-val-foil.json").write_bytes(RECORDS)
    handler = partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "served"))
    handler.log_message = lambda *args: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join(timeout=5)


def _catalog(tmp_path: Path) -> Path:
    """FOIL-nocaps from the fixture server, RichHF-18K's dev file from it too, and a manual tagger."""
    catalog = {
        "sources": {
            "foil_nocaps": {
                "about": "FOIL-nocaps",
                "http": [
                    {
                        "url": "http://data.example.org/nocaps-val-foil.json",
                        "sha256": hashlib.sha256(RECORDS).hexdigest(),
                        "to": "crc.data.foil_nocaps.file",
                    }
                ],
            },
            "richhf_dev": {
                "about": "RichHF-18K dev",
                "http": [
                    {
                        "url": "http://data.example.org/dev.tfrecord",
                        "sha256": "0" * 64,
                        "to": "crc.data.rich_hf.calibration",
                    }
                ],
            },
            "stanza_en": {
                "about": "stanza models",
                "manual": "stanza.download('en')",
                "folders": ["crc.tagger.model_dir"],
            },
        }
    }
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(catalog))
    return path


def _stand_ins(work: Path, catalog: Path) -> None:
    """Every path the paper config reads, empty, except those the test catalogue fetches."""
    sys.path.insert(0, str(REPO / "src"))
    from condeval.core.fetch import read_catalog, resolve_sources

    fetched = {path for source in resolve_sources(read_catalog(catalog), PAPER) for path in source.outputs}
    for source in resolve_sources(read_catalog(REPO / "config/sources.yaml"), PAPER):
        for folder in (set(source.folders) | {path for path in source.checked if path not in source.files}) - fetched:
            (work / folder).mkdir(parents=True, exist_ok=True)
        for file in set(source.files) - fetched:
            (work / file).parent.mkdir(parents=True, exist_ok=True)
            (work / file).write_bytes(b"")


def _fetch_config(catalog: Path, mirror: str) -> str:
    """The catalogue, its lock folder beside it (never the repository's) and the mirror."""
    return f"fetch={json.dumps({'sources': str(catalog), 'lock': str(catalog.parent / 'locks'), 'mirror': mirror})}"


def test_a_fetch_rule_downloads_its_source_once_and_a_present_one_is_never_refetched(tmp_path, server):
    work, catalog = tmp_path / "work", _catalog(tmp_path)
    _stand_ins(work, catalog)
    (work / PAPER["crc"]["tagger"]["model_dir"]).mkdir(parents=True)  # the manual source, placed by hand
    (work / PAPER["crc"]["data"]["rich_hf"]["calibration"]).write_bytes(b"placed by hand")
    target = PAPER["crc"]["data"]["foil_nocaps"]["file"]
    result = _snakemake(work, target, "--config", _fetch_config(catalog, server))
    assert result.returncode == 0, result.stderr[-3000:]
    assert (work / target).read_bytes() == RECORDS
    assert (work / "logs/fetch/preflight.log").read_text() == "1 source(s) to fetch: foil_nocaps\n"
    assert (tmp_path / "locks/foil_nocaps.yaml").is_file()  # the lock folder the config names
    again = _snakemake(work, target, "--config", _fetch_config(catalog, server), "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr


def test_offline_the_run_fails_in_one_message_listing_every_missing_source(tmp_path):
    with socket.socket() as probe:  # a loopback port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    work, catalog = tmp_path / "work", _catalog(tmp_path)
    _stand_ins(work, catalog)
    result = _snakemake(work, PAPER["crc"]["data"]["foil_nocaps"]["file"], "--config", _fetch_config(catalog, closed))
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert output.count("3 source(s) of the config are missing and cannot be fetched now") == 1, output[-4000:]
    for name, path in [("foil_nocaps", "crc.data.foil_nocaps.file"), ("richhf_dev", "crc.data.rich_hf.calibration")]:
        section = PAPER
        for key in path.split("."):
            section = section[key]
        assert f"- {name}: " in output and section in output
    assert "- stanza_en: " in output and PAPER["crc"]["tagger"]["model_dir"] in output
    assert not (work / PAPER["crc"]["data"]["foil_nocaps"]["file"]).exists()


def test_a_missing_image_folder_that_a_job_reads_stops_the_run_before_any_job(tmp_path):
    """FOIL-nocaps' images are a parameter of its caption table, not an input: no fetch job is scheduled."""
    work, only_images = tmp_path / "work", tmp_path / "images.yaml"
    only_images.write_text(
        yaml.safe_dump(
            {
                "sources": {
                    "foil_nocaps_images": {"about": "x", "manual": "y", "folders": ["crc.data.foil_nocaps.images"]}
                }
            }
        )
    )
    _stand_ins(work, only_images)
    result = _snakemake(work, "results/crc/captions/foil_nocaps.parquet")
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "source(s) of the config are missing and cannot be fetched now" in output, output[
        -3000:
    ]
    assert (
        "- foil_nocaps_images: " in output and f"place at: {PAPER['crc']['data']['foil_nocaps']['images']}/" in output
    )
    assert not (work / "logs/crc/captions_foil_nocaps.log").exists()  # refused before the job started
