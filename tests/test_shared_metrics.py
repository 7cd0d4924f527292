"""condeval.metrics: the one copy of cosine similarity and CLIPScore, on NumPy arrays and torch tensors alike."""

import numpy as np
import pytest
import torch

from condeval.metrics import CLIPSCORE_WEIGHT, clipscore, cosine_similarity, unit_rows

A = np.array([[3.0, 4.0], [1.0, 0.0], [0.0, 0.0]])
B = np.array([[6.0, 8.0], [-2.0, 0.0], [1.0, 1.0]])


def test_cosine_of_rows_is_scale_free_and_zero_for_a_zero_row():
    np.testing.assert_allclose(cosine_similarity(A, B), [1.0, -1.0, 0.0])


def test_pairwise_cosine_is_every_row_against_every_row():
    cos = cosine_similarity(A, B, pairwise=True)
    assert cos.shape == (3, 3)
    np.testing.assert_allclose(np.diag(cos), cosine_similarity(A, B))
    np.testing.assert_allclose(cos[1], [0.6, -1.0, 1 / np.sqrt(2)])


def test_torch_inputs_give_the_numpy_values_with_gradients():
    a = torch.tensor(A, requires_grad=True)
    cos = cosine_similarity(a, torch.tensor(B))
    np.testing.assert_allclose(cos.detach().numpy(), cosine_similarity(A, B))
    cos.sum().backward()
    assert torch.isfinite(a.grad).all()
    pair = cosine_similarity(torch.tensor(A, dtype=torch.float32), torch.tensor(B, dtype=torch.float32), pairwise=True)
    np.testing.assert_allclose(pair.numpy(), cosine_similarity(A, B, pairwise=True), rtol=1e-6)


def test_mismatched_rows_are_refused():
    with pytest.raises(ValueError, match="same shape"):
        cosine_similarity(A, B[:2])
    with pytest.raises(ValueError, match=r"\(n, d\) and \(m, d\)"):
        cosine_similarity(A, B[:, :1], pairwise=True)


def test_clipscore_is_w_times_the_clipped_cosine():
    assert CLIPSCORE_WEIGHT == 2.5
    np.testing.assert_allclose(clipscore(np.array([0.4, -0.3, 1.0])), [1.0, 0.0, 2.5])
    np.testing.assert_allclose(clipscore(torch.tensor([0.4, -0.3]), weight=1.0).numpy(), [0.4, 0.0])


def test_unit_rows_have_norm_one():
    np.testing.assert_allclose(np.linalg.norm(unit_rows(A[:2]), axis=1), 1.0)
    np.testing.assert_allclose(unit_rows(torch.tensor(A[:2])).norm(dim=1).numpy(), 1.0)
