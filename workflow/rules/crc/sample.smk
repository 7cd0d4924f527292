# Attention-mask sampling (Section 3): per CLIP model, benchmark and caption shard, every pair's
# unmasked CLIPScore, the mean and std of its I×T masked CLIPScores and its word error scores f_v.
# Nothing here depends on alpha or delta, so editing them never resamples.


rule crc_sample:
    input:
        captions="results/crc/captions/{benchmark}.parquet",
        model=crc_model_inputs,
        tagger=crc_tagger_inputs(),
    output:
        "results/crc/{model}/samples/{benchmark}/shard-{shard}.parquet",
    wildcard_constraints:
        **CRC_WILDCARDS,
    params:
        sampling=crc_sampling_params,
        loading=crc_model_loading,
        tagger=canonical(CRC["tagger"]),
        shards=CRC["shards"],
        seed=CRC["seed"],
        keep_distribution=crc_keep_distribution,
        chunk_size=chunk_items(64),  # pairs: one image's masks then its captions, no batches
    log:
        "logs/crc/sample_{model}_{benchmark}_shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 10
    resources:
        **gpu_resources(crc_sampling_work),
        gpu=0,
    script:
        "../../scripts/crc/sample.py"
