# Reports of the image-to-text track: Table 2, Fig. 3 (violins), Fig. 4 (examples), Fig. 6
# (num_z0 curve) and one reliability card per model, all at crel.image_to_text.alpha; on the
# mini-world, the captioners' grounding (colour and shape mentions against the scenes).


rule i2t_table2:
    input:
        i2t_scores,
    output:
        table="results/crel_i2t/table2_alpha{alpha}.parquet",
        markdown=report(
            "reports/crel_i2t/table2_alpha{alpha}.md",
            caption="../../report/crel/i2t_table2.rst",
            category="CReL image-to-text",
            subcategory="Table 2",
            labels={"table": "Table 2"},
        ),
    wildcard_constraints:
        **I2T_WILDCARDS,
    log:
        "logs/crel_i2t/table2_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_table2.py"


rule i2t_fig3:
    input:
        scores=i2t_scores,
        table="results/crel_i2t/table2_alpha{alpha}.parquet",
    output:
        report(
            "reports/crel_i2t/fig3_violins_alpha{alpha}.png",
            caption="../../report/crel/i2t_fig3.rst",
            category="CReL image-to-text",
            subcategory="Fig. 3",
            labels={"figure": "Fig. 3"},
        ),
    wildcard_constraints:
        **I2T_WILDCARDS,
    log:
        "logs/crel_i2t/fig3_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_fig3.py"


rule i2t_fig4:
    input:
        unpack(i2t_example_inputs),
    output:
        report(
            "reports/crel_i2t/fig4_examples_alpha{alpha}.png",
            caption="../../report/crel/i2t_fig4.rst",
            category="CReL image-to-text",
            subcategory="Fig. 4",
            labels={"figure": "Fig. 4"},
        ),
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        files=i2t_example_files,
        metrics=I2T_METRICS,
        examples=I2T["examples"],
    log:
        "logs/crel_i2t/fig4_alpha{alpha}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_fig4.py"


rule i2t_fig6:
    input:
        expand("results/crel_i2t/{model}/{metric}/num_z0_alpha{{alpha}}.parquet", model=I2T_MODELS, metric=I2T_METRICS),
    output:
        report(
            "reports/crel_i2t/fig6_num_z0_alpha{alpha}.png",
            caption="../../report/crel/i2t_fig6.rst",
            category="CReL image-to-text",
            subcategory="Fig. 6",
            labels={"figure": "Fig. 6"},
        ),
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        num_z0=I2T["reliability"]["num_z0"],
    log:
        "logs/crel_i2t/fig6_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_fig6.py"


rule i2t_card:
    input:
        scores=i2t_scores,
        table="results/crel_i2t/table2_alpha{alpha}.parquet",
    output:
        report(
            "reports/crel_i2t/card_{model}_alpha{alpha}.png",
            caption="../../report/crel/i2t_card.rst",
            category="CReL image-to-text",
            subcategory="Reliability cards",
            labels={"model": "{model}"},
        ),
    wildcard_constraints:
        **I2T_WILDCARDS,
    log:
        "logs/crel_i2t/card_{model}_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_card.py"


rule i2t_temperature:
    """The temperature ablation: one captioner sampled at each temperature of crel.image_to_text.temperature_sweep."""
    input:
        i2t_temperature_scores,
    output:
        report(
            "reports/crel_i2t/temperature_alpha{alpha}.md",
            caption="../../report/crel/i2t_temperature.rst",
            category="CReL image-to-text",
            subcategory="Temperature ablation",
            labels={"table": "temperature ablation"},
        ),
    wildcard_constraints:
        **I2T_WILDCARDS,
    params:
        temperatures={name: temperature for name, (_, temperature) in I2T_VARIANTS.items()},
    log:
        "logs/crel_i2t/temperature_alpha{alpha}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    script:
        "../../scripts/crel/i2t_temperature.py"


rule crel_i2t_temperature:
    """Opt-in ablation: the temperature table (crel.image_to_text.temperature_sweep)."""
    input:
        i2t_temperature_targets,


# The scenes sidecar exists only in the mini-world; real COCO has no object truth to check captions against.
if COCO["source"] == "miniworld":

    rule i2t_grounding:
        """Do the captioners look at the image? Colour and shape mentions against the scene and shuffled scenes."""
        input:
            unpack(i2t_grounding_inputs),
        output:
            table="results/crel_i2t/grounding.parquet",
            markdown=report(
                "reports/crel_i2t/grounding.md",
                caption="../../report/crel/i2t_grounding.rst",
                category="CReL image-to-text",
                subcategory="Grounding",
                labels={"table": "grounding"},
            ),
        params:
            generated=i2t_generated_captions,
            seed=I2T["seed"],
        log:
            "logs/crel_i2t/grounding.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        script:
            "../../scripts/crel/i2t_grounding.py"
