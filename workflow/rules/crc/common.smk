# Helpers of the CLIPScore risk-control track (config `crc:`): its section, wildcard constraints
# and input functions. The track reads the shared COCO data (the miniature's benchmarks are written
# from the mini-world) and the shared tiny CLIP.
from condeval.crc.miniature import MINI_JUDGMENT_FILES  # noqa: E402
from condeval.crc import sampling as crc_sampling  # noqa: E402
from condeval.crc.benchmarks import PAPER_PAIRS  # noqa: E402

CRC = track_config("crc")
CRC_DATA = CRC["data"]
CRC_MODELS = list(CRC["models"])
WORD_BENCHMARKS = ["foil_it", "foil_nocaps", "rich_hf"]
JUDGMENT_SETS = list(CRC_DATA["judgments"])
CRC_BENCHMARKS = WORD_BENCHMARKS + JUDGMENT_SETS
CRC_SHARDS = list(range(CRC["shards"]))
# Rules that read only captions and their samples: an alpha or delta edit reruns these alone.
CRC_SWEEPS = {"foil_it": "fdr", "rich_hf": "fpr"}


def _check_crc_config():
    """Cross-key checks the schema cannot express, before any job."""
    alpha_labels(CRC["words"]["alphas"], "crc.words.alphas")  # 0.1 and 0.1000001 would be one row label
    clash = set(JUDGMENT_SETS) & set(WORD_BENCHMARKS)
    if clash:
        raise ValueError(f"config key 'crc.data.judgments': {sorted(clash)} are word benchmarks' names")
    calibration = CRC["intervals"]["calibration"]["dataset"]
    if calibration not in JUDGMENT_SETS:
        raise ValueError(
            f"config key 'crc.intervals.calibration.dataset': {calibration!r} is not one of crc.data.judgments {JUDGMENT_SETS}"
        )
    for name, section in CRC_DATA["judgments"].items():
        subsets = section.get("subsets", {})
        if subsets and section["format"] != "pickle":
            raise ValueError(
                f"config key 'crc.data.judgments.{name}.subsets': only a pickle release has its own subsets"
            )
        if subsets and name == calibration and "calibration" not in subsets:
            raise ValueError(
                f"config key 'crc.data.judgments.{name}.subsets': {name} calibrates the intervals, so it needs a calibration subset"
            )
    for name, section in CRC["models"].items():
        if "encoder" in section and "clip" not in config.get("encoders", {}):
            raise ValueError(f"config key 'crc.models.{name}.encoder' needs the 'encoders' section")
    pickled = [name for name, section in CRC_DATA["judgments"].items() if section["format"] == "pickle"]
    if pickled and not CRC.get("allow_pickle", False):
        raise ValueError(
            f"config key 'crc.data.judgments': {pickled} ship only as pickles, which run code when loaded; "
            "set crc.allow_pickle: true only if you trust those files (e.g. add --configfile config/trust_pickles.yaml after the config)"
        )
    if CRC["tagger"]["kind"] == "lexicon" and COCO["source"] != "miniworld":
        raise ValueError(
            "config key 'crc.tagger.kind': the lexicon tagger knows only the mini-world's words; use stanza on real data"
        )
    if "miniature" in CRC and COCO["source"] != "miniworld":
        raise ValueError(
            "config key 'crc.miniature' writes the benchmarks from the mini-world; it needs coco.source: miniworld"
        )
    if "miniature" in CRC and set(JUDGMENT_SETS) != set(MINI_JUDGMENT_FILES):
        raise ValueError(
            f"config key 'crc.data.judgments': the miniature writes exactly {sorted(MINI_JUDGMENT_FILES)}; got {JUDGMENT_SETS}"
        )
    if "miniature" in CRC:
        for name, section in CRC_DATA["judgments"].items():
            if (section["format"], Path(section["file"]).name) != (name, MINI_JUDGMENT_FILES[name]):
                raise ValueError(
                    f"config key 'crc.data.judgments.{name}': the miniature writes format {name}, file name {MINI_JUDGMENT_FILES[name]}"
                )
    foil_it = CRC_DATA["foil_it"]
    if CRC["words"]["calibration_source"] == "train" and "train" not in foil_it:
        raise ValueError(
            "config key 'crc.data.foil_it.train': crc.words.calibration_source is train, so FOIL-it's train file is needed"
        )
    if "miniature" in CRC and "train" in foil_it:
        written = Path(foil_it["file"]).with_name("foilv1.0_train_2017.json")
        if Path(foil_it["train"]) != written or Path(foil_it.get("train_images", foil_it["images"])) != Path(
            foil_it["images"]
        ):
            raise ValueError(
                f"config key 'crc.data.foil_it.train': the miniature writes {written}, its images in {foil_it['images']}"
            )
    if "miniature" in CRC:
        rich = CRC_DATA["rich_hf"]
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
        if Path(CRC_DATA["foil_nocaps"]["images"]) != Path(CRC_DATA["foil_nocaps"]["file"]).parent:
            raise ValueError(
                "config key 'crc.data.foil_nocaps.images': the miniature's image paths are relative to the file's folder"
            )
    if "miniature" in CRC and not NOVEL_SHAPES:
        raise ValueError(
            "config key 'crc.miniature' needs coco.miniworld.novel_shapes for FOIL-nocaps' near and out domains"
        )


