# Helpers of the CLIPScore risk-control track (config `crc:`): its section, wildcard constraints
# and input functions. The track reads the shared COCO data (the miniature's benchmarks are written
# from the mini-world) and the shared tiny CLIP. What each job reads lives in condeval.crc.design
# (unit-tested there); these functions bind a job's wildcards to it.
from condeval.crc import design as crc_design  # noqa: E402
from condeval.crc import sampling as crc_sampling  # noqa: E402

CRC = track_config("crc")
CRC_DATA = CRC["data"]
CRC_MODELS = list(CRC["models"])
WORD_BENCHMARKS = crc_design.WORD_BENCHMARKS
JUDGMENT_SETS = list(CRC_DATA["judgments"])
CRC_BENCHMARKS = crc_design.benchmarks(CRC)
CRC_SHARDS = list(range(CRC["shards"]))
CRC_SWEEPS = crc_design.SWEEPS

crc_design.check_config(CRC, COCO, has_encoders="clip" in config.get("encoders", {}), novel_shapes=NOVEL_SHAPES)


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


def crc_caption_inputs(wildcards):
    return crc_design.caption_inputs(CRC, wildcards.benchmark, coco_captions("val"))


def crc_caption_params(wildcards):
    return crc_design.caption_params(CRC, wildcards.benchmark)


def crc_model_loading(wildcards):
    return crc_design.model_loading(CRC, wildcards.model)


def crc_sampling_params(wildcards):
    return crc_design.sampling_params(CRC, wildcards.benchmark)


def crc_sampling_work(wildcards):
    """One crc_sample job's GPU work (condeval.crc.sampling.sampling_work) of a CLIP of the folder's size."""
    section = CRC["models"][wildcards.model]
    parameters = model_size(f"crc.models.{wildcards.model}.path", section["path"]) if "path" in section else None
    return crc_sampling.sampling_work(
        parameters,
        crc_sampling_params(wildcards),
        crc_design.sampling_pairs(CRC, wildcards.benchmark),
        section.get("dtype", "auto"),
    )


def crc_keep_distribution(wildcards):
    return crc_design.keeps_distribution(CRC, wildcards.benchmark)


def crc_tagger_inputs():
    return crc_design.tagger_inputs(CRC, COCO_ROOT)


def crc_samples(model, benchmark):
    return crc_design.sample_paths(CRC, model, benchmark)


def crc_sweep_inputs(wildcards):
    return crc_design.sweep_inputs(CRC, wildcards.model, wildcards.word_benchmark)


def crc_sweep_risk(wildcards):
    return CRC_SWEEPS[wildcards.word_benchmark]


def crc_interval_inputs(wildcards):
    return crc_design.interval_inputs(CRC, wildcards.model)


def crc_interval_calibration_samples(wildcards):
    return crc_samples(wildcards.model, CRC["intervals"]["calibration"]["dataset"])


def crc_sweep_samples(wildcards):
    return crc_design.sweep_samples(CRC, wildcards.model)


def crc_model_labels():
    return crc_design.model_labels(CRC)


def crc_paper_models():
    return crc_design.paper_models(CRC)


def crc_targets():
    return crc_design.targets(CRC)
