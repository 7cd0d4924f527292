"""condeval.rehearsal.models: the paper config's hub repositories at their real shapes, random weights.

Each repository is loaded as the project loads the real one (``from_pretrained(folder)``, offline) and
its real shapes are asserted: resolutions, patch sizes, channels, latent channels and down-sampling,
positions, tokenizer lengths and special tokens, the widths that must agree across a pipeline's
components, the stored dtypes and shards.
"""

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from condeval.rehearsal.models import REPOS, catalogue_repos, learn_merges, write_hub_repo, write_hub_repos

ROOT = Path(__file__).resolve().parents[2]
OPENAI_MEAN, OPENAI_STD = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
SD3_MEDIUM, SD35_LARGE = "stabilityai/stable-diffusion-3-medium-diffusers", "stabilityai/stable-diffusion-3.5-large"
FLUX, BLIP_BASE = "black-forest-labs/FLUX.1-dev", "Salesforce/blip-image-captioning-base"
PRIOR, DECODER = "kandinsky-community/kandinsky-2-2-prior", "kandinsky-community/kandinsky-2-2-decoder"
ML_B32 = "calpt/CLIP-ViT-B-32-xlm-roberta-base-laion5B-s13B-b90k"
ML_H14 = "calpt/CLIP-ViT-H-14-frozen-xlm-roberta-large-laion5B-s13B-b90k"


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> dict[str, Path]:
    """Every repository of :data:`REPOS`, seed 0, under one hub root."""
    return write_hub_repos(tmp_path_factory.mktemp("hub"))


@pytest.fixture(autouse=True)
def _quiet_libraries():
    """transformers' and diffusers' warnings about tiny configs off for each test, restored after."""
    from diffusers.utils import logging as diffusers_logging
    from transformers.utils import logging as transformers_logging

    levels = transformers_logging.get_verbosity(), diffusers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()
    diffusers_logging.set_verbosity_error()
    yield
    transformers_logging.set_verbosity(levels[0])
    diffusers_logging.set_verbosity(levels[1])


def _photo(height: int = 300, width: int = 400) -> Image.Image:
    """A random RGB image of a photo's odd size (the processors resize and crop it)."""
    return Image.fromarray(np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8))


def _files(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}


def _stored_dtypes(folder: Path) -> set[torch.dtype]:
    """The dtypes of every tensor in ``folder``'s safetensors files."""
    from safetensors import safe_open

    dtypes = set()
    for path in folder.glob("*.safetensors"):
        with safe_open(path, "pt") as weights:
            dtypes |= {weights.get_tensor(name).dtype for name in weights.keys()}  # noqa: SIM118
    return dtypes


def _weight_shards(folder: Path) -> int:
    """The number of safetensors files; with more than one, checks the index names them all."""
    shards = sorted(path.name for path in folder.glob("*.safetensors"))
    if len(shards) > 1:
        index = json.loads(next(folder.glob("*.safetensors.index.json")).read_text())
        assert sorted(set(index["weight_map"].values())) == shards
    return len(shards)


def _sentencepiece_pieces(path: Path) -> list[str]:
    from transformers.utils import sentencepiece_model_pb2_new as sentencepiece

    model = sentencepiece.ModelProto()
    model.ParseFromString(path.read_bytes())
    assert model.trainer_spec.model_type == sentencepiece.TrainerSpec.ModelType.Value("UNIGRAM")
    return [piece.piece for piece in model.pieces]


def _vocabulary(tokenizer) -> list[str]:
    return tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))


def _folder_digest(folder: Path) -> dict[str, str]:
    return {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in sorted(_files(folder))}


# ------------------------------------------------------------------------------------------ registry
def test_repos_are_exactly_the_catalogues_hub_repositories():
    repos = catalogue_repos(ROOT / "config" / "sources.yaml")
    assert len(repos) == 21 and len(set(repos)) == 21
    assert set(REPOS) == set(repos)


