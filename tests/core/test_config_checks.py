"""The config checks name their key, one line each, on the real schemas: a misspelled key, NaN, a
float where an integer belongs (YAML's ``2.0``), a choice of forms, and a key written twice."""

import copy
import math
from pathlib import Path

import pytest
import yaml

from condeval.core.config import config_errors, duplicate_keys

REPO = Path(__file__).resolve().parents[2]
CONFIG = yaml.safe_load((REPO / "config/config.yaml").read_text())


def _errors(track, mutate):
    section = copy.deepcopy(CONFIG[track])
    mutate(section)
    schema = yaml.safe_load((REPO / f"workflow/schemas/{track}.schema.yaml").read_text())
    return config_errors(section, schema, track)


@pytest.mark.parametrize("track", ["crel", "crc", "trust", "coco", "encoders"])
def test_the_offline_default_is_valid(track):
    assert _errors(track, lambda section: None) == []


@pytest.mark.parametrize(
    "track,mutate,expected",
    [
        (
            "crel",
            lambda c: c.update(calibraton=c["calibration"]),
            "config key 'crel.calibraton': unknown key (known: ablations, calibration,",
        ),
        (
            "crel",
            lambda c: c["calibration"].update(alpah=0.2),
            "config key 'crel.calibration.alpah': unknown key (known: alphas)",
        ),
        (
            "crel",
            lambda c: c["lgm"].update(latent_dim=2.0),
            "config key 'crel.lgm.latent_dim': must be an integer; got 2.0 (write 2)",
        ),
        (
            "crel",
            lambda c: c["lgm"]["hidden_dims"].__setitem__(1, 64.0),
            "config key 'crel.lgm.hidden_dims[1]': must be an integer; got 64.0 (write 64)",
        ),
        (
            "crel",
            lambda c: c["synthetic"].update(sigma=math.nan),
            "config key 'crel.synthetic.sigma': NaN is not a number here",
        ),
        ("crc", lambda c: c["words"].update(delta=math.nan), "config key 'crc.words.delta': NaN is not a number here"),
        (
            "crc",
            lambda c: c["words"]["alphas"].__setitem__(0, math.nan),
            "config key 'crc.words.alphas[0]': NaN is not a number",
        ),
        (
            "trust",
            lambda c: c["selection"].update(quantile=math.nan),
            "config key 'trust.selection.quantile': NaN is not a number",
        ),
        (
            "trust",
            lambda c: c["sampling"].update(per_condition=64.0),
            "config key 'trust.sampling.per_condition': must be an integer",
        ),
        (
            "crel",
            lambda c: c["image_to_text"]["models"]["mini-blip-small"].pop("train"),
            "config key 'crel.image_to_text.models.mini-blip-small': fits none of its allowed forms (the closest: ",
        ),
        (
            "crel",
            lambda c: c["image_to_text"]["models"]["mini-blip-small"].update(path="models/blip"),
            "config key 'crel.image_to_text.models.mini-blip-small': fits more than one of its allowed forms",
        ),
        (
            "crel",
            lambda c: c["calibration"].update(alphas=[0.1, 1.5]),
            "config key 'crel.calibration.alphas[1]': 1.5 is greater than or equal to the maximum of 1",
        ),
        (
            "trust",
            lambda c: c["translator"].update(steps=[4, 4, 9]),
            "config key 'trust.translator.steps': [4, 4, 9] has non-unique",
        ),
        # KID compares at least two accepted samples (found by the rehearsal: 1 passed the schema, then KID refused)
        (
            "trust",
            lambda c: c["selection"].update(min_accepted=1),
            "config key 'trust.selection.min_accepted': 1 is less than the minimum of 2",
        ),
        (
            "crel",
            lambda c: c["image_to_text"]["models"]["mini-blip-small"].update(dtype="half"),
            "config key 'crel.image_to_text.models.mini-blip-small.dtype': 'half' is not one of",
        ),
    ],
)
def test_each_error_is_one_line_naming_its_key(track, mutate, expected):
    errors = _errors(track, mutate)
    assert len(errors) == 1 and errors[0].startswith(expected), errors
    assert "\n" not in errors[0] and len(errors[0]) < 400


def test_every_error_is_listed_once():
    def two_mistakes(section):
        section["lgm"].update(latent_dim=2.0)
        section["synthetic"].update(sigma=math.nan)

    errors = _errors("crel", two_mistakes)
    assert sorted(e.split("'")[1] for e in errors) == ["crel.lgm.latent_dim", "crel.synthetic.sigma"]


def test_top_level_keys_are_named_without_a_prefix():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert config_errors({**CONFIG, "crell": {}}, schema) == [
        "config key 'crell': unknown key (known: check_inputs, cluster, coco, crc, crel, encoders, fetch, gpu_rules_on_cpu, trust)"
    ]
    assert config_errors({"check_inputs": math.nan}, schema)[0].startswith("config key 'check_inputs'")


def test_a_key_written_twice_is_found(tmp_path):
    path = tmp_path / "lab.yaml"
    path.write_text("crel:\n  calibration:\n    alphas: [0.1]\n    alphas: [0.3]\ncrc: {seed: 0}\n")
    assert duplicate_keys(path) == f"{path}: line 4: key 'alphas' is written twice (first at line 3)"
    path.write_text("crel:\n  calibration: {alphas: [0.1]}\ncrc: {seed: 0, alphas: [0.1]}\n")
    assert duplicate_keys(path) is None
    assert duplicate_keys(REPO / "config/config.yaml") is None and duplicate_keys(REPO / "config/paper.yaml") is None


def test_a_models_keywords_are_read_from_its_source_and_a_misspelt_one_is_named():
    import sys

    from condeval.core.config import check_keywords, function_keywords

    sys.modules.pop("condeval.encoders.clip", None)
    keywords = function_keywords("condeval.encoders.clip:tiny_clip_config")
    assert keywords == ["tokenizer", "image_size", "sizes"]
    fields = function_keywords("condeval.encoders.clip:ClipSizes")  # a dataclass: its fields
    assert {"vision_width", "projection_dim", "max_length"} <= set(fields) and "sizes" not in fields
    assert "condeval.encoders.clip" not in sys.modules  # read, not imported: parsing stays fast
    check_keywords("k", {"vision_width": 8}, "condeval.encoders.clip:ClipSizes", fixed=("max_length",))
    with pytest.raises(ValueError, match=r"config key 'k' names \['max_length', 'widht'\], which ClipSizes"):
        check_keywords("k", {"widht": 8, "max_length": 1}, "condeval.encoders.clip:ClipSizes", fixed=("max_length",))
