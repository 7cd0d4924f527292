"""condeval.core.resources and the tracks' GPU work: a job asks what its config's work needs on the site's card."""

import numpy as np
import pytest
from safetensors.numpy import save_file

from condeval.core.resources import (
    BYTES_PER_PARAMETER,
    CARDS,
    EFFICIENCY,
    OVERHEAD,
    PART_RESERVE,
    STEP_S,
    GpuWork,
    encoding_work,
    folder_parameters,
    mlp_parameters,
    need,
    needs_beyond,
)
from condeval.crel.design import (
    captioning_work,
    generation_work,
    lgm_training_work,
    reliability_work,
    vae_parameters,
)
from condeval.trust.design import block_work, generator_parameters, sampling_work, training_work, translator_work

H100 = CARDS["H100-80GB"]
SD35 = {"loaded": 1.376e10, "denoiser": 8.1e9}
SD3_MODEL = {"family": "sd3", "sampling": {"num_inference_steps": 50, "guidance_scale": 7.0}}
SIT_B = {"layers": 12, "heads": 12, "head_dim": 64}


def test_a_job_asks_its_weights_in_host_and_gpu_memory_and_at_least_its_floor_in_time():
    work = GpuWork(1e10, 1e18, "bfloat16", activation_bytes=2e9)
    asked = need(work, H100)
    assert asked.mem_mb * 2**20 >= 2e10 and asked.gpu_mem_mb * 2**20 >= 2e10 + 2e9
    floor_s = 1e18 / (EFFICIENCY * H100.bf16_tflops * 1e12)
    assert asked.floor_hours == pytest.approx(floor_s / 3600)
    assert asked.runtime * 60 >= OVERHEAD * floor_s


def test_float32_doubles_the_weights_and_halves_the_rate():
    half, full = need(GpuWork(1e10, 1e18, "bfloat16"), H100), need(GpuWork(1e10, 1e18, "float32"), H100)
    assert full.gpu_mem_mb - half.gpu_mem_mb >= 1e10 * 2 / 2**20
    assert full.runtime >= 1.9 * half.runtime and full.floor_hours == half.floor_hours


def test_training_holds_weights_gradients_and_adam_moments():
    inference, training = need(GpuWork(1e9, 1e15), H100), need(GpuWork(1e9, 1e15, trained_parameters=1e9), H100)
    assert (training.gpu_mem_mb - inference.gpu_mem_mb) * 2**20 >= 1e9 * 16


def test_a_slower_card_asks_more_time():
    work = GpuWork(1e9, 1e18)
    assert need(work, CARDS["A100-80GB"]).runtime > 3 * need(work, H100).runtime - 10


def test_an_unknown_dtype_is_refused_naming_it():
    with pytest.raises(ValueError, match="'int8'"):
        need(GpuWork(1e9, 1e15, "int8"), H100)


def test_jobs_beyond_the_card_or_the_partition_limit_are_named_with_their_numbers():
    lines = needs_beyond("generate_images", {"gpu_mem_mb": 90_000, "runtime": 3000}, H100, 2880)
    assert lines == [
        "generate_images needs 90,000 MB of GPU memory; a H100-80GB has 81,559 MB",
        "generate_images asks 3,000 min; the partition's limit is 2,880 min",
    ]
    assert needs_beyond("generate_images", {"gpu_mem_mb": 40_000, "runtime": 200}, H100, 2880) == []
    assert needs_beyond("table", {"mem_mb": 1000}, H100, 2880) == []  # no GPU memory stated: nothing to check


def test_resumable_work_beyond_the_limit_is_split_into_parts_that_cover_it_and_other_work_is_not():
    whole = need(GpuWork(1e8, 2e20, "bfloat16", resumable=True), CARDS["A100-80GB"])
    split = need(GpuWork(1e8, 2e20, "bfloat16", resumable=True), CARDS["A100-80GB"], runtime_limit_min=2880)
    assert whole.parts == 1 and whole.runtime > 2880
    assert split.runtime == 2880 and split.parts * 2880 * (1 - PART_RESERVE) >= whole.runtime
    assert (split.parts - 1) * 2880 * (1 - PART_RESERVE) < whole.runtime  # no part more than needed
    assert split.floor_hours == whole.floor_hours
    one_job = need(GpuWork(1e8, 2e20, "bfloat16"), CARDS["A100-80GB"], runtime_limit_min=2880)
    assert one_job.parts == 1 and one_job.runtime == whole.runtime  # refused later, by needs_beyond
    assert need(GpuWork(1e8, 1e15, resumable=True), H100, runtime_limit_min=2880).parts == 1


