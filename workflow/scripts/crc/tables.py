"""Snakemake adapter: Tables 1–5, the detection-signal table and the dropped-rows table of the CLIPScore risk-control track."""

import json
from pathlib import Path

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import RISKS
from condeval.crc.report import (
    dropped_rows_markdown,
    signal_markdown,
    sweep_markdown,
    table2_markdown,
    table4_markdown,
    table5_markdown,
)

log = log_to_file(snakemake.log[0])
p, inputs, out = snakemake.params, snakemake.input, snakemake.output
pairs = [(model, name) for model in p.models for name in p.sweeps]  # the order of the expanded inputs
sweeps = {pair: pl.read_parquet(path) for pair, path in zip(pairs, inputs.sweeps)}
selected = {pair: pl.read_parquet(path) for pair, path in zip(pairs, inputs.selected)}
signals = {pair: json.loads(Path(path).read_text()) for pair, path in zip(pairs, inputs.signals)}
labels, paper_models = dict(p.labels), dict(p.paper_models)


def write(path, text):
    with atomic_path(path) as tmp:
        tmp.write_text(text)


for model, table1, table3 in zip(p.models, out.table1, out.table3):
    write(table1, sweep_markdown(sweeps[(model, "foil_it")], RISKS["foil_it"], paper_models.get(model)))
    write(table3, sweep_markdown(sweeps[(model, "rich_hf")], RISKS["rich_hf"], paper_models.get(model)))
write(out.table2, table2_markdown({model: selected[(model, "foil_it")] for model in p.models}, labels, paper_models))
write(out.table4, table4_markdown({model: selected[(model, "rich_hf")] for model in p.models}, labels, paper_models))
write(
    out.table5,
    table5_markdown(
        {model: pl.read_parquet(path) for model, path in zip(p.models, inputs.intervals)}, labels, paper_models
    ),
)
write(out.signal, signal_markdown(signals))
dropped = {name: json.loads(Path(path).read_text()) for name, path in zip(p.benchmarks, inputs.dropped)}
write(out.dropped, dropped_rows_markdown(dropped))
log.info("Table 2:\n%s", Path(out.table2).read_text())
log.info("detection signal:\n%s", Path(out.signal).read_text())
log.info("rows the loaders dropped:\n%s", Path(out.dropped).read_text())
