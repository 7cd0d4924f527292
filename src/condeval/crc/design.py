"""The CLIPScore risk-control track's design: its benchmarks, the config checks its DAG relies on and
what each job reads, from the ``crc:`` config section.

The workflow's input functions (``workflow/rules/crc/common.smk``) bind a job's wildcards to these;
every function here takes the section (and, where the track reads shared data, the ``coco:`` section)
as plain dicts, so each is tested without Snakemake.

Examples
--------
>>> crc = {"data": {"judgments": {"flickr8k_expert": {}}}, "models": {"tiny": {}}, "shards": 2}
>>> benchmarks(crc)
['foil_it', 'foil_nocaps', 'rich_hf', 'flickr8k_expert']
>>> sample_paths(crc, "tiny", "rich_hf")
['results/crc/tiny/samples/rich_hf/shard-0.parquet', 'results/crc/tiny/samples/rich_hf/shard-1.parquet']
"""

from __future__ import annotations

import math
from pathlib import Path

from condeval.core.config import alpha_labels, canonical
from condeval.crc.benchmarks import PAPER_PAIRS
from condeval.crc.miniature import MINI_JUDGMENT_FILES

__all__ = [
    "WORD_BENCHMARKS",
    "SWEEPS",
    "benchmarks",
    "check_config",
    "source_files",
    "caption_params",
    "caption_inputs",
    "model_loading",
    "sampling_params",
    "sampling_pairs",
    "keeps_distribution",
    "tagger_inputs",
    "sample_paths",
    "sweep_inputs",
    "interval_inputs",
    "sweep_samples",
    "model_labels",
    "paper_models",
    "targets",
]

#: Benchmarks whose captions carry word labels (Tables 1-3); the judgment sets (Table 5) are configured.
WORD_BENCHMARKS = ["foil_it", "foil_nocaps", "rich_hf"]
#: The word benchmarks a risk is calibrated on, and which risk: an alpha or delta edit reruns these alone.
SWEEPS = {"foil_it": "fdr", "rich_hf": "fpr"}


def benchmarks(crc: dict) -> list[str]:
    """Every benchmark of the run: the word benchmarks, then the configured judgment sets."""
    return WORD_BENCHMARKS + list(crc["data"]["judgments"])


def check_config(crc: dict, coco: dict, *, has_encoders: bool, novel_shapes: list) -> None:
    """Cross-key checks the schema cannot express, before any job.

    Parameters
    ----------
    crc, coco : dict
        The validated ``crc:`` and ``coco:`` sections.
    has_encoders : bool
        Whether the config trains the shared CLIP (an ``encoders.clip`` section).
    novel_shapes : list
        The mini-world's held-out shapes (FOIL-nocaps' near and out domains need them).

    Raises
    ------
    ValueError
        Naming the config key.
    """
    alpha_labels(crc["words"]["alphas"], "crc.words.alphas")  # 0.1 and 0.1000001 would be one row label
    _check_judgments(crc)
    for name, section in crc["models"].items():
        if "encoder" in section and not has_encoders:
            raise ValueError(f"config key 'crc.models.{name}.encoder' needs the 'encoders' section")
    if crc["tagger"]["kind"] == "lexicon" and coco["source"] != "miniworld":
        raise ValueError(
            "config key 'crc.tagger.kind': the lexicon tagger knows only the mini-world's words; use stanza on real data"
        )
    foil_it = crc["data"]["foil_it"]
    if crc["words"]["calibration_source"] == "train" and "train" not in foil_it:
        raise ValueError(
            "config key 'crc.data.foil_it.train': crc.words.calibration_source is train, so FOIL-it's train file is needed"
        )
    if "miniature" in crc:
        _check_miniature(crc, coco, novel_shapes)


def _check_judgments(crc: dict) -> None:
    judgments = crc["data"]["judgments"]
    clash = set(judgments) & set(WORD_BENCHMARKS)
    if clash:
        raise ValueError(f"config key 'crc.data.judgments': {sorted(clash)} are word benchmarks' names")
    calibration = crc["intervals"]["calibration"]["dataset"]
    if calibration not in judgments:
        raise ValueError(
            f"config key 'crc.intervals.calibration.dataset': {calibration!r} is not one of crc.data.judgments {list(judgments)}"
        )
    for name, section in judgments.items():
        subsets = section.get("subsets", {})
        if subsets and section["format"] != "pickle":
            raise ValueError(
                f"config key 'crc.data.judgments.{name}.subsets': only a pickle release has its own subsets"
            )
        if subsets and name == calibration and "calibration" not in subsets:
            raise ValueError(
                f"config key 'crc.data.judgments.{name}.subsets': {name} calibrates the intervals, so it needs a calibration subset"
            )
    pickled = [name for name, section in judgments.items() if section["format"] == "pickle"]
    if pickled and not crc.get("allow_pickle", False):
        raise ValueError(
            f"config key 'crc.data.judgments': {pickled} ship only as pickles, which run code when loaded; "
            "set crc.allow_pickle: true only if you trust those files (e.g. add --configfile config/allow_pickles.yaml after the config)"
        )


