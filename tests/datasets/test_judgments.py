"""Human-judgment loaders on fixtures in the released formats; pickles only when allowed."""

import json

import pandas as pd
import polars as pl
import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.judgments import load_flickr8k_expert, load_pickled_judgments, load_polaris


def _flickr(tmp_path, document):
    path = tmp_path / "flickr8k.json"
    path.write_text(json.dumps(document))  # json writes NaN as the release does
    return path


def test_flickr8k_expert_averages_the_raters(tmp_path):
    judgement = lambda caption, rating: {"image_id": "1", "image_path": "a.jpg", "caption": caption, "rating": rating}  # noqa: E731
    document = {
        "1": {
            "image_id": "1",
            "image_path": "a.jpg",
            "ground_truth": ["a dog runs", "a brown dog"],
            "human_judgement": [
                judgement("a dog", 4),
                judgement("a dog ", 3),
                judgement("a dog", 4),
                judgement("a cat", 1),
                judgement("a cow", float("nan")),
            ],
        }
    }
    frame = load_flickr8k_expert(_flickr(tmp_path, document))
    assert frame.sort("caption").rows() == [
        ("a.jpg", "a cat", ["a dog runs", "a brown dog"], 1.0),
        ("a.jpg", "a dog", ["a dog runs", "a brown dog"], 11 / 3),
    ]


@pytest.mark.parametrize(
    "document,message",
    [
        ([], "expected a JSON object, found list"),
        ({"7": {"image_path": "a.jpg", "ground_truth": []}}, "image 7 lacks field 'human_judgement'"),
        (
            {"7": {"image_path": "a.jpg", "ground_truth": [], "human_judgement": [{"caption": "x"}]}},
            "image 7, judgement 0 lacks",
        ),
        (
            {"7": {"image_path": "a.jpg", "ground_truth": [], "human_judgement": [{"caption": "x", "rating": 5}]}},
            "rating 5.0 is outside 1-4",
        ),
    ],
)
def test_flickr8k_malformed_entries_are_named(tmp_path, document, message):
    with pytest.raises(DatasetFormatError, match=message) as error:
        load_flickr8k_expert(_flickr(tmp_path, document))
    assert "flickr8k.json" in str(error.value)


def test_polaris_parquet_with_image_structs_and_csv(tmp_path):
    table = pl.DataFrame(
        {
            "refs": [["a dog", "a pup"]],
            "cand": ["a cat"],
            "img": [{"bytes": b"", "path": "img/1.jpg"}],
            "human_score": [0.25],
        }
    )
    table.write_parquet(tmp_path / "polaris_test.parquet")
    frame = load_polaris(tmp_path / "polaris_test.parquet")
    assert frame.rows() == [("img/1.jpg", "a cat", ["a dog", "a pup"], 0.25)]
    (tmp_path / "polaris.csv").write_text('refs,cand,img,human_score\n"[""a dog""]",a cat,img/1.jpg,0.5\n')
    assert load_polaris(tmp_path / "polaris.csv").rows() == [("img/1.jpg", "a cat", ["a dog"], 0.5)]
    (tmp_path / "bad.csv").write_text("refs,cand,human_score\n[],a,1\n")
    with pytest.raises(DatasetFormatError, match="bad.csv: column 'img' is missing"):
        load_polaris(tmp_path / "bad.csv")
    (tmp_path / "gap.csv").write_text('refs,cand,img,human_score\n"[]",a,i.jpg,0.5\n"[]",b,j.jpg,\n')
    with pytest.raises(DatasetFormatError, match="gap.csv: row 1 has no human_score"):
        load_polaris(tmp_path / "gap.csv")


def test_pickles_are_refused_unless_allowed(tmp_path):
    path = tmp_path / "vicr.pkl"
    pd.DataFrame(
        {"candidates": ["a dog"], "image_path": ["v/1.jpg"], "human_scores": [[3, 4]], "subset": ["val"]}
    ).to_pickle(path)
    with pytest.raises(DatasetFormatError, match="vicr.pkl: a pickle runs code .*crc.allow_pickle: true"):
        load_pickled_judgments(path)
    assert load_pickled_judgments(path, allow_pickle=True).rows() == [("v/1.jpg", "a dog", [], 3.5)]
    pd.DataFrame({"candidates": ["a"], "human_scores": [1.0]}).to_pickle(path)
    with pytest.raises(DatasetFormatError, match="column 'image_path' is missing"):
        load_pickled_judgments(path, allow_pickle=True)
