"""FLUX's guidance distillation: a student learns its frozen teacher's classifier-free guidance."""

import pytest
import torch

from condeval.generators import text_to_image as t2i
from condeval.generators.text_to_image_training import GuidanceDistillationModule, flow_velocity

SIDE, TOKENS, WIDTH, POOLED = 8, 6, 16, 12  # latent side, text tokens, T5 width, pooled width


def _encoder():
    """prompt -> fixed random (sequence, pooled, text ids), the shape FluxPipeline.encode_prompt returns."""
    table = {}

    def encode(prompts, device):
        for prompt in prompts:
            if prompt not in table:
                g = torch.Generator().manual_seed(len(table))
                table[prompt] = (torch.randn(TOKENS, WIDTH, generator=g), torch.randn(POOLED, generator=g))
        sequence = torch.stack([table[p][0] for p in prompts])
        pooled = torch.stack([table[p][1] for p in prompts])
        return sequence, pooled, torch.zeros(TOKENS, 3)

    return encode


@pytest.fixture
def student():
    torch.manual_seed(0)
    teacher = t2i.tiny_flux_transformer(
        4, layers=1, single_layers=1, heads=2, joint_attention_dim=WIDTH, pooled_projection_dim=POOLED
    )
    with torch.no_grad():  # zero-initialised output layers would make the teacher's two branches agree
        for parameter in teacher.parameters():
            parameter.normal_(0.0, 0.1)
    module = GuidanceDistillationModule(dict(teacher.config), teacher.state_dict(), guidance_range=(1.0, 5.0))
    captions = [["a red circle"], ["two blue stars"], ["a green box"], ["a pink bar"]]
    return module.attach(_encoder(), captions)


def _batch():
    return torch.randn(4, 4, SIDE, SIDE, generator=torch.Generator().manual_seed(1)), torch.arange(4)


def test_the_student_learns_the_teachers_guidance_and_the_teacher_never_moves(student):
    teacher_before = {k: v.clone() for k, v in student.teacher.state_dict().items()}
    assert all(torch.equal(v, student.transformer.state_dict()[k]) for k, v in teacher_before.items())
    assert not any(p.requires_grad for p in student.teacher.parameters())
    optimizer = torch.optim.Adam([p for p in student.parameters() if p.requires_grad], lr=1e-3)
    with torch.no_grad():  # seeded noise, levels and g: the validation loss
        before = student._loss(_batch(), training=False).item()
    student.train()
    assert not student.teacher.training
    for step in range(40):
        torch.manual_seed(step)
        loss = student._loss(_batch(), training=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = student._loss(_batch(), training=False).item()
    assert after < 0.5 * before, (before, after)
    assert all(torch.equal(v, student.teacher.state_dict()[k]) for k, v in teacher_before.items())


def test_guidance_one_is_the_teachers_conditional_velocity_before_training(student):
    """The student starts as the teacher: its prediction at guidance 1 is the CFG target at g = 1."""
    latents, index = _batch()
    sigma = torch.full((4,), 0.5)
    text = student._encoded([c[0] for c in student._captions])
    with torch.no_grad():
        torch.testing.assert_close(
            flow_velocity(student.transformer, latents, sigma, text, guidance=torch.ones(4)),
            flow_velocity(student.teacher, latents, sigma, text),
        )


def test_a_checkpoint_restores_the_teacher(student, tmp_path):
    import pytorch_lightning as pl

    with torch.no_grad():
        for parameter in student.transformer.parameters():
            parameter.add_(0.1)  # the student has moved away from its teacher
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False, max_epochs=0)
    trainer.strategy.connect(student)
    trainer.save_checkpoint(tmp_path / "distill.ckpt")
    loaded = GuidanceDistillationModule.load_from_checkpoint(tmp_path / "distill.ckpt", weights_only=True)
    for name, tensor in student.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
    assert not torch.equal(loaded.teacher.x_embedder.weight, loaded.transformer.x_embedder.weight)


def test_prompts_are_encoded_on_the_modules_own_device(student):
    """Lightning moves only the module to a job's GPU: the frozen encoder must be told that device
    (the pipeline's own text encoders stay wherever they were built)."""
    seen, encode = [], student._encode

    def recording(prompts, device):
        seen.append(device)
        return encode(prompts, device)

    student._encode = recording
    with torch.no_grad():
        student._loss(_batch(), training=False)
    assert seen and all(device == student.device for device in seen), seen
