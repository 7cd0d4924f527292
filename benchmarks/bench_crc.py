"""Benchmark C: the CLIPScore risk-control track's two hot spots, each against a baseline in the same run.

* **HB threshold search** (``condeval.crc.calibrate_threshold``) on ``--words`` calibration words
  (captions of 5–15 words, 10% errors, FOIL-like scores) and a ``--grid``-point λ grid, against a
  Python loop over the grid that computes each λ's risk with one vectorized pass (the
  straightforward implementation), and beside the exact search over every distinct score. The
  three λ̂ are reported; grid and loop must agree.
* **Attention-mask sampling throughput** (CLIPScores per second) of
  :class:`condeval.crc.sampling.AttentionMaskSampler` with the miniature's tiny CLIP architecture
  (config/config.yaml, random weights: speed does not depend on them), against a per-sample loop
  that encodes each of the I×T (masked image, masked caption) combinations separately.

Usage::

    python benchmarks/bench_crc.py [--out benchmarks/out/crc.json] [--words 1000000] [--grid 1000]
        [--pairs 20] [--loop-pairs 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from condeval.core.io import write_json
from condeval.core.risk import hb_p_value
from condeval.crc.metrics import caption_index, caption_losses
from condeval.crc.word_risk import WordRiskSettings, calibrate_threshold

REPO = Path(__file__).resolve().parents[1]


def _words(n_words: int, rng: np.random.Generator):
    lengths = rng.integers(5, 16, n_words // 10 + 1)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), n_words) + 1]
    groups = np.repeat(np.arange(len(lengths)), lengths)[:n_words]
    labels = (rng.random(len(groups)) < 0.1).astype(int)
    scores = 1 / (1 + np.exp(-(2.0 * labels - 1.0 + rng.normal(0, 1, len(groups)))))
    return scores, labels, groups


def _loop_threshold(scores, labels, groups, alpha, delta, grid) -> float:
    """The baseline: for each λ on the grid, flag, count per caption, average, bound; then Eq. 7."""
    caption = caption_index(groups)
    n = caption.max() + 1
    correct = np.bincount(caption, weights=1 - labels, minlength=n)
    lambdas = np.linspace(0, 1, grid)
    risks = []
    for lam in lambdas:
        flags = scores > lam
        tp = np.bincount(caption, weights=flags & (labels == 1), minlength=n)
        fp = np.bincount(caption, weights=flags & (labels == 0), minlength=n)
        risks.append(caption_losses(tp, fp, correct, "fdr").mean())
    passing = hb_p_value(np.array(risks), n, alpha) <= delta
    failing_above = np.flatnonzero(~passing[::-1])
    top = failing_above[0] if len(failing_above) else grid
    return float(lambdas[::-1][top - 1])


def _time(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def bench_threshold(n_words: int, grid: int, repeats: int = 3) -> dict:
    scores, labels, groups = _words(n_words, np.random.default_rng(0))
    alpha, delta = 0.2, 0.05
    grid_times, exact_times = [], []
    for _ in range(repeats):
        on_grid, seconds = _time(
            calibrate_threshold, scores, labels, groups, WordRiskSettings("fdr", alpha, delta, "caption", grid)
        )
        grid_times.append(seconds)
        exact, seconds = _time(
            calibrate_threshold, scores, labels, groups, WordRiskSettings("fdr", alpha, delta, "caption")
        )
        exact_times.append(seconds)
    loop, loop_seconds = _time(_loop_threshold, scores, labels, groups, alpha, delta, grid)
    if loop != on_grid:
        raise AssertionError(f"grid search {on_grid} and the loop over lambda {loop} disagree")
    return {
        "words": int(len(scores)),
        "captions": int(groups.max() + 1),
        "grid": grid,
        "alpha": alpha,
        "delta": delta,
        "lambda_grid": on_grid,
        "lambda_loop": loop,
        "lambda_exact": exact,
        "grid_s": min(grid_times),
        "exact_s": min(exact_times),
        "loop_s": loop_seconds,
        "speedup_grid_vs_loop": loop_seconds / min(grid_times),
    }


def _tiny_clip(folder: Path):
    from transformers import CLIPModel

    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.tokenizer import build_word_tokenizer

    encoders = yaml.safe_load((REPO / "config/config.yaml").read_text())["encoders"]
    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    model = CLIPModel(
        tiny_clip_config(tokenizer, encoders["image_size"], ClipSizes(**encoders["clip"]["train"]["model"]))
    ).eval()
    for part in (model, tokenizer, clip_image_processor(encoders["image_size"])):
        part.save_pretrained(folder)
    return yaml.safe_load((REPO / "config/config.yaml").read_text())["crc"]["sampling"]["words"]


@torch.no_grad()
def _loop_scores(sampler, image, words, rng) -> int:
    """The baseline: every (masked image, masked caption) combination encoded on its own."""
    from condeval.crc.sampling import clipscore

    n = 0
    image_masks = sampler._image_attention_mask(sampler.model.vision_model.embeddings.num_positions, rng)
    tokens, positions = sampler._word_tokens(words)
    pixels = sampler.encoder.image_processor([image], return_tensors="pt")["pixel_values"]
    vision = sampler.model.vision_model
    for i in range(1, 1 + sampler.n_image):
        for _ in range(sampler.n_text):
            hidden = vision.pre_layrnorm(vision.embeddings(pixels))
            hidden = vision.encoder(inputs_embeds=hidden, attention_mask=image_masks[i : i + 1]).last_hidden_state
            image_embedding = sampler.model.visual_projection(vision.post_layernorm(hidden[:, 0]))
            attention = tokens["attention_mask"].clone()
            attention[0, positions[int(rng.integers(len(words)))]] = 0
            text_embedding = sampler.encoder.text_embeddings(tokens["input_ids"], attention)
            clipscore(text_embedding, image_embedding, sampler.weight)
            n += 1
    return n


def bench_sampler(pairs: int, loop_pairs: int, scratch: Path) -> dict:
    from condeval.crc.pos import LexiconTagger
    from condeval.crc.sampling import AttentionMaskSampler
    from condeval.datasets.miniworld import captions_for, draw_scene, render_scene
    from condeval.encoders.features import ClipEncoder

    settings = _tiny_clip(scratch / "clip")
    settings = {key: settings[key] for key in ("n_image", "n_text", "image_ratio", "text_ratio")}
    rng = np.random.default_rng(0)
    scenes = [draw_scene(rng) for _ in range(pairs)]
    images = [render_scene(objects, rng) for objects in scenes]
    captions = [captions_for(objects, rng, n=1)[0] for objects in scenes]
    tagger = LexiconTagger({token: pos for c in captions for token, pos in zip(c.tokens, c.pos)})
    sampler = AttentionMaskSampler(ClipEncoder(scratch / "clip"), tagger, **settings)
    sampler.sample(images[0], captions[0].tokens, seed=0)  # warm-up
    start = time.perf_counter()
    for k, (image, caption) in enumerate(zip(images, captions)):
        sampler.sample(image, caption.tokens, seed=k)
    batched_s = time.perf_counter() - start
    batched_rate = pairs * settings["n_image"] * settings["n_text"] / batched_s
    start = time.perf_counter()
    n_loop = sum(_loop_scores(sampler, images[k], captions[k].tokens, rng) for k in range(loop_pairs))
    loop_s = time.perf_counter() - start
    loop_rate = n_loop / loop_s
    return {
        **settings,
        "pairs": pairs,
        "batched_s": batched_s,
        "batched_scores_per_s": batched_rate,
        "batched_pairs_per_s": pairs / batched_s,
        "loop_pairs": loop_pairs,
        "loop_s": loop_s,
        "loop_scores_per_s": loop_rate,
        "speedup": batched_rate / loop_rate,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks/out/crc.json")
    parser.add_argument("--words", type=int, default=1_000_000)
    parser.add_argument("--grid", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--loop-pairs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import tempfile

    threshold = bench_threshold(args.words, args.grid)
    print(
        f"HB threshold search, {threshold['words']:,} words, {args.grid}-point grid: {threshold['grid_s']:.3f} s "
        f"(exact over every score {threshold['exact_s']:.3f} s; loop over lambda {threshold['loop_s']:.2f} s, "
        f"{threshold['speedup_grid_vs_loop']:.0f}x)"
    )
    with tempfile.TemporaryDirectory() as scratch:
        sampler = bench_sampler(args.pairs, args.loop_pairs, Path(scratch))
    print(
        f"attention-mask sampling: {sampler['batched_scores_per_s']:,.0f} CLIPScores/s batched "
        f"({sampler['batched_pairs_per_s']:.1f} pairs/s at I={sampler['n_image']}, T={sampler['n_text']}); "
        f"per-sample loop {sampler['loop_scores_per_s']:,.0f}/s; speedup {sampler['speedup']:.0f}x"
    )
    write_json(
        {
            "machine": {
                "platform": platform.platform(),
                "cpus": os.cpu_count(),
                "torch_threads": args.threads,
                "torch": torch.__version__,
            },
            "threshold": threshold,
            "sampler": sampler,
        },
        args.out,
    )


if __name__ == "__main__":
    main()
