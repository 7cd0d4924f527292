"""benchmarks/bench_paper_gpu.py and benchmarks/paper_cost.py: every GPU rule of the paper config timed through
the package, written after each measurement, resumable, one failure not stopping the others; the cost table."""

import contextlib
import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_paper_gpu as bench  # noqa: E402
import paper_cost  # noqa: E402

MEASURED_KEYS = {
    "seconds_per_item",
    "items_measured",
    "parameters",
    "through",
    "peak_memory_bytes",
    "card",
    "torch",
    "cuda",
    "precision",
    "wall_s",
}


@pytest.fixture(scope="module")
def config():
    return bench.paper_config()


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The CPU run at the rehearsal's sizes, every entry in both precisions (about 30 s on 2 idle cores)."""
    out = tmp_path_factory.mktemp("paper_gpu") / "paper_gpu.json"
    bench.main(["--device", "cpu", "--tiny", "--out", str(out)])
    return json.loads(out.read_text())


@pytest.mark.slow
def test_the_tiny_run_times_every_rule_in_both_precisions(tiny_run, config):
    expected = {entry.name for entry in bench.entries(config)}
    assert set(tiny_run["rules"]) == expected
    for name, record in tiny_run["rules"].items():
        assert set(record["dtypes"]) == set(bench.DTYPES), name
        for dtype, result in record["dtypes"].items():
            assert MEASURED_KEYS <= set(result), (name, dtype, result.get("error"))
            assert math.isfinite(result["seconds_per_item"]) and result["seconds_per_item"] > 0, (name, dtype)
            assert result["items_measured"] >= 1 and result["parameters"] > 0, (name, dtype)
            assert result["through"].startswith((bench.PACKAGE, bench.MODULES)), name
            assert result["precision"].startswith(dtype), (name, dtype)
    assert {"card", "torch", "cuda", "date", "commit", "tiny"} <= set(tiny_run["provenance"])
    assert tiny_run["provenance"]["tiny"] is True


@pytest.mark.slow
def test_the_tiny_run_builds_the_models_at_the_rehearsal_shapes(tiny_run):
    """The same code runs at full size on a GPU: here each model is the rehearsal's (SD3's denoiser 1 block)."""
    sd3 = tiny_run["rules"]["generate_images[sd3-medium]"]["dtypes"]["float32"]
    assert sd3["parameters"] < 10_000_000 and sd3["steps"] == 50 and sd3["side"] == 64


@pytest.mark.slow
def test_the_cost_table_of_the_tiny_run_has_one_row_per_rule_and_sums(tiny_run, config):
    rows = paper_cost.cost_rows(tiny_run, config)
    assert [row["rule"] for row in rows] == list(tiny_run["rules"])
    for dtype in bench.DTYPES:
        expected = sum(
            record["dtypes"][dtype]["seconds_per_item"]
            * paper_cost.items(record["rule"], record["wildcard"], config).count
            / 3600
            for record in tiny_run["rules"].values()
        )
        assert paper_cost.total(rows, dtype) == pytest.approx(expected)
    table = paper_cost.markdown(rows, tiny_run)
    body = [line for line in table.splitlines() if line.startswith("| ") and "**total**" not in line]
    assert len(body) == 1 + len(rows)  # the header, then a row per entry


# ------------------------------------------------------------------------ the harness, on stand-in entries
def _document(out: Path) -> dict:
    return json.loads(out.read_text())


def _fake_entries(monkeypatch, measures: dict) -> dict:
    """Replace the paper's entries by ``measures`` (name -> function of the context); count their calls."""
    calls = dict.fromkeys(measures, 0)

    def counted(name):
        def measure(ctx):
            calls[name] += 1
            return measures[name](ctx)

        return measure

    fakes = [bench.Entry(name, None, counted(name)) for name in measures]
    monkeypatch.setattr(bench, "entries", lambda config: fakes)
    monkeypatch.setattr("condeval.rehearsal.full_size.random_weights", lambda device: contextlib.nullcontext())
    return calls


def _timed(ctx):
    return {"seconds_per_item": 0.5, "items_measured": 2, "parameters": 10, "through": bench.PACKAGE}


def _raises(error):
    def measure(ctx):
        raise error

    return measure