def _check_miniature(crc: dict, coco: dict, novel_shapes: list) -> None:
    """The miniature writes the releases itself: their paths must be where it writes them."""
    data = crc["data"]
    if coco["source"] != "miniworld":
        raise ValueError(
            "config key 'crc.miniature' writes the benchmarks from the mini-world; it needs coco.source: miniworld"
        )
    if set(data["judgments"]) != set(MINI_JUDGMENT_FILES):
        raise ValueError(
            f"config key 'crc.data.judgments': the miniature writes exactly {sorted(MINI_JUDGMENT_FILES)}; got {list(data['judgments'])}"
        )
    for name, section in data["judgments"].items():
        if (section["format"], Path(section["file"]).name) != (name, MINI_JUDGMENT_FILES[name]):
            raise ValueError(
                f"config key 'crc.data.judgments.{name}': the miniature writes format {name}, file name {MINI_JUDGMENT_FILES[name]}"
            )
    foil_it = data["foil_it"]
    if "train" in foil_it:
        written = Path(foil_it["file"]).with_name("foilv1.0_train_2017.json")
        train_images = Path(foil_it.get("train_images", foil_it["images"]))
        if Path(foil_it["train"]) != written or train_images != Path(foil_it["images"]):
            raise ValueError(
                f"config key 'crc.data.foil_it.train': the miniature writes {written}, its images in {foil_it['images']}"
            )
    rich = data["rich_hf"]
    folder = Path(rich["test"]).parent
    expected = {
        "calibration": folder / "dev.tfrecord",
        "test": folder / "test.tfrecord",
        "prompts": folder / "pickapic.parquet",
        "images": folder / "images",
    }
    for key, path in expected.items():
        if Path(rich[key]) != path:
            raise ValueError(f"config key 'crc.data.rich_hf.{key}': the miniature writes {path}; got {rich[key]}")
    if Path(data["foil_nocaps"]["images"]) != Path(data["foil_nocaps"]["file"]).parent:
        raise ValueError(
            "config key 'crc.data.foil_nocaps.images': the miniature's image paths are relative to the file's folder"
        )
    if not novel_shapes:
        raise ValueError(
            "config key 'crc.miniature' needs coco.miniworld.novel_shapes for FOIL-nocaps' near and out domains"
        )


def source_files(crc: dict, benchmark: str) -> dict[str, str]:
    """The release files a benchmark's caption table is read from (with the miniature: rule outputs)."""
    data = crc["data"]
    if benchmark == "foil_it":
        train = {"train": data["foil_it"]["train"]} if crc["words"]["calibration_source"] == "train" else {}
        return {"annotations": data["foil_it"]["file"], **train}
    if benchmark == "foil_nocaps":
        return {"annotations": data["foil_nocaps"]["file"]}
    if benchmark == "rich_hf":
        return {key: data["rich_hf"][key] for key in ("calibration", "test", "prompts")}
    return {"annotations": data["judgments"][benchmark]["file"]}


def caption_params(crc: dict, benchmark: str) -> dict:
    """Everything that shapes a caption table besides its files: the image folder, the subsets' draw."""
    data = crc["data"]
    if benchmark == "foil_it":
        section, words = data["foil_it"], crc["words"]
        calibrated_on_train = words["calibration_source"] == "train"
        train_images = {"train_images": section.get("train_images", section["images"])} if calibrated_on_train else {}
        return canonical(
            {
                "images": section["images"],
                **train_images,
                "calibration_source": words["calibration_source"],
                "calibration_fraction": words["calibration_fraction"],
                "seed": crc["seed"],
            }
        )
    if benchmark in WORD_BENCHMARKS:
        return canonical({"images": data[benchmark]["images"]})
    calibration = crc["intervals"]["calibration"]
    fraction = calibration["fraction"] if calibration["dataset"] == benchmark else 0.0
    return canonical(
        {
            **data["judgments"][benchmark],
            "calibration_fraction": fraction,
            "seed": crc["seed"],
            "allow_pickle": crc.get("allow_pickle", False),
        }
    )


