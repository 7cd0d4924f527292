# Risk control on the samples: the alpha sweeps and the calibrated comparison (Tables 1–4), and
# the Learn-then-Test intervals (Table 5). These rules, the tables and the figures are all that an
# alpha or delta edit reruns.


rule crc_word_sweep:
    """λ̂ per α on the calibration captions (FDR on FOIL-it, FPR on RichHF-18K); metrics on both
    subsets; the α with the best calibration F1 evaluated overall and by domain (FOIL-it's λ̂ also on
    FOIL-nocaps); and the detection signal against a random-word baseline."""
    input:
        unpack(crc_sweep_inputs),
    output:
        sweep="results/crc/{model}/{word_benchmark}/sweep.parquet",
        selected="results/crc/{model}/{word_benchmark}/selected.parquet",
        signal="results/crc/{model}/{word_benchmark}/signal.json",
    wildcard_constraints:
        **CRC_WILDCARDS,
    params:
        alphas=CRC["words"]["alphas"],
        delta=CRC["words"]["delta"],
        risk=crc_sweep_risk,
        unit=CRC["calibration_unit"],
    log:
        "logs/crc/word_sweep_{model}_{word_benchmark}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crc/word_sweep.py"


rule crc_intervals:
    """λ̂ for the σ scale by Learn-then-Test on the calibration pairs; UPS and τ_c before and after."""
    input:
        unpack(crc_interval_inputs),
    output:
        table="results/crc/{model}/intervals/table5.parquet",
        calibration="results/crc/{model}/intervals/calibration.json",
    wildcard_constraints:
        **CRC_WILDCARDS,
    params:
        intervals=canonical(CRC["intervals"]),
        unit=CRC["calibration_unit"],
        names=JUDGMENT_SETS,
    log:
        "logs/crc/intervals_{model}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crc/intervals.py"