def test_write_hub_repos_lays_out_owner_and_name_and_keeps_existing_folders(hub, tmp_path):
    assert all(folder == folder.parents[1] / repo for repo, folder in hub.items())
    kept = tmp_path / "facebook" / "dinov2-base"
    kept.mkdir(parents=True)
    (kept / "mine.txt").write_text("kept")
    folders = write_hub_repos(tmp_path, ["facebook/dinov2-base", "stabilityai/sd-vae-ft-mse"])
    assert _files(folders["facebook/dinov2-base"]) == {"mine.txt"}
    assert _files(folders["stabilityai/sd-vae-ft-mse"]) == {"config.json", "diffusion_pytorch_model.safetensors"}


def test_write_hub_repo_replaces_a_folder_whole_and_refuses_unknown_repos(tmp_path):
    folder = tmp_path / "sd-vae-ft-mse"
    folder.mkdir()
    (folder / "stale.bin").write_bytes(b"old")
    assert write_hub_repo("stabilityai/sd-vae-ft-mse", folder) == folder
    assert "stale.bin" not in _files(folder) and "config.json" in _files(folder)
    assert [path.name for path in tmp_path.iterdir()] == ["sd-vae-ft-mse"]  # no temporary folder left
    with pytest.raises(KeyError, match="no rehearsal builder"):
        write_hub_repo("someone/else", tmp_path / "else")


def test_learn_merges_breaks_ties_by_text():
    words = {("b", "a"): 2, ("c", "d"): 2, ("a", "b"): 1}
    assert learn_merges(words, 10) == [("b", "a"), ("c", "d"), ("a", "b")]
    assert learn_merges(dict(reversed(words.items())), 10) == [("b", "a"), ("c", "d"), ("a", "b")]


# ------------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("repo", [FLUX, BLIP_BASE, ML_B32, "google/siglip-so400m-patch14-224"])
def test_the_same_seed_writes_the_same_bytes(hub, tmp_path, repo):
    again = write_hub_repo(repo, tmp_path / "again", seed=0)
    assert _folder_digest(again) == _folder_digest(hub[repo])
    other = _folder_digest(write_hub_repo(repo, tmp_path / "other", seed=1))
    changed = {name for name, digest in _folder_digest(hub[repo]).items() if other[name] != digest}
    assert changed and all(name.endswith(".safetensors") for name in changed)  # only the weights


@pytest.mark.slow
def test_another_process_writes_the_same_bytes(hub, tmp_path):
    """Tokenizer training must not depend on the process's hash seed (the ``tokenizers`` trainers do)."""
    repos = [SD3_MEDIUM, "FacebookAI/xlm-roberta-base", "google-bert/bert-base-uncased"]
    code = (
        "import sys; from pathlib import Path; from condeval.rehearsal.models import write_hub_repos; "
        "write_hub_repos(Path(sys.argv[1]), sys.argv[2:])"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path), *repos], check=True, capture_output=True)
    for repo in repos:
        assert _folder_digest(tmp_path / repo) == _folder_digest(hub[repo]), repo


# --------------------------------------------------------------------------------- encoders
def _check_clip_tokenizer(tokenizer, pad_token: str = "<|endoftext|>") -> None:
    """CLIP's: 77 positions, its start and end strings, ``<|endoftext|>`` the largest id (as 49407, where
    the hub configs' legacy ``eos_token_id`` 2 makes transformers pool)."""
    assert tokenizer.model_max_length == 77
    assert (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) == (
        "<|startoftext|>",
        "<|endoftext|>",
        pad_token,
    )
    assert tokenizer.eos_token_id == len(tokenizer) - 1 and tokenizer.bos_token_id == len(tokenizer) - 2
    ids = tokenizer("A red bicycle.").input_ids  # not "!": a pad "!" is a special token, kept whole
    assert ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
    assert tokenizer.convert_ids_to_tokens(ids[1:-1]) == ["a</w>", "red</w>", "bicycle</w>", ".</w>"]


