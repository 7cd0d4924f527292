"""Snakemake adapter: one benchmark's caption table through its real loader, and the rows it dropped."""

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.crc import benchmarks
from condeval.crc.evaluate import calibration_units
from condeval.crc.word_risk import check_alphas
from condeval.datasets import counting_dropped_rows

log = log_to_file(snakemake.log[0])
name, p, files = snakemake.wildcards.benchmark, dict(snakemake.params.benchmark), snakemake.input
with counting_dropped_rows() as dropped:
    if name == "foil_it":
        train = (
            {"train_json": files.train, "train_image_dir": p["train_images"]}
            if p["calibration_source"] == "train"
            else {}
        )
        table = benchmarks.foil_it_captions(
            files.annotations, p["images"], calibration_fraction=p["calibration_fraction"], seed=p["seed"], **train
        )
    elif name == "foil_nocaps":
        table = benchmarks.foil_nocaps_captions(files.annotations, p["images"])
    elif name == "rich_hf":
        table = benchmarks.rich_hf_captions(files.calibration, files.test, files.prompts, p["images"])
    else:
        table = benchmarks.judged_captions(
            p["format"],
            files.annotations,
            p["images"],
            allow_pickle=p["allow_pickle"],
            calibration_fraction=p["calibration_fraction"],
            seed=p["seed"],
            subsets=p.get("subsets"),
        )
if name in ("foil_it", "rich_hf"):
    # An α too small for the calibration units is refused here, before any sampling; read from the
    # config, not params, so that an α edit does not rerun this job (later runs check at parse time).
    crc = snakemake.config["crc"]
    unit = crc.get("calibration_unit", "image")
    check_alphas(
        crc["words"]["alphas"],
        crc["words"]["delta"],
        calibration_units(table, unit),
        unit,
        f"{name} ({snakemake.output.table})",
    )
write_parquet(table, snakemake.output.table)
dropped.write(snakemake.output.dropped)
log.info("%s: %d captions, %s", name, len(table), dict(table.group_by("subset").len().iter_rows()))
log.info("%s: %d rows dropped on purpose, by file and reason: %s", name, dropped.total(), dropped.as_dict())
