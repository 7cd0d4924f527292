# Helpers of the trust-score track (config `trust:`): its validated section, the release file that
# stands for each dataset folder, and where an extractor comes from.
TRUST = track_config("trust")
TRUST_DATASETS = list(TRUST["datasets"])
TRUST_EXTRACTORS = ["dinov3", "siglip"]
TRUST_WILDCARDS = {
    "dataset": "|".join(TRUST_DATASETS),
    "extractor": "|".join(TRUST_EXTRACTORS),
}
# The file each release is read through; written last by a miniature rule, so it stands for the folder.
_RELEASE_FILE = {"celeba": "list_attr_celeba.txt", "rxrx1": "metadata.csv"}


def trust_release(dataset):
    """The release file that stands for dataset's folder (CelebA's attribute list, RxRx1's metadata.csv)."""
    return f"{TRUST['datasets'][dataset]['root']}/{_RELEASE_FILE[dataset]}"


def trust_release_input(wildcards):
    return trust_release(wildcards.dataset)


def trust_subset(dataset):
    """RxRx1's held-out pairs and queried subset sizes (CelebA: none)."""
    return canonical(TRUST["datasets"][dataset].get("subset", {}))


def trust_extractor(dataset, extractor):
    """An extractor as an input: the manifest of the one trained here, or the configured folder."""
    section = TRUST["extractors"][extractor]
    if "path" in section:
        return section["path"].replace("{dataset}", dataset)
    return saved_manifest(f"results/trust/{dataset}/extractors/{extractor}")


def trust_extractor_input(wildcards):
    return trust_extractor(wildcards.dataset, wildcards.extractor)


def trust_real_features(dataset, extractor):
    return f"results/trust/{dataset}/features/real-{extractor}.safetensors"


def trust_targets():
    """What `snakemake trust` builds: per dataset, the real table and the extractors' signal."""
    return [
        path
        for dataset in TRUST_DATASETS
        for path in (f"results/trust/{dataset}/extractor_signal.json", f"reports/trust/{dataset}/extractor_signal.md")
    ]