def test_a_folders_parameters_are_read_from_its_safetensors_headers(tmp_path):
    (tmp_path / "unet").mkdir()
    save_file({"a": np.zeros((3, 4), np.float32), "b": np.zeros(5, np.float16)}, tmp_path / "unet/model.safetensors")
    save_file({"c": np.zeros((2, 2, 2), np.float32)}, tmp_path / "vae.safetensors")
    assert folder_parameters(tmp_path) == 12 + 5 + 8
    assert folder_parameters(tmp_path / "absent") is None


def test_generation_loads_the_whole_pipeline_and_guidance_doubles_its_steps():
    images = 1013
    guided = generation_work(SD3_MODEL, SD35, None, 512, 256, 8, images)
    unguided = generation_work(
        {**SD3_MODEL, "sampling": {"num_inference_steps": 50, "guidance_scale": 1.0}}, SD35, None, 512, 256, 8, images
    )
    assert guided.loaded_parameters == SD35["loaded"]
    assert guided.flops == pytest.approx(2 * unguided.flops, rel=0.01)
    # 50 steps x 2 forwards x 2 x 8.1e9 parameters x (32 x 32 latent patches + 333 text tokens), per image
    assert guided.flops >= images * 50 * 2 * 2 * 8.1e9 * (32 * 32 + 333)
    asked = need(guided, H100)
    assert asked.mem_mb * 2**20 >= SD35["loaded"] * BYTES_PER_PARAMETER["bfloat16"]


def test_flux_runs_one_forward_per_step_and_kandinsky_adds_its_prior():
    flux = {"family": "flux", "sampling": {"num_inference_steps": 50, "guidance_scale": 7.0}}
    weights = {"loaded": 1.69e10, "denoiser": 1.19e10}
    work = generation_work(flux, weights, None, 512, 256, 8, 10)
    assert work.flops < 10 * 50 * 2 * 2 * 1.19e10 * (32 * 32 + 256)
    kandinsky = {"family": "kandinsky", "sampling": {"num_inference_steps": 50, "guidance_scale": 7.0}}
    decoder, prior = {"loaded": 1.32e9, "denoiser": 1.25e9}, {"loaded": 3.5e9, "denoiser": 1.0e9}
    alone = generation_work(kandinsky, decoder, None, 512, 77, 8, 10)
    paired = generation_work(kandinsky, decoder, prior, 512, 77, 8, 10)
    assert paired.loaded_parameters == decoder["loaded"] + prior["loaded"] and paired.flops > alone.flops


def test_a_model_this_run_trains_weighs_nothing_until_it_exists():
    assert generation_work(SD3_MODEL, None, None, 512, 256, 8, 100).flops == 0
    assert captioning_work(None, {}, "auto", 8, 100).loaded_parameters == 0


def test_captioning_scales_with_images_and_beams():
    blip = {"loaded": 4.7e8}
    one, beams = captioning_work(blip, {}, "auto", 64, 1000), captioning_work(blip, {"num_beams": 3}, "auto", 64, 1000)
    assert beams.flops > one.flops
    assert captioning_work(blip, {}, "auto", 64, 2000).flops == pytest.approx(2 * one.flops)


def test_sit_b2_has_the_papers_size_and_steps_count_images_at_the_batch():
    assert generator_parameters(SIT_B) == pytest.approx(130e6, rel=0.05)  # DiT-B/2 / SiT-B/2: 130M
    by_steps = training_work({"steps": 1000, "batch_size": 256, "transformer": SIT_B}, 256, 202_599)
    by_epochs = training_work({"epochs": 2, "batch_size": 256, "transformer": SIT_B}, 256, 202_599)
    per_image = 3 * 2 * generator_parameters(SIT_B) * 256
    assert by_steps.flops == pytest.approx(1000 * 256 * per_image)
    assert by_epochs.flops == pytest.approx(2 * 202_599 * per_image)
    assert by_steps.trained_parameters == generator_parameters(SIT_B)


