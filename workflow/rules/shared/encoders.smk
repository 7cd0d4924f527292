# Tiny CLIP and BERT trained on the mini-world's train split (only when the config says `train:`;
# a `path:` encoder is read as it is). Their outputs are save_pretrained folders.
if word_tokenizer_needed():

    rule word_tokenizer:
        output:
            folder=directory("results/encoders/tokenizer"),
            manifest=saved_manifest("results/encoders/tokenizer"),
        log:
            "logs/shared/word_tokenizer.log",
        conda:
            "../../../envs/torch.yaml"
        threads: 1
        resources:
            mem_mb=1000,
            runtime=10,
        script:
            "../../scripts/shared/word_tokenizer.py"


if "train" in ENCODERS["clip"]:

    rule train_clip:
        input:
            captions=coco_world(),
            tokenizer=saved_manifest("results/encoders/tokenizer"),
        output:
            model=directory("results/encoders/clip"),
            manifest=saved_manifest("results/encoders/clip"),
        params:
            train=canonical(ENCODERS["clip"]["train"]),
            novel_shapes=NOVEL_SHAPES,
            image_size=ENCODERS["image_size"],
            seed=ENCODERS["seed"],
        log:
            "logs/shared/train_clip.log",
        conda:
            "../../../envs/torch.yaml"
        # One thread: a 2-thread job on a busy 2-core machine waits until both cores are free at
        # once, which came 16 minutes into `make run`; alone on one core it starts at once.
        threads: 1
        priority: 50  # every caption feature waits for it; start it before the captioners
        resources:
            mem_mb=6000,
            runtime=60,
            gpu=0,
        script:
            "../../scripts/shared/train_clip.py"


if "train" in ENCODERS["bert"]:

    rule train_bert:
        input:
            captions=coco_world(),
            tokenizer=saved_manifest("results/encoders/tokenizer"),
        output:
            model=directory("results/encoders/bert"),
            manifest=saved_manifest("results/encoders/bert"),
        params:
            train=canonical(ENCODERS["bert"]["train"]),
            max_length=ENCODERS["bert"].get("max_length", 50),
            seed=ENCODERS["seed"],
        log:
            "logs/shared/train_bert.log",
        conda:
            "../../../envs/torch.yaml"
        threads: 1
        priority: 40
        resources:
            mem_mb=4000,
            runtime=60,
            gpu=0,
        script:
            "../../scripts/shared/train_bert.py"


if "train" in ENCODERS.get("dino", {}):

    rule train_dino:
        """The tiny DINOv2 of DINO-SIM, self-supervised on the train split's images and fresh renders of their scenes."""
        input:
            captions=coco_world(),
        output:
            model=directory("results/encoders/dino"),
            manifest=saved_manifest("results/encoders/dino"),
        params:
            train=canonical(ENCODERS["dino"]["train"]),
            image_size=ENCODERS["image_size"],
            seed=ENCODERS["seed"],
        log:
            "logs/shared/train_dino.log",
        conda:
            "../../../envs/torch.yaml"
        threads: 1
        priority: 40
        resources:
            mem_mb=4000,
            runtime=60,
            gpu=0,
        script:
            "../../scripts/shared/train_dino.py"


rule encoder_signal:
    """CLIP retrieval R@1/R@5 in a 1,000-way gallery and the one-noun foil gap; BERT same-image agreement."""
    input:
        captions=coco_world(),
        clip=trained_encoder_inputs("clip"),
        bert=trained_encoder_inputs("bert"),
    output:
        report(
            "results/encoders/signal.json",
            caption="../../report/shared/encoder_signal.rst",
            category="Encoders",
            subcategory="Signal",
            labels={"table": "encoder signal"},
        ),
    params:
        bert_max_length=ENCODERS["bert"].get("max_length", 50),
        dtypes={encoder: ENCODERS[encoder].get("dtype", "auto") for encoder in ("clip", "bert")},
        gallery=SIGNAL_GALLERY,
        novel_shapes=NOVEL_SHAPES,
    log:
        "logs/shared/encoder_signal.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(encoder_signal_work),
        gpu=0,
    script:
        "../../scripts/shared/encoder_signal.py"