_check_crc_config()


def _check_calibration_sizes():
    """An α too small for a swept benchmark's calibration units is refused before any job, from its
    caption table where an earlier run wrote one (the crc_captions job checks a new table itself)."""
    unit = CRC["calibration_unit"]
    for name in CRC_SWEEPS:
        table = Path(f"results/crc/captions/{name}.parquet")
        if table.is_file():  # imported only here: parsing a fresh workflow stays fast
            import polars

            from condeval.crc.evaluate import calibration_units
            from condeval.crc.word_risk import check_alphas

            n_units = calibration_units(polars.read_parquet(table, columns=["subset", "path"]), unit)
            check_alphas(CRC["words"]["alphas"], CRC["words"]["delta"], n_units, unit, str(table))


_check_calibration_sizes()

CRC_WILDCARDS = {
    "benchmark": "|".join(CRC_BENCHMARKS),
    "word_benchmark": "|".join(CRC_SWEEPS),
    "model": "|".join(CRC_MODELS),
    "shard": r"\d+",
}


def crc_model_inputs(wildcards):
    """A CLIP as an input: the shared encoder's manifest, or the configured folder."""
    section = CRC["models"][wildcards.model]
    return trained_encoder_inputs(section["encoder"]) if "encoder" in section else section["path"]


def crc_source_files(benchmark):
    """The release files a benchmark's caption table is read from (with the miniature: rule outputs)."""
    if benchmark == "foil_it":
        train = {"train": CRC_DATA["foil_it"]["train"]} if CRC["words"]["calibration_source"] == "train" else {}
        return {"annotations": CRC_DATA["foil_it"]["file"], **train}
    if benchmark == "foil_nocaps":
        return {"annotations": CRC_DATA["foil_nocaps"]["file"]}
    if benchmark == "rich_hf":
        section = CRC_DATA["rich_hf"]
        return {"calibration": section["calibration"], "test": section["test"], "prompts": section["prompts"]}
    return {"annotations": CRC_DATA["judgments"][benchmark]["file"]}


def crc_caption_inputs(wildcards):
    """A benchmark's release files and, on the real data, its image folders: inputs, so that the rule fetching a
    folder (COCO's train2014) runs first and a missing one is named before any job."""
    inputs = crc_source_files(wildcards.benchmark)
    if "miniature" in CRC:
        if wildcards.benchmark == "foil_it":
            inputs["images"] = coco_captions("val")  # the images come with the world's val split
        return inputs
    params = crc_caption_params(wildcards)
    folders = {params[key] for key in ("images", "train_images") if key in params}
    # A folder holding a release file (the CLIPScore bundle's Vicr/) comes with that file's source.
    files = [Path(path) for path in inputs.values() if isinstance(path, str)]
    inputs["image_folders"] = sorted(folder for folder in folders if not any(Path(folder) in f.parents for f in files))
    return inputs


def crc_caption_params(wildcards):
    """Everything that shapes a caption table besides its files: the image folder, the subsets' draw."""
    benchmark = wildcards.benchmark
    if benchmark == "foil_it":
        section, words = CRC_DATA["foil_it"], CRC["words"]
        train_images = (
            {"train_images": section.get("train_images", section["images"])}
            if words["calibration_source"] == "train"
            else {}
        )
        return canonical(
            {
                "images": section["images"],
                **train_images,
                "calibration_source": words["calibration_source"],
                "calibration_fraction": words["calibration_fraction"],
                "seed": CRC["seed"],
            }
        )
    if benchmark in WORD_BENCHMARKS:
        return canonical({"images": CRC_DATA[benchmark]["images"]})
    section = CRC_DATA["judgments"][benchmark]
    calibration = CRC["intervals"]["calibration"]
    fraction = calibration["fraction"] if calibration["dataset"] == benchmark else 0.0
    return canonical(
        {
            **section,
            "calibration_fraction": fraction,
            "seed": CRC["seed"],
            "allow_pickle": CRC.get("allow_pickle", False),
        }
    )