def test_clip_vit_l14(hub):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    path = hub["openai/clip-vit-large-patch14"]
    assert _files(path) >= {
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "vocab.json",
        "merges.txt",
    }
    model = CLIPModel.from_pretrained(path).eval()
    vision, text = model.config.vision_config, model.config.text_config
    assert (vision.image_size, vision.patch_size, vision.num_channels, vision.hidden_act) == (224, 14, 3, "quick_gelu")
    assert (text.max_position_embeddings, text.eos_token_id) == (77, 2)
    tokenizer = AutoTokenizer.from_pretrained(path)
    _check_clip_tokenizer(tokenizer)
    assert text.vocab_size == len(tokenizer)
    processor = AutoImageProcessor.from_pretrained(path)
    assert (list(processor.image_mean), list(processor.image_std), processor.resample) == (OPENAI_MEAN, OPENAI_STD, 3)
    pixels = processor(_photo(), return_tensors="pt").pixel_values
    assert pixels.shape == (1, 3, 224, 224)
    with torch.no_grad():
        assert model.vision_model(pixel_values=pixels).last_hidden_state.shape[1] == 1 + (224 // 14) ** 2
        tokens = tokenizer(["a cat", "two dogs on the grass"], padding="max_length", max_length=77, return_tensors="pt")
        out = model.text_model(**tokens)
        eos = (tokens.input_ids == tokenizer.eos_token_id).int().argmax(-1)  # the first <|endoftext|>
        assert torch.allclose(out.pooler_output, out.last_hidden_state[torch.arange(2), eos])
        assert model.get_text_features(**tokens).pooler_output.shape == (2, model.config.projection_dim)


def test_dinov2_base(hub):
    from transformers import AutoImageProcessor, Dinov2Model

    path = hub["facebook/dinov2-base"]
    model = Dinov2Model.from_pretrained(path).eval()
    assert (model.config.patch_size, model.config.num_channels, model.config.image_size) == (14, 3, 518)
    processor = AutoImageProcessor.from_pretrained(path)
    assert type(processor).__name__.startswith("BitImageProcessor") and processor.size == {"shortest_edge": 256}
    pixels = processor(_photo(), return_tensors="pt").pixel_values
    assert pixels.shape == (1, 3, 224, 224)
    with torch.no_grad():
        assert model(pixel_values=pixels).last_hidden_state.shape[1] == 1 + (224 // 14) ** 2


def test_dinov3_vitl16(hub):
    from transformers import DINOv3ViTModel

    path = hub["facebook/dinov3-vitl16-pretrain-lvd1689m"]
    model = DINOv3ViTModel.from_pretrained(path).eval()
    config = model.config
    assert (config.image_size, config.patch_size, config.num_channels, config.num_register_tokens) == (224, 16, 3, 4)
    with torch.no_grad():
        tokens = model(pixel_values=torch.zeros(1, 3, 224, 224)).last_hidden_state
    assert tokens.shape[1] == 1 + 4 + (224 // 16) ** 2
    assert json.loads((path / "preprocessor_config.json").read_text()) == {
        "do_normalize": True,
        "do_rescale": True,
        "do_resize": True,
        "image_mean": [0.485, 0.456, 0.406],
        "image_processor_type": "DINOv3ViTImageProcessorFast",
        "image_std": [0.229, 0.224, 0.225],
        "resample": 2,
        "rescale_factor": 1 / 255,
        "size": {"height": 224, "width": 224},
    }


def test_siglip_so400m(hub):
    from transformers import AutoImageProcessor, AutoModel, SiglipModel

    path = hub["google/siglip-so400m-patch14-224"]
    assert _files(path) == {
        "config.json",
        "model.safetensors",
        "preprocessor_config.json",
        "special_tokens_map.json",
        "spiece.model",
        "tokenizer_config.json",
    }
    model = SiglipModel.from_pretrained(path).eval()
    assert type(AutoModel.from_pretrained(path)) is SiglipModel
    vision, text = model.config.vision_config, model.config.text_config
    assert (vision.image_size, vision.patch_size, vision.num_channels, vision.vision_use_head) == (224, 14, 3, True)
    assert (text.max_position_embeddings, text.pad_token_id, text.eos_token_id) == (64, 1, 1)
    processor = AutoImageProcessor.from_pretrained(path)
    assert (list(processor.image_mean), list(processor.image_std)) == ([0.5] * 3, [0.5] * 3)
    assert processor.size == {"height": 224, "width": 224}
    pixels = processor(_photo(), return_tensors="pt").pixel_values
    with torch.no_grad():
        assert model.vision_model(pixel_values=pixels).last_hidden_state.shape[1] == (224 // 14) ** 2
    pieces = _sentencepiece_pieces(path / "spiece.model")
    assert pieces[:3] == ["<pad>", "</s>", "<unk>"] and text.vocab_size == len(pieces)
    tokenizer_config = json.loads((path / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "SiglipTokenizer" and tokenizer_config["model_max_length"] == 64
    assert tokenizer_config["pad_token"] == tokenizer_config["eos_token"] == pieces[text.pad_token_id]


def test_bert_base_uncased(hub):
    from transformers import AutoTokenizer, BertModel

    path = hub["google-bert/bert-base-uncased"]
    assert _files(path) == {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "vocab.txt"}
    model = BertModel.from_pretrained(path, add_pooling_layer=False)
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert (model.config.max_position_embeddings, model.config.type_vocab_size, tokenizer.model_max_length) == (
        512,
        2,
        512,
    )
    assert model.config.vocab_size == len(tokenizer)
    ids = {token: tokenizer.convert_tokens_to_ids(token) for token in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]}
    assert ids == {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103}
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("The CAT, sleeping.").input_ids)
    assert tokens[:4] == ["[CLS]", "the", "cat", ","] and tokens[-2:] == [".", "[SEP]"]
    assert "".join(token.removeprefix("##") for token in tokens[4:-2]) == "sleeping"
    assert (path / "vocab.txt").read_text().splitlines() == _vocabulary(tokenizer)


@pytest.mark.parametrize("repo", ["FacebookAI/xlm-roberta-base", "FacebookAI/xlm-roberta-large"])
def test_xlm_roberta(hub, repo):
    from transformers import AutoConfig, AutoTokenizer

    path = hub[repo]
    tokenizer = AutoTokenizer.from_pretrained(path)
    vocabulary = _vocabulary(tokenizer)
    assert vocabulary[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and vocabulary[-1] == "<mask>"
    assert (tokenizer.mask_token_id, tokenizer.model_max_length) == (len(tokenizer) - 1, 512)
    ids = tokenizer("a cat").input_ids
    assert (ids[0], ids[-1]) == (0, 2)
    config = AutoConfig.from_pretrained(path)
    assert (config.max_position_embeddings, config.type_vocab_size, config.pad_token_id) == (514, 1, 1)
    assert config.vocab_size == len(tokenizer)
    pieces = _sentencepiece_pieces(path / "sentencepiece.bpe.model")  # fairseq ids are SentencePiece's + 1
    assert pieces[:3] == ["<unk>", "<s>", "</s>"] and pieces[3:] == vocabulary[4:-1]


@pytest.mark.parametrize(
    "repo,patch_size", [("laion/CLIP-ViT-B-32-laion2B-s34B-b79K", 32), ("laion/CLIP-ViT-H-14-laion2B-s32B-b79K", 14)]
)
def test_laion_clip_processor_and_config(hub, repo, patch_size):
    from transformers import AutoImageProcessor, CLIPConfig

    path = hub[repo]
    vision = CLIPConfig.from_pretrained(path).vision_config
    assert (vision.image_size, vision.patch_size, vision.num_channels) == (224, patch_size, 3)
    processor = AutoImageProcessor.from_pretrained(path)
    assert (list(processor.image_mean), list(processor.image_std)) == (OPENAI_MEAN, OPENAI_STD)
    assert processor(_photo(), return_tensors="pt").pixel_values.shape == (1, 3, 224, 224)


@pytest.mark.parametrize(
    "repo,patch_size,tokenizer_repo,processor_repo,mlp",
    [
        (ML_B32, 32, "FacebookAI/xlm-roberta-base", "laion/CLIP-ViT-B-32-laion2B-s34B-b79K", True),
        (ML_H14, 14, "FacebookAI/xlm-roberta-large", "laion/CLIP-ViT-H-14-laion2B-s32B-b79K", False),
    ],
)
def test_multilingual_clip_remote_code(hub, repo, patch_size, tokenizer_repo, processor_repo, mlp):
    from transformers import AutoImageProcessor, AutoModel, AutoTokenizer, CLIPVisionModel, XLMRobertaModel

    path = hub[repo]
    model, loading = AutoModel.from_pretrained(path, trust_remote_code=True, output_loading_info=True)
    assert not any(loading.values()), loading  # every weight round-trips
    config = model.config
    assert (config.model_type, type(model).__name__) == ("vision-text-dual-encoder", "XLMRobertaCLIPModel")
    assert isinstance(model.vision_model, CLIPVisionModel) and isinstance(model.text_model, XLMRobertaModel)
    tower = getattr(model.vision_model, "vision_model", model.vision_model)  # transformers 5: no inner vision_model
    assert len(tower.encoder.layers) == config.vision_config.num_hidden_layers
    vision, text = config.vision_config, config.text_config
    assert (vision.image_size, vision.patch_size, vision.num_channels) == (224, patch_size, 3)
    assert (text.max_position_embeddings, text.type_vocab_size, text.pad_token_id) == (514, 1, 1)
    tokenizer = AutoTokenizer.from_pretrained(hub[tokenizer_repo])
    assert text.vocab_size == len(tokenizer)
    width, projection = text.hidden_size, config.projection_dim
    if mlp:  # OpenCLIP's "mlp" projection: hidden -> (hidden + projection) // 2 -> GELU -> projection
        assert [layer.weight.shape for layer in model.text_projection[::2]] == [
            ((width + projection) // 2, width),
            (projection, (width + projection) // 2),
        ]
    else:
        assert isinstance(model.text_projection, torch.nn.Linear) and model.text_projection.bias is None
    pixels = AutoImageProcessor.from_pretrained(hub[processor_repo])(_photo(), return_tensors="pt").pixel_values
    with torch.no_grad():
        tokens = tokenizer(["a cat", "two red dogs playing on the green grass"], padding=True, return_tensors="pt")
        text_features = model.get_text_features(tokens.input_ids, tokens.attention_mask)
        alone = tokenizer(["a cat"], return_tensors="pt")
        assert text_features.shape == (2, projection)
        # the mean over the attention mask: padding does not move a caption's features
        assert torch.allclose(
            model.get_text_features(alone.input_ids, alone.attention_mask)[0], text_features[0], atol=1e-5
        )
        assert model.get_image_features(pixels).shape == (1, projection)
    assert model.logit_scale.shape == ()


def test_sd_vae_ft_mse(hub):
    from diffusers import AutoencoderKL

    vae = AutoencoderKL.from_pretrained(hub["stabilityai/sd-vae-ft-mse"]).eval()
    assert (vae.config.latent_channels, vae.config.scaling_factor, vae.config.in_channels) == (4, 0.18215, 3)
    assert 2 ** (len(vae.config.block_out_channels) - 1) == 8
    with torch.no_grad():
        latents = vae.encode(torch.zeros(1, 3, 64, 64)).latent_dist.mean
        assert latents.shape == (1, 4, 8, 8)
        assert vae.decode(latents).sample.shape == (1, 3, 64, 64)
    assert _stored_dtypes(hub["stabilityai/sd-vae-ft-mse"]) == {torch.float32}


# -------------------------------------------------------------------------------------- captioners
@pytest.mark.parametrize("repo", [BLIP_BASE, "Salesforce/blip-image-captioning-large"])
def test_blip_captioner(hub, repo):
    from transformers import BlipForConditionalGeneration, BlipProcessor

    path = hub[repo]
    model = BlipForConditionalGeneration.from_pretrained(path).eval()
    processor = BlipProcessor.from_pretrained(path)
    vision, text, tokenizer = model.config.vision_config, model.config.text_config, processor.tokenizer
    assert (vision.image_size, vision.patch_size) == (384, 16)
    assert text.encoder_hidden_size == vision.hidden_size and text.max_position_embeddings == 512
    assert (tokenizer.bos_token, tokenizer.model_max_length, text.vocab_size) == ("[DEC]", 512, len(tokenizer))
    assert (text.bos_token_id, text.sep_token_id, text.pad_token_id) == (
        tokenizer.bos_token_id,
        tokenizer.sep_token_id,
        tokenizer.pad_token_id,
    )
    assert (tokenizer.sep_token_id, tokenizer.pad_token_id) == (102, 0)
    assert _vocabulary(tokenizer)[-2:] == ["[DEC]", "[ENC]"]  # appended to BERT's, as BLIP's 30522 and 30523
    pixels = processor(images=_photo(), return_tensors="pt").pixel_values
    assert pixels.shape == (1, 3, 384, 384)
    with torch.no_grad():
        assert model.vision_model(pixel_values=pixels).last_hidden_state.shape[1] == 1 + (384 // 16) ** 2
        caption = model.generate(pixel_values=pixels, max_new_tokens=3, do_sample=False)
    assert caption[0, 0] == tokenizer.bos_token_id


@pytest.mark.parametrize("repo,patch_size", [("microsoft/git-base-coco", 16), ("microsoft/git-large-coco", 14)])
def test_git_captioner(hub, repo, patch_size):
    from transformers import AutoProcessor, GitForCausalLM

    path = hub[repo]
    model = GitForCausalLM.from_pretrained(path).eval()
    processor = AutoProcessor.from_pretrained(path)
    assert type(processor).__name__ == "GitProcessor"
    vision, tokenizer = model.config.vision_config, processor.tokenizer
    assert (vision.image_size, vision.patch_size, vision.num_channels) == (224, patch_size, 3)
    assert (
        (model.config.bos_token_id, model.config.eos_token_id, model.config.pad_token_id)
        == (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id)
        == (101, 102, 0)
    )
    assert (model.config.vocab_size, model.config.max_position_embeddings) == (len(tokenizer), 1024)
    pixels = processor(images=_photo(), return_tensors="pt").pixel_values
    assert pixels.shape == (1, 3, 224, 224)
    with torch.no_grad():
        caption = model.generate(pixel_values=pixels, max_new_tokens=3, do_sample=False)
    assert caption[0, 0] == 101


# --------------------------------------------------------------------------------------- pipelines
def _load_pipeline(path: Path):
    """A pipeline folder in float32: on a CPU the hub's half-precision text encoders (transformers loads a
    checkpoint's own dtype) beside float32 diffusers models cannot run together."""
    from diffusers import DiffusionPipeline

    return DiffusionPipeline.from_pretrained(path, dtype=torch.float32)


def _check_t5_tokenizer(tokenizer, folder: Path) -> None:
    assert tokenizer.model_max_length == 512
    assert [(token, tokenizer.convert_tokens_to_ids(token)) for token in ("<pad>", "</s>", "<unk>")] == [
        ("<pad>", 0),
        ("</s>", 1),
        ("<unk>", 2),
    ]
    assert tokenizer.convert_tokens_to_ids("<extra_id_0>") == len(tokenizer) - 1  # as 32099
    assert tokenizer("a cat").input_ids[-1] == 1
    assert _sentencepiece_pieces(folder / "spiece.model") == _vocabulary(tokenizer)[: len(tokenizer) - 100]


@pytest.mark.parametrize(
    "repo,qk_norm,transformer_dtype", [(SD3_MEDIUM, None, torch.float16), (SD35_LARGE, "rms_norm", torch.bfloat16)]
)
def test_stable_diffusion_3(hub, repo, qk_norm, transformer_dtype):
    from diffusers import FlowMatchEulerDiscreteScheduler, StableDiffusion3Pipeline

    path = hub[repo]
    pipe = _load_pipeline(path)
    assert type(pipe) is StableDiffusion3Pipeline
    transformer = pipe.transformer.config
    assert (transformer.patch_size, transformer.in_channels, transformer.out_channels) == (2, 16, 16)
    assert (transformer.sample_size, transformer.pos_embed_max_size, transformer.qk_norm) == (128, 192, qk_norm)
    assert transformer.attention_head_dim == 64
    assert transformer.caption_projection_dim == transformer.num_attention_heads * transformer.attention_head_dim
    assert transformer.joint_attention_dim == pipe.text_encoder_3.config.d_model
    assert transformer.pooled_projection_dim == (
        pipe.text_encoder.config.projection_dim + pipe.text_encoder_2.config.projection_dim
    )
    # SD3 pads the two CLIPs' concatenated states to the T5 width
    assert (
        pipe.text_encoder.config.hidden_size + pipe.text_encoder_2.config.hidden_size <= transformer.joint_attention_dim
    )
    vae = pipe.vae.config
    assert (vae.latent_channels, vae.scaling_factor, vae.shift_factor, vae.use_quant_conv) == (
        16,
        1.5305,
        0.0609,
        False,
    )
    assert pipe.vae_scale_factor == 8
    for tokenizer, encoder, pad in (
        (pipe.tokenizer, pipe.text_encoder, "<|endoftext|>"),
        (pipe.tokenizer_2, pipe.text_encoder_2, "!"),
    ):
        _check_clip_tokenizer(tokenizer, pad)
        assert (encoder.config.max_position_embeddings, encoder.config.vocab_size) == (77, len(tokenizer))
    _check_t5_tokenizer(pipe.tokenizer_3, path / "tokenizer_3")
    assert pipe.text_encoder_3.config.vocab_size >= len(pipe.tokenizer_3)
    assert isinstance(pipe.scheduler, FlowMatchEulerDiscreteScheduler) and pipe.scheduler.config.shift == 3.0
    assert not pipe.scheduler.config.use_dynamic_shifting
    for name in ("text_encoder", "text_encoder_2", "text_encoder_3", "vae"):
        assert _stored_dtypes(path / name) == {torch.float16}, name
    assert _stored_dtypes(path / "transformer") == {transformer_dtype}
    assert _weight_shards(path / "text_encoder_3") == 2
    assert _weight_shards(path / "transformer") == (2 if repo == SD35_LARGE else 1)
    assert "tokenizer.json" not in _files(path / "tokenizer") | _files(path / "tokenizer_2")  # as on the hub


def test_clip_tokenizer_without_tokenizer_json_tokenizes_as_with_it(hub):
    from transformers import AutoTokenizer

    legacy = AutoTokenizer.from_pretrained(hub[SD3_MEDIUM] / "tokenizer")  # vocab.json and merges.txt only
    fast = AutoTokenizer.from_pretrained(hub["openai/clip-vit-large-patch14"])
    text = ["A photograph of an astronaut riding a horse, 4k!", "zebras & giraffes"]
    assert legacy(text).input_ids == fast(text).input_ids


def test_flux_dev(hub):
    from diffusers import FluxPipeline
    from transformers import CLIPTextModel

    path = hub[FLUX]
    pipe = _load_pipeline(path)
    assert type(pipe) is FluxPipeline and type(pipe.text_encoder) is CLIPTextModel
    transformer, vae = pipe.transformer.config, pipe.vae.config
    assert (transformer.patch_size, transformer.in_channels, transformer.guidance_embeds) == (1, 64, True)
    assert transformer.in_channels == 4 * vae.latent_channels == 64  # 2 x 2 packing of 16 channels
    assert sum(transformer.axes_dims_rope) == transformer.attention_head_dim
    assert transformer.joint_attention_dim == pipe.text_encoder_2.config.d_model
    assert transformer.pooled_projection_dim == pipe.text_encoder.config.hidden_size
    assert (vae.scaling_factor, vae.shift_factor, vae.use_quant_conv, pipe.vae_scale_factor) == (
        0.3611,
        0.1159,
        False,
        8,
    )
    _check_clip_tokenizer(pipe.tokenizer)
    _check_t5_tokenizer(pipe.tokenizer_2, path / "tokenizer_2")
    scheduler = pipe.scheduler.config
    assert (scheduler.use_dynamic_shifting, scheduler.base_shift, scheduler.max_shift) == (True, 0.5, 1.15)
    assert (scheduler.base_image_seq_len, scheduler.max_image_seq_len, scheduler.shift) == (256, 4096, 3.0)
    for name in ("transformer", "vae", "text_encoder", "text_encoder_2"):
        assert _stored_dtypes(path / name) == {torch.bfloat16}, name
    assert (_weight_shards(path / "transformer"), _weight_shards(path / "text_encoder_2")) == (3, 2)


def test_kandinsky_22(hub):
    from diffusers import DDPMScheduler, KandinskyV22Pipeline, KandinskyV22PriorPipeline, UnCLIPScheduler

    prior = KandinskyV22PriorPipeline.from_pretrained(hub[PRIOR])
    decoder = KandinskyV22Pipeline.from_pretrained(hub[DECODER])
    embedding = prior.prior.config.embedding_dim
    text, image = prior.text_encoder.config, prior.image_encoder.config
    assert embedding == text.hidden_size == text.projection_dim == image.projection_dim
    assert embedding == decoder.unet.config.encoder_hid_dim
    assert prior.prior.config.num_embeddings == text.max_position_embeddings == 77
    assert (image.image_size, image.patch_size, image.num_channels) == (224, 14, 3)
    assert torch.equal(prior.prior.clip_std, torch.ones_like(prior.prior.clip_std))  # 0 would zero every embedding
    _check_clip_tokenizer(prior.tokenizer, "!")
    assert prior.image_processor(_photo(), return_tensors="pt").pixel_values.shape == (1, 3, 224, 224)
    assert isinstance(prior.scheduler, UnCLIPScheduler) and prior.scheduler.config.prediction_type == "sample"
    unet, movq = decoder.unet.config, decoder.movq.config
    assert (unet.addition_embed_type, unet.encoder_hid_dim_type) == ("image", "image_proj")
    assert (unet.in_channels, unet.out_channels, movq.latent_channels) == (4, 8, 4)
    assert (movq.norm_type, 2 ** (len(movq.block_out_channels) - 1)) == ("spatial", 8)
    assert isinstance(decoder.scheduler, DDPMScheduler) and decoder.scheduler.config.prediction_type == "epsilon"


# ------------------------------------------------------------------------------------ smoke at 512 px
@pytest.mark.slow
@pytest.mark.parametrize("repo", [SD3_MEDIUM, FLUX])
def test_flow_pipelines_draw_512_pixel_images(hub, repo):
    pipe = _load_pipeline(hub[repo])
    image = pipe(
        "a red bicycle",
        height=512,
        width=512,
        num_inference_steps=2,
        max_sequence_length=64,
        generator=torch.Generator().manual_seed(0),
    ).images[0]
    assert image.size == (512, 512)


@pytest.mark.slow
def test_kandinsky_draws_512_pixel_images(hub):
    from diffusers import KandinskyV22Pipeline, KandinskyV22PriorPipeline

    prior = KandinskyV22PriorPipeline.from_pretrained(hub[PRIOR])
    decoder = KandinskyV22Pipeline.from_pretrained(hub[DECODER])
    embeds = prior("a red bicycle", num_inference_steps=2, generator=torch.Generator().manual_seed(0))
    assert embeds.image_embeds.shape == (1, prior.prior.config.embedding_dim) and embeds.image_embeds.abs().sum() > 0
    image = decoder(
        image_embeds=embeds.image_embeds,
        negative_image_embeds=embeds.negative_image_embeds,
        height=512,
        width=512,
        num_inference_steps=2,
        generator=torch.Generator().manual_seed(0),
    ).images[0]
    assert image.size == (512, 512)


@pytest.mark.parametrize(
    "repo",
    [
        "openai/clip-vit-large-patch14",
        "calpt/CLIP-ViT-B-32-xlm-roberta-base-laion5B-s13B-b90k",
        "calpt/CLIP-ViT-H-14-frozen-xlm-roberta-large-laion5B-s13B-b90k",
    ],
)
def test_the_random_clips_score_a_caption_above_zero_on_average(hub, repo):
    """As a trained CLIP does: a random one's cosines share its towers' offsets' sign, and below zero every
    CLIPScore sample clips at 0 (the interval calibration then meets a constant spread)."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(hub[repo], trust_remote_code=repo.startswith("calpt")).eval()
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        images = model.get_image_features(pixel_values=torch.randn(6, 3, 224, 224, generator=generator))
        ids = torch.randint(5, model.config.text_config.vocab_size, (6, 10), generator=generator)
        texts = model.get_text_features(input_ids=ids, attention_mask=torch.ones_like(ids))
    images, texts = (x if torch.is_tensor(x) else x.pooler_output for x in (images, texts))
    cosine = torch.nn.functional.normalize(images, dim=-1) @ torch.nn.functional.normalize(texts, dim=-1).T
    assert cosine.mean() > 0