def test_resume_keeps_what_was_measured_and_measures_the_rest(tmp_path, monkeypatch):
    out = tmp_path / "run.json"
    calls = _fake_entries(monkeypatch, {"done": _timed, "broken": _raises(ValueError("boom")), "late": _timed})
    bench.main(["--device", "cpu", "--out", str(out), "--dtypes", "float32", "--rules", "done", "broken"])
    first = _document(out)["rules"]
    assert first["done"]["dtypes"]["float32"]["seconds_per_item"] == 0.5
    assert "boom" in first["broken"]["dtypes"]["float32"]["error"]
    bench.main(["--device", "cpu", "--out", str(out), "--dtypes", "float32", "--budget-s", "0", "--resume"])
    skipped = _document(out)["rules"]
    assert "skipped" in skipped["late"]["dtypes"]["float32"] and "skipped" in skipped["broken"]["dtypes"]["float32"]
    assert skipped["done"]["dtypes"]["float32"] == first["done"]["dtypes"]["float32"]
    bench.main(["--device", "cpu", "--out", str(out), "--dtypes", "float32", "--resume"])
    assert calls == {"done": 1, "broken": 2, "late": 1}  # the measured entry kept; the error and the skip redone
    assert _document(out)["rules"]["late"]["dtypes"]["float32"]["seconds_per_item"] == 0.5


def test_an_out_of_memory_entry_is_recorded_and_the_others_still_run(tmp_path, monkeypatch):
    out = tmp_path / "run.json"
    _fake_entries(
        monkeypatch,
        {
            "cuda_oom": _raises(torch.OutOfMemoryError("CUDA out of memory")),
            "host_oom": _raises(MemoryError()),
            "error": _raises(KeyError("trust")),
            "after": _timed,
        },
    )
    bench.main(["--device", "cpu", "--out", str(out)])
    rules = _document(out)["rules"]
    for name in ("cuda_oom", "host_oom"):
        for result in rules[name]["dtypes"].values():
            assert result["oom"] is True and "memory_at_failure_bytes" in result and "error" not in result
    assert all("KeyError" in result["error"] for result in rules["error"]["dtypes"].values())
    assert all(result["seconds_per_item"] == 0.5 for result in rules["after"]["dtypes"].values())
    assert set(rules["after"]["dtypes"]) == set(bench.DTYPES)


def test_the_json_is_written_after_each_measurement(tmp_path, monkeypatch):
    out = tmp_path / "run.json"

    def second(ctx):  # by the second entry's start, the first is on disk
        assert "first" in _document(out)["rules"]
        return _timed(ctx)

    _fake_entries(monkeypatch, {"first": _timed, "second": second})
    bench.main(["--device", "cpu", "--out", str(out), "--dtypes", "float32"])
    assert _document(out)["rules"]["second"]["dtypes"]["float32"]["seconds_per_item"] == 0.5


def test_rules_select_by_rule_or_entry_name(config):
    entries = bench.entries(config)
    assert {e.name for e in bench.selected(entries, ["generate_images"])} == {
        f"generate_images[{m}]" for m in config["crel"]["text_to_image"]["models"]
    }
    assert [e.name for e in bench.selected(entries, ["crc_sample[ml-laion-h14]"])] == ["crc_sample[ml-laion-h14]"]
    assert [e.name for e in bench.selected(entries, ["generate_images[sd3-*]"])] == ["generate_images[sd3-medium]"]
    with pytest.raises(SystemExit):
        bench.selected(entries, ["no_such_rule"])


# ------------------------------------------------------------------------------------- the cost table
def _result(seconds=None, peak=None, **extra):
    return ({"seconds_per_item": seconds, "peak_memory_bytes": peak} if seconds is not None else {}) | extra


