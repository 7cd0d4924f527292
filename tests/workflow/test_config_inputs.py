"""Issue 17: names used in paths are identifiers, and every configured data file or checkpoint that
no rule writes must exist before any job, all missing ones listed with their config keys at once."""

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import tiny_config
from snakemake.utils import validate

REPO = Path(__file__).resolve().parents[2]
SCHEMAS = REPO / "workflow" / "schemas"


def _paper_without_fetch() -> dict:
    """The paper config with no fetch rules, so nothing in the workflow writes its raw inputs."""
    config = yaml.safe_load((REPO / "config/paper.yaml").read_text())
    config.pop("fetch", None)
    config["crc"]["allow_pickle"] = True
    return config


@pytest.mark.parametrize("name", ["../evil", "a/b", "x|y", "Blip", "blip."])
@pytest.mark.parametrize(
    "schema,section,place",
    [
        ("crc", lambda: tiny_config("crc")["crc"], lambda s, n: s["models"].update({n: {"encoder": "clip"}})),
        (
            "crc",
            lambda: tiny_config("crc")["crc"],
            lambda s, n: s["data"]["judgments"].update({n: dict(s["data"]["judgments"]["polaris"])}),
        ),
        (
            "crel",
            lambda: tiny_config("i2t")["crel"],
            lambda s, n: s["image_to_text"]["models"].update({n: {"path": "models/x"}}),
        ),
    ],
)
def test_names_used_in_paths_must_be_identifiers(schema, section, place, name):
    config = copy.deepcopy(section())
    validate(copy.deepcopy(config), schema=str(SCHEMAS / f"{schema}.schema.yaml"))
    place(config, name)
    with pytest.raises(Exception, match="does not match"):
        validate(config, schema=str(SCHEMAS / f"{schema}.schema.yaml"))


def _dry_run(workdir: Path, config: dict, *extra: str) -> subprocess.CompletedProcess:
    (workdir / "paper.yaml").write_text(yaml.safe_dump(config))
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "crel",
        "-s",
        str(REPO / "workflow/Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(workdir / "paper.yaml"),
        "-n",
        *extra,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_every_missing_configured_input_is_listed_with_its_key(tmp_path):
    config = _paper_without_fetch()
    present = [f"{config['coco']['root']}/annotations/captions_train2014.json", config["encoders"]["bert"]["path"]]
    for path in present:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    result = _dry_run(tmp_path, config)
    assert result.returncode != 0
    message = result.stderr + result.stdout
    assert "configured input(s) are missing, and no job of this workflow writes them" in message
    for key, path in [
        ("coco.root (annotations/captions_val2014.json)", "data/coco2014/annotations/captions_val2014.json"),
        ("encoders.clip.path", config["encoders"]["clip"]["path"]),
        ("crel.image_to_text.models.git-large.path", "models/microsoft/git-large-coco"),
        ("crc.models.ml-laion-h14.tokenizer", "models/FacebookAI/xlm-roberta-large"),
        ("crc.data.rich_hf.calibration", "data/richhf18k/dev.tfrecord"),
        ("crc.data.judgments.vicr.file", "data/clipscore_bundle/Vicr/VICR.pkl"),
    ]:
        assert f"  {key}: {path}\n" in message
    assert all(f": {path}\n" not in message for path in present)


@pytest.mark.slow
def test_inputs_that_a_rule_writes_are_not_demanded(tmp_path):
    """The miniature's data (mini-world, mini benchmarks) do not exist yet, but its rules write them."""
    config = tiny_config("crc", "i2t")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "all",
        "-s",
        str(REPO / "workflow/Snakefile"),
        "-d",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "config.yaml"),
        "-n",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow
def test_the_check_can_be_skipped_for_a_dry_run_without_data(tmp_path):
    result = _dry_run(tmp_path, _paper_without_fetch(), "--config", "check_inputs=False")
    assert result.returncode == 0, result.stderr[-3000:]
