"""Shared torch helpers: random unit directions (the DQR's direction set and CReL-rho's random starts) and the device of inputs."""

import numpy as np
import torch

from condeval.core.devices import device_of
from condeval.core.nn import random_unit_vectors


def test_random_unit_vectors_are_unit_seeded_and_spread_over_the_sphere():
    draws = random_unit_vectors((4000, 3), torch.Generator().manual_seed(0))
    np.testing.assert_allclose(draws.norm(dim=-1).numpy(), 1.0)
    assert torch.equal(draws, random_unit_vectors((4000, 3), torch.Generator().manual_seed(0)))
    assert draws.mean(dim=0).abs().max() < 0.05  # uniform on the sphere: mean near 0
    assert random_unit_vectors((2, 5, 3), torch.Generator().manual_seed(0)).shape == (2, 5, 3)


def test_device_of_is_the_first_tensor_device_else_the_cpu():
    assert device_of(np.zeros(2), None) == torch.device("cpu")
    assert device_of(np.zeros(2), torch.zeros(1, device="meta")) == torch.device("meta")