def test_the_cost_table_has_one_row_per_rule_and_its_total_is_their_sum(config):
    gib = 2**30
    document = {
        "provenance": {
            "card": "NVIDIA H100 80GB HBM3",
            "torch": "2.13.0",
            "cuda": "12.8",
            "tf32": False,
            "date": "2026-12-06T00:00:00+00:00",
            "commit": "abc1234",
            "tiny": False,
        },
        "rules": {
            "generate_images[flux-dev]": {
                "rule": "generate_images",
                "wildcard": "flux-dev",
                "dtypes": {
                    "bfloat16": _result(2.0, 40 * gib),
                    "float32": _result(oom=True, card="NVIDIA H100 80GB HBM3", memory_at_failure_bytes=78 * gib),
                },
            },
            "trust_real_features[siglip]": {
                "rule": "trust_real_features",
                "wildcard": "siglip",
                "dtypes": {"bfloat16": _result(0.001, 3 * gib), "float32": _result(0.004, 6 * gib)},
            },
            "crc_sample[ml-laion-h14]": {
                "rule": "crc_sample",
                "wildcard": "ml-laion-h14",
                "dtypes": {"bfloat16": _result(0.1, 90 * gib), "float32": _result(skipped="past --budget-s 420")},
            },
        },
    }
    rows = paper_cost.cost_rows(document, config)
    assert [row["rule"] for row in rows] == list(document["rules"])
    flux, siglip, crc = rows
    assert flux["bfloat16"]["hours"] == pytest.approx(2.0 * config["crel"]["text_to_image"]["items"] / 3600)
    assert siglip["bfloat16"]["hours"] == pytest.approx(0.001 * (202_599 + 125_510) / 3600)
    bf16 = flux["bfloat16"]["hours"] + siglip["bfloat16"]["hours"] + crc["bfloat16"]["hours"]
    assert paper_cost.total(rows, "bfloat16") == pytest.approx(bf16)
    assert paper_cost.total(rows, "float32") == pytest.approx(siglip["float32"]["hours"])  # OOM and skip add nothing
    # 40 GiB + 10% needs an 80 GB card, 3 GiB a 40 GB one, 90 GiB + 10% an H200
    cards = [row["bfloat16"]["card"] for row in rows]
    assert cards == ["A100-80GB", "A100-40GB", "H200-141GB"]
    assert flux["float32"]["hours"] is None and "OOM" in flux["float32"]["why"]
    table = paper_cost.markdown(rows, document)
    body = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| rule")]
    assert len(body) == len(rows) + 1 and "**total**" in body[-1]
    assert f"**{bf16:,.1f}**" in body[-1]
    assert re.search(r"NVIDIA H100 80GB HBM3 .*2026-12-06.*commit abc1234", table)
    assert "| yes |" in body[2] and "| no |" in body[0]  # crc's pairs are an estimate, the config's items are not


# ------------------------------------------------------------------------------------ the full-size models
def test_the_full_size_table_has_the_rehearsal_keys():
    from condeval.rehearsal.full_size import FULL
    from condeval.rehearsal.models import REHEARSAL

    def keys(shape, path=""):
        return {f"{path}{k}" for k in shape} | {
            key for k, v in shape.items() if isinstance(v, dict) for key in keys(v, f"{path}{k}.")
        }

    assert set(FULL) == set(REHEARSAL)
    for repo, shape in REHEARSAL.items():  # the vocabularies: the rehearsal's are its tokenizers'
        assert {key for key in keys(FULL[repo]) if not key.endswith("vocab_size")} == keys(shape), repo


#: Published sizes (model cards): FLUX.1-dev's 12B transformer (11.9B), SD3-Medium's 2B and SD3.5-Large's 8.1B
#: MMDiTs, T5-XXL's 4.76B encoder, CLIP ViT-L/14 428M, DINOv2-base 86M, DINOv3 ViT-L/16 0.3B, BERT-base 110M,
#: Kandinsky 2.2's 1.22B decoder UNet.
PUBLISHED = {
    ("black-forest-labs/FLUX.1-dev", "transformer"): 11.9e9,
    ("black-forest-labs/FLUX.1-dev", "text_encoder_2"): 4.76e9,
    ("stabilityai/stable-diffusion-3-medium-diffusers", "transformer"): 2.0e9,
    ("stabilityai/stable-diffusion-3.5-large", "transformer"): 8.1e9,
    ("openai/clip-vit-large-patch14", None): 428e6,
    ("facebook/dinov2-base", None): 86e6,
    ("facebook/dinov3-vitl16-pretrain-lvd1689m", None): 300e6,
    ("google-bert/bert-base-uncased", None): 110e6,
    ("kandinsky-community/kandinsky-2-2-decoder", "unet"): 1.22e9,
}


def test_the_full_size_repositories_have_the_published_parameter_counts(tmp_path):
    """Written without weights and loaded on the meta device: the configs alone, at the checkpoints' sizes."""
    from diffusers import DiffusionPipeline
    from transformers import AutoModel

    from condeval.rehearsal.full_size import parameter_count, random_weights
    from condeval.rehearsal.models import write_hub_repo

    counts = {}
    with random_weights("meta"):
        for repo in dict.fromkeys(repo for repo, _ in PUBLISHED):
            folder = write_hub_repo(repo, tmp_path / repo, scale="full", weights=False)
            assert not [p for p in folder.rglob("*") if p.suffix in (".safetensors", ".bin")], repo
            if (folder / "model_index.json").exists():
                pipe = DiffusionPipeline.from_pretrained(str(folder))
                counts |= {(repo, name): parameter_count(part) for name, part in pipe.components.items()}
            else:
                counts[repo, None] = parameter_count(AutoModel.from_pretrained(str(folder)))
    for key, published in PUBLISHED.items():
        assert counts[key] == pytest.approx(published, rel=0.05), key