def crc_model_loading(wildcards):
    """How the sampler loads the model: tokenizer and image-processor folders, remote code, precision."""
    section = CRC["models"][wildcards.model]
    return canonical(
        {key: section[key] for key in ("tokenizer", "image_processor", "trust_remote_code", "dtype") if key in section}
    )


def crc_sampling_params(wildcards):
    kind = "words" if wildcards.benchmark in WORD_BENCHMARKS else "intervals"
    return canonical({**CRC["sampling"][kind], "weight": CRC["clipscore_weight"]})


def crc_sampling_work(wildcards):
    """One crc_sample job's GPU work (condeval.crc.sampling.sampling_work): a shard of the benchmark's
    pairs, counted by the release's size (condeval.crc.benchmarks.PAPER_PAIRS; the largest for another)."""
    benchmark, section = wildcards.benchmark, CRC["models"][wildcards.model]
    pairs = PAPER_PAIRS.get(benchmark, max(PAPER_PAIRS.values()))
    if benchmark == "foil_it" and "train" in CRC_DATA["foil_it"]:
        pairs += PAPER_PAIRS["foil_it_train"]
    parameters = model_size(f"crc.models.{wildcards.model}.path", section["path"]) if "path" in section else None
    sampling = crc_sampling_params(wildcards)
    return crc_sampling.sampling_work(parameters, sampling, -(-pairs // CRC["shards"]), section.get("dtype", "auto"))


def crc_keep_distribution(wildcards):
    """Judgment sets keep every pair's I×T samples (Fig. 1's violins); word benchmarks only summaries."""
    return wildcards.benchmark in JUDGMENT_SETS


def crc_tagger_inputs():
    """The lexicon tagger reads the mini-world's token sidecars; stanza reads its model folder."""
    if CRC["tagger"]["kind"] == "lexicon":
        return [f"{COCO_ROOT}/annotations/tokens_{split}2014.jsonl" for split in ("train", "val")]
    return [CRC["tagger"]["model_dir"]]


def crc_samples(model, benchmark):
    return expand(
        "results/crc/{model}/samples/{benchmark}/shard-{shard}.parquet",
        model=model,
        benchmark=benchmark,
        shard=CRC_SHARDS,
    )


def crc_sweep_inputs(wildcards):
    inputs = {
        "captions": f"results/crc/captions/{wildcards.word_benchmark}.parquet",
        "samples": crc_samples(wildcards.model, wildcards.word_benchmark),
    }
    if wildcards.word_benchmark == "foil_it":  # FOIL-it's λ̂ is also evaluated on FOIL-nocaps (Table 2)
        inputs |= {
            "shift_captions": "results/crc/captions/foil_nocaps.parquet",
            "shift_samples": crc_samples(wildcards.model, "foil_nocaps"),
        }
    return inputs


def crc_sweep_risk(wildcards):
    return CRC_SWEEPS[wildcards.word_benchmark]


def crc_interval_inputs(wildcards):
    return {
        "captions": expand("results/crc/captions/{benchmark}.parquet", benchmark=JUDGMENT_SETS),
        "samples": [shard for name in JUDGMENT_SETS for shard in crc_samples(wildcards.model, name)],
    }


def crc_interval_calibration_samples(wildcards):
    return crc_samples(wildcards.model, CRC["intervals"]["calibration"]["dataset"])


def crc_sweep_samples(wildcards):
    """Every shard of the swept word benchmarks, benchmark by benchmark."""
    return [shard for name in CRC_SWEEPS for shard in crc_samples(wildcards.model, name)]


def crc_model_labels():
    return {name: section.get("label", name) for name, section in CRC["models"].items()}


def crc_paper_models():
    """Models that are the paper's (B or H): their tables carry the paper's numbers beside ours."""
    return {name: section["paper"] for name, section in CRC["models"].items() if "paper" in section}


def crc_targets():
    return [
        "reports/crc/table2.md",
        "reports/crc/clipped.md",
        *expand("reports/crc/fig1_violins_{model}.png", model=CRC_MODELS),
        *expand("reports/crc/word_examples_{model}.png", model=CRC_MODELS),
    ]
