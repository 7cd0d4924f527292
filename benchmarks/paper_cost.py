"""GPU cost of the paper config: ``bench_paper_gpu.py``'s seconds per item times each rule's items, in GPU-hours.

Reads the benchmark's JSON and ``config/paper.yaml`` and prints a Markdown table: per rule (one row per
entry of the JSON) the items the paper run processes, where that count comes from and whether it is an
estimate, the GPU-hours in bfloat16 and float32, the peak memory and the smallest of A100-40GB,
A100-80GB, H100-80GB and H200-141GB it fits with 10% headroom; then the total, and a provenance line
(card, date, commit of the measuring run).

Item counts: the config's where it states them (``crel.text_to_image.items``, the per-condition sample
counts, the generators' steps or epochs), the datasets' sizes as the papers and ``../shared/REFERENCE.md`` state
them (COCO 2014 val 40,504 images, CelebA 202,599, RxRx1 125,510, the CLIPScore benchmarks' pairs), and
where the workflow's reach is not a stated number (the images each feature job reads, a regime's
training support), an estimate that says what it assumes.

Usage::

    python benchmarks/paper_cost.py benchmarks/out/paper_gpu.json [--config config/paper.yaml]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_paper_gpu import DTYPES, ROOT, paper_config  # noqa: E402

from condeval.crc.benchmarks import PAPER_PAIRS as CRC_PAIRS  # noqa: E402
from condeval.datasets.coco import VAL2014_IMAGES as COCO_VAL  # noqa: E402
from condeval.trust.design import RELEASE_IMAGES  # noqa: E402

CELEBA, RXRX1 = RELEASE_IMAGES["celeba"], RELEASE_IMAGES["rxrx1"]

GIB = 2**30
HEADROOM = 1.10
#: Each card's memory as nvidia-smi reports it (MiB; recalled): the smallest that holds peak × HEADROOM is named.
CARDS = {"A100-40GB": 40960, "A100-80GB": 81920, "H100-80GB": 81559, "H200-141GB": 143771}
#: The queried conditions of a trust dataset: CelebA's 4 binary attributes (16 tuples), RxRx1's canonical 50
#: (25 seen and 25 unseen pairs; REFERENCE.md).
CONDITIONS = {"celeba": 16, "rxrx1": 50}
#: t2i_signal's gallery: the first 1,000 captions, their generated and real images, per generator (the rule's params).
SIGNAL_GALLERY = 1_000


@dataclass(frozen=True)
class Items:
    count: int
    basis: str
    estimate: bool


def _regimes(config: dict) -> int:
    return len(config["trust"]["regimes"])


def _generated_images(config: dict, wildcard) -> Items:
    return Items(config["crel"]["text_to_image"]["items"], "crel.text_to_image.items", False)


def _captions(config: dict, wildcard) -> Items:
    return Items(COCO_VAL, "COCO 2014 val images, one caption each", False)


def _image_features(config: dict, wildcard) -> Items:
    sources = 1 + len(config["crel"]["text_to_image"]["models"])
    return Items(COCO_VAL * sources, f"{sources} x 40,504 images: val and each generator's", True)


def _text_features(config: dict, wildcard) -> Items:
    sources = 1 + len(config["crel"]["image_to_text"]["models"])
    return Items(COCO_VAL * sources, f"{sources} x 40,504 captions: val's and each captioner's", True)


def _signal(config: dict, wildcard) -> Items:
    generators = len(config["crel"]["text_to_image"]["models"])
    return Items(2 * SIGNAL_GALLERY * generators, f"{generators} generators x (1,000 generated + 1,000 real)", True)


def _crc_pairs(config: dict, wildcard) -> Items:
    fraction = config["crc"]["words"]["calibration_fraction"]
    pairs = {**CRC_PAIRS, "foil_it_train": math.ceil(fraction * CRC_PAIRS["foil_it_train"])}
    return Items(sum(pairs.values()), "pairs of " + ", ".join(pairs) + f" ({fraction:g} of foil_it_train)", True)


def _releases(config: dict, wildcard) -> Items:
    return Items(CELEBA + RXRX1, "CelebA 202,599 + RxRx1 125,510 images", False)


def _training_images(config: dict, wildcard) -> Items:
    training, variants = config["trust"]["generator_training"], 1 if wildcard == "vanilla" else 2
    named = "" if variants == 1 else " x 2 (REPA-DINOv3 and REPA-SigLIP, same step cost assumed)"
    if "steps" in training:
        per_regime = training["steps"] * training["batch_size"] * len(config["trust"]["datasets"])
        length = f"{training['steps']:,} steps x batch {training['batch_size']} x {len(config['trust']['datasets'])} datasets"
    else:
        per_regime = training["epochs"] * (CELEBA + RXRX1)
        length = f"{training['epochs']} epochs x support ~ whole release"
    basis = f"{length} x {_regimes(config)} regimes{named}"
    return Items(per_regime * _regimes(config) * variants, basis, True)


def _samples(config: dict, wildcard) -> Items:
    trust = config["trust"]
    per = {name: dataset["per_condition"] for name, dataset in trust["datasets"].items()}
    variants = len(trust["generators"])
    basis = f"(16 x {per['celeba']} + 50 x {per['rxrx1']}) samples x {variants} generators x {_regimes(config)} regimes"
    return Items(sum(CONDITIONS[name] * per[name] for name in per) * variants * _regimes(config), basis, True)


def _translator_pairs(config: dict, wildcard) -> Items:
    settings = config["trust"]["translator"]
    t, variants = len(settings["t"]), len(settings["variants"])
    basis = f"{t} noise levels x support ~ whole release x {variants} generators x {_regimes(config)} regimes"
    return Items(t * (CELEBA + RXRX1) * variants * _regimes(config), basis, True)


#: Rule -> its items in the paper run, a function of the config and the entry's wildcard.
ITEMS = {
    "generate_images": _generated_images,
    "generate_captions": _captions,
    "image_features": _image_features,
    "text_features": _text_features,
    "t2i_signal": _signal,
    "crc_sample": _crc_pairs,
    "trust_real_features": _releases,
    "trust_train_generator": _training_images,
    "trust_generate": _samples,
    "trust_train_translator": _translator_pairs,
}


def items(rule: str, wildcard: str | None, config: dict) -> Items:
    """The items the paper run puts through ``rule`` (one wildcard's share), with where the count comes from."""
    return ITEMS[rule](config, wildcard)


def fits(peak: int | None) -> str:
    """The smallest card of :data:`CARDS` holding ``peak`` bytes with 10% headroom."""
    if peak is None:
        return "n/a"
    need = peak * HEADROOM / 2**20
    return next((name for name, mib in CARDS.items() if need <= mib), "none listed")


def measured(result: dict | None) -> dict:
    """One precision's cells: seconds per item, peak and card (or why there are none)."""
    if not result or "seconds_per_item" not in result:
        if result and result.get("oom"):
            at = result.get("memory_at_failure_bytes")
            why = f"OOM on {result.get('card')}" + (f" at {at / GIB:.1f} GiB" if at else "")
        else:
            why = "not measured" if not result else ("skipped" if "skipped" in result else "error")
        return {"seconds": None, "peak": None, "why": why}
    return {"seconds": result["seconds_per_item"], "peak": result.get("peak_memory_bytes"), "why": ""}


def cost_rows(document: dict, config: dict) -> list[dict]:
    """One row per entry of the benchmark's JSON: items, and per precision seconds, GPU-hours, peak, card."""
    rows = []
    for name, record in document["rules"].items():
        count = items(record["rule"], record.get("wildcard"), config)
        row = {"rule": name, "items": count}
        for dtype in DTYPES:
            cell = measured(record["dtypes"].get(dtype))
            hours = None if cell["seconds"] is None else cell["seconds"] * count.count / 3600
            row[dtype] = cell | {"hours": hours, "card": fits(cell["peak"])}
        rows.append(row)
    return rows


def total(rows: list[dict], dtype: str) -> float:
    """GPU-hours of every row measured in ``dtype``."""
    return sum(row[dtype]["hours"] for row in rows if row[dtype]["hours"] is not None)


def _cells(cell: dict) -> list[str]:
    if cell["seconds"] is None:
        return [cell["why"], "", "", ""]
    peak = "" if cell["peak"] is None else f"{cell['peak'] / GIB:.1f}"
    return [f"{cell['seconds']:.4g}", f"{cell['hours']:,.1f}", peak, cell["card"]]


def provenance_line(document: dict) -> str:
    """Where the numbers come from: the (last) run's card, versions, date and commit, and every card measured on."""
    p = document["provenance"]
    size = "rehearsal sizes (--tiny)" if p.get("tiny") else "full-size models with random weights"
    results = [result for record in document["rules"].values() for result in record["dtypes"].values()]
    cards = sorted({result["card"] for result in results if "card" in result})
    mixed = f" Entries come from several cards ({', '.join(cards)})." if len(cards) > 1 else ""
    return (
        f"Measured on {p['card']} (torch {p['torch']}, CUDA {p['cuda']}, matmul TF32 "
        f"{'on' if p.get('tf32') else 'off'}), {p['date']}, commit {p['commit']}, in {len(document.get('runs', [p]))} "
        f"run(s): {size}, `benchmarks/bench_paper_gpu.py`.{mixed}"
    )


def markdown(rows: list[dict], document: dict) -> str:
    """The cost table in Markdown, its total row, and the provenance line."""
    head = ["rule", "items", "items from", "estimate"]
    for dtype in DTYPES:
        head += [f"{dtype} s/item", f"{dtype} GPU-h", f"{dtype} peak GiB", f"{dtype} fits"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        count = row["items"]
        cells = [row["rule"], f"{count.count:,}", count.basis, "yes" if count.estimate else "no"]
        for dtype in DTYPES:
            cells += _cells(row[dtype])
        lines.append("| " + " | ".join(cells) + " |")
    totals = ["**total**", "", "", ""]
    for dtype in DTYPES:
        totals += ["", f"**{total(rows, dtype):,.1f}**", "", ""]
    lines.append("| " + " | ".join(totals) + " |")
    note = (
        f"Peak: `torch.cuda.max_memory_allocated`; a card fits when peak x {HEADROOM:.2f} <= its memory. "
        "Totals add the rows measured in that precision."
    )
    return "\n".join([*lines, "", note, "", provenance_line(document)]) + "\n"


def main(argv=None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", nargs="?", default="benchmarks/out/paper_gpu.json")
    parser.add_argument("--config", default=str(ROOT / "config/paper.yaml"))
    args = parser.parse_args(argv)
    document = json.loads(Path(args.json).read_text())
    table = markdown(cost_rows(document, paper_config(args.config)), document)
    print(table, end="")
    return table


if __name__ == "__main__":
    main()
