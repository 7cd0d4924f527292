# Reports of the CLIPScore risk-control track: Tables 1–5, the detection signal, the share of clipped
# CLIPScores, Fig. 1 and the word-example panels, collected with captions by `snakemake --report`.


rule crc_tables:
    input:
        sweeps=expand(
            "results/crc/{model}/{word_benchmark}/sweep.parquet", model=CRC_MODELS, word_benchmark=list(CRC_SWEEPS)
        ),
        selected=expand(
            "results/crc/{model}/{word_benchmark}/selected.parquet", model=CRC_MODELS, word_benchmark=list(CRC_SWEEPS)
        ),
        signals=expand(
            "results/crc/{model}/{word_benchmark}/signal.json", model=CRC_MODELS, word_benchmark=list(CRC_SWEEPS)
        ),
        intervals=expand("results/crc/{model}/intervals/table5.parquet", model=CRC_MODELS),
        dropped=expand("results/crc/captions/{benchmark}.dropped.json", benchmark=CRC_BENCHMARKS),
    output:
        table1=report(
            expand("reports/crc/table1_{model}.md", model=CRC_MODELS),
            caption="../../report/crc/table1.rst",
            category="CLIPScore risk control",
            subcategory="Table 1",
        ),
        table2=report(
            "reports/crc/table2.md",
            caption="../../report/crc/table2.rst",
            category="CLIPScore risk control",
            subcategory="Table 2",
            labels={"table": "Table 2"},
        ),
        table3=report(
            expand("reports/crc/table3_{model}.md", model=CRC_MODELS),
            caption="../../report/crc/table3.rst",
            category="CLIPScore risk control",
            subcategory="Table 3",
        ),
        table4=report(
            "reports/crc/table4.md",
            caption="../../report/crc/table4.rst",
            category="CLIPScore risk control",
            subcategory="Table 4",
            labels={"table": "Table 4"},
        ),
        table5=report(
            "reports/crc/table5.md",
            caption="../../report/crc/table5.rst",
            category="CLIPScore risk control",
            subcategory="Table 5",
            labels={"table": "Table 5"},
        ),
        signal=report(
            "reports/crc/signal.md",
            caption="../../report/crc/signal.rst",
            category="CLIPScore risk control",
            subcategory="Signal",
            labels={"table": "signal"},
        ),
        dropped=report(
            "reports/crc/dropped_rows.md",
            caption="../../report/crc/dropped_rows.rst",
            category="CLIPScore risk control",
            subcategory="Dropped rows",
            labels={"table": "dropped rows"},
        ),
    params:
        models=CRC_MODELS,
        benchmarks=CRC_BENCHMARKS,
        sweeps=list(CRC_SWEEPS),
        labels=crc_model_labels(),
        paper_models=crc_paper_models(),
    log:
        "logs/crc/tables.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crc/tables.py"


rule crc_clipped:
    input:
        samples=expand(
            "results/crc/{model}/samples/{benchmark}/shard-{shard}.parquet",
            model=CRC_MODELS,
            benchmark=CRC_BENCHMARKS,
            shard=CRC_SHARDS,
        ),
        captions=expand("results/crc/captions/{benchmark}.parquet", benchmark=CRC_BENCHMARKS),
    output:
        table="results/crc/clipped.parquet",
        markdown=report(
            "reports/crc/clipped.md",
            caption="../../report/crc/clipped.rst",
            category="CLIPScore risk control",
            subcategory="Clipped scores",
            labels={"table": "clipped scores"},
        ),
    params:
        shards={
            model: {benchmark: crc_samples(model, benchmark) for benchmark in CRC_BENCHMARKS} for model in CRC_MODELS
        },
        labels=crc_model_labels(),
        benchmarks=CRC_BENCHMARKS,
    log:
        "logs/crc/clipped.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crc/clipped.py"


rule crc_fig1:
    input:
        captions=f"results/crc/captions/{CRC['intervals']['calibration']['dataset']}.parquet",
        samples=crc_interval_calibration_samples,
    output:
        report(
            "reports/crc/fig1_violins_{model}.png",
            caption="../../report/crc/fig1.rst",
            category="CLIPScore risk control",
            subcategory="Fig. 1",
            labels={"model": "{model}"},
        ),
    wildcard_constraints:
        **CRC_WILDCARDS,
    params:
        seed=CRC["seed"],
        dataset=CRC["intervals"]["calibration"]["dataset"],
    log:
        "logs/crc/fig1_{model}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crc/fig1.py"


rule crc_word_examples:
    input:
        captions=expand("results/crc/captions/{word_benchmark}.parquet", word_benchmark=list(CRC_SWEEPS)),
        samples=crc_sweep_samples,
        selected=expand("results/crc/{{model}}/{word_benchmark}/selected.parquet", word_benchmark=list(CRC_SWEEPS)),
    output:
        report(
            "reports/crc/word_examples_{model}.png",
            caption="../../report/crc/word_examples.rst",
            category="CLIPScore risk control",
            subcategory="Word-error examples",
            labels={"model": "{model}"},
        ),
    wildcard_constraints:
        **CRC_WILDCARDS,
    params:
        seed=CRC["seed"],
        benchmarks=list(CRC_SWEEPS),
        per_benchmark=4,
    log:
        "logs/crc/word_examples_{model}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crc/word_examples.py"
