# The miniature COCO world (coco.source: miniworld): scenes rendered with five captions each, in
# MS-COCO 2014's exact layout, plus the token/POS and scene sidecars later tracks label words with.
if COCO["source"] == "miniworld":

    rule miniworld_split:
        output:
            captions=f"{COCO_ROOT}/annotations/captions_{{split}}2014.json",
            tokens=f"{COCO_ROOT}/annotations/tokens_{{split}}2014.jsonl",
            scenes=f"{COCO_ROOT}/annotations/scenes_{{split}}2014.json",
            images=directory(f"{COCO_ROOT}/{{split}}2014"),
        wildcard_constraints:
            **SHARED_WILDCARDS,
        params:
            world=canonical(COCO["miniworld"]),
        log:
            "logs/shared/miniworld_{split}.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=30,
        script:
            "../../scripts/shared/miniworld_split.py"