def caption_inputs(crc: dict, benchmark: str, world_captions: str) -> dict:
    """A benchmark's release files and, on the real data, its image folders: inputs, so that the rule
    fetching a folder (COCO's train2014) runs first and a missing one is named before any job.

    ``world_captions`` is the mini-world's val captions file, whose rule writes FOIL-it's images.
    """
    inputs = source_files(crc, benchmark)
    if "miniature" in crc:
        if benchmark == "foil_it":
            inputs["images"] = world_captions
        return inputs
    params = caption_params(crc, benchmark)
    folders = {params[key] for key in ("images", "train_images") if key in params}
    # A folder holding a release file (the CLIPScore bundle's Vicr/) comes with that file's source.
    files = [Path(path) for path in inputs.values() if isinstance(path, str)]
    inputs["image_folders"] = sorted(folder for folder in folders if not any(Path(folder) in f.parents for f in files))
    return inputs


def model_loading(crc: dict, model: str) -> dict:
    """How the sampler loads the model: tokenizer and image-processor folders, remote code, precision."""
    section = crc["models"][model]
    keys = ("tokenizer", "image_processor", "trust_remote_code", "dtype")
    return canonical({key: section[key] for key in keys if key in section})


def sampling_params(crc: dict, benchmark: str) -> dict:
    """The sampler's settings of a benchmark's kind (word labels or judgments) and CLIPScore's weight."""
    kind = "words" if benchmark in WORD_BENCHMARKS else "intervals"
    return canonical({**crc["sampling"][kind], "weight": crc["clipscore_weight"]})


def sampling_pairs(crc: dict, benchmark: str) -> int:
    """The pairs of one ``crc_sample`` shard, counted by the release's size
    (:data:`condeval.crc.benchmarks.PAPER_PAIRS`; the largest for a benchmark it does not list) and, for
    FOIL-it calibrating on its train file, the ``crc.words.calibration_fraction`` of it that is sampled."""
    pairs = PAPER_PAIRS.get(benchmark, max(PAPER_PAIRS.values()))
    if benchmark == "foil_it" and "train" in crc["data"]["foil_it"]:
        pairs += math.ceil(crc["words"]["calibration_fraction"] * PAPER_PAIRS["foil_it_train"])
    return -(-pairs // crc["shards"])


def keeps_distribution(crc: dict, benchmark: str) -> bool:
    """Judgment sets keep every pair's I×T samples (Fig. 1's violins); word benchmarks only summaries."""
    return benchmark in crc["data"]["judgments"]


def tagger_inputs(crc: dict, coco_root: str) -> list[str]:
    """The lexicon tagger reads the mini-world's token sidecars; stanza reads its model folder."""
    if crc["tagger"]["kind"] == "lexicon":
        return [f"{coco_root}/annotations/tokens_{split}2014.jsonl" for split in ("train", "val")]
    return [crc["tagger"]["model_dir"]]


def sample_paths(crc: dict, model: str, benchmark: str) -> list[str]:
    """The ``crc_sample`` shards of one model on one benchmark."""
    return [f"results/crc/{model}/samples/{benchmark}/shard-{shard}.parquet" for shard in range(crc["shards"])]


def sweep_inputs(crc: dict, model: str, word_benchmark: str) -> dict:
    """A risk sweep's caption table and samples; FOIL-it's threshold is also evaluated on FOIL-nocaps
    (Table 2), so FOIL-it's sweep reads FOIL-nocaps as its shift."""
    inputs = {
        "captions": f"results/crc/captions/{word_benchmark}.parquet",
        "samples": sample_paths(crc, model, word_benchmark),
    }
    if word_benchmark == "foil_it":
        inputs |= {
            "shift_captions": "results/crc/captions/foil_nocaps.parquet",
            "shift_samples": sample_paths(crc, model, "foil_nocaps"),
        }
    return inputs


def interval_inputs(crc: dict, model: str) -> dict:
    """Table 5's inputs: every judgment set's caption table and samples, set by set."""
    judgments = list(crc["data"]["judgments"])
    return {
        "captions": [f"results/crc/captions/{name}.parquet" for name in judgments],
        "samples": [shard for name in judgments for shard in sample_paths(crc, model, name)],
    }


def sweep_samples(crc: dict, model: str) -> list[str]:
    """Every shard of the swept word benchmarks, benchmark by benchmark."""
    return [shard for name in SWEEPS for shard in sample_paths(crc, model, name)]


def model_labels(crc: dict) -> dict[str, str]:
    """Each model's name in the tables (its ``label``, else its key)."""
    return {name: section.get("label", name) for name, section in crc["models"].items()}


def paper_models(crc: dict) -> dict[str, str]:
    """Models that are the paper's (B or H): their tables carry the paper's numbers beside ours."""
    return {name: section["paper"] for name, section in crc["models"].items() if "paper" in section}


def targets(crc: dict) -> list[str]:
    """The track's reports: Tables 1-3 and 5 (one file), the clipped-score check, Fig. 1 and word examples."""
    per_model = [
        f"reports/crc/{kind}_{model}.png" for kind in ("fig1_violins", "word_examples") for model in crc["models"]
    ]
    return ["reports/crc/table2.md", "reports/crc/clipped.md", *per_model]