def test_a_repa_generators_row_cache_holds_its_teachers_tokens_and_samples_their_pixels():
    train = {"steps": 1000, "batch_size": 256, "transformer": SIT_B}
    vanilla, repa = training_work(train, 256, 1000), training_work(train, 256, 1000, extractor_width=1024)
    assert vanilla.scratch_bytes == 1000 * 4 * 4 * 32 * 32  # float32 latents, 4 x 32 x 32 at 256 px
    assert repa.scratch_bytes == vanilla.scratch_bytes + 1000 * 2 * 256 * 1024  # float16 tokens, 256 per image
    assert need(repa, H100).scratch_mb * 2**20 >= repa.scratch_bytes
    samples = sampling_work(SIT_B, 256, 250, 64, 100, decoded_channels=6, image_channels=6)
    assert samples.written_bytes == 100 * 256 * 256 * 6


def test_channelwise_decoding_costs_each_channel():
    rgb, six = sampling_work(SIT_B, 256, 250, 256, 100), sampling_work(SIT_B, 256, 250, 256, 100, decoded_channels=6)
    assert six.flops > rgb.flops and six.loaded_parameters == rgb.loaded_parameters


def test_a_clips_towers_each_run_their_own_parameters():
    clip = {"loaded": 4.28e8, "vision": 3.04e8}
    images = encoding_work([(clip, "image", 257)], 100, 64)
    texts = encoding_work([(clip, "text", 77)], 100, 64)
    assert images.flops == pytest.approx(100 * 2 * 3.04e8 * 257) and texts.flops == pytest.approx(100 * 2 * 1.24e8 * 77)
    assert images.loaded_parameters == texts.loaded_parameters == clip["loaded"]
    unsplit = encoding_work([({"loaded": 4.28e8}, "text", 77)], 100, 64)
    assert unsplit.flops > texts.flops  # no split stated: the whole model, an upper bound
    assert encoding_work([(None, "image", 257), (clip, "image", 257)], 100, 64).flops == images.flops


def test_the_translator_reads_the_block_once_per_pair_and_trains_its_mlp_per_epoch():
    translator = {"layer": 8, "t": [0.1, 0.5], "hidden": 2048, "epochs": 50, "batch_size": 2048}
    work = translator_work(SIT_B, translator, 256, 1000)
    fewer = translator_work(SIT_B, {**translator, "epochs": 1}, 256, 1000)
    assert work.flops > fewer.flops and work.trained_parameters == 768 * 2048 + 2048 * 1152
    to_block_8 = block_work(SIT_B, 8, 256, 1000, 10, 256)
    assert to_block_8.flops == pytest.approx(1000 * 10 * 2 * generator_parameters(SIT_B) * 8 / 12 * 256)


SYNTHETIC = {
    "n": 50_000,
    "p": 38,
    "d": 2,
    "splits": {"lgm": 0.6, "dqr": 0.24, "cal": 0.08, "test": 0.08},
    "val_fraction": 0.1,
}
LGM = {"hidden_dims": [64, 128], "batch_size": 512}


def test_a_small_model_is_sized_by_its_steps_and_asks_more_as_its_config_grows():
    assert mlp_parameters([2, 3, 1]) == 2 * 3 + 3 + 3 * 1 + 1
    work = lgm_training_work(SYNTHETIC, LGM, epochs=300, latent_dim=2)
    assert work.steps == 300 * -(-int(50_000 * 0.6 * 0.9) // 512)
    assert work.trained_parameters == vae_parameters(38, 2, [64, 128])
    larger = lgm_training_work(SYNTHETIC | {"n": 5_000_000}, LGM, epochs=300, latent_dim=2)
    assert need(larger, H100).runtime > 50 * need(work, H100).runtime  # 100x the rows, 100x the steps
    assert need(larger, H100).runtime * 60 >= OVERHEAD * larger.steps * STEP_S


def test_a_pgd_search_counts_its_batches_times_its_steps():
    work = reliability_work(4000, {"num_z0": 50, "steps": 100}, 300_000)
    assert work.steps == 4 * 100 and work.flops == 100 * 4000 * 50 * 6 * 300_000
