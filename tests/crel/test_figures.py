"""The synthetic track's region figures (Figs. 2 and 5) keep their legends off the data."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")


@pytest.fixture
def drawn_figures(monkeypatch):
    """Every figure a plotting function closes, kept open and drawn for inspection."""
    import matplotlib.pyplot as plt

    close, figures = plt.close, []
    monkeypatch.setattr(plt, "close", figures.append)
    yield figures
    for figure in figures:
        close(figure)


def _clouds(rng, n=1000):
    """A panel whose points fill the axes, corners included (the case the default legend covered)."""
    return rng.uniform(-1, 1, (n, 2))


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _assert_legends_off_the_axes(figure):
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    axes = [ax for ax in figure.axes if ax.get_legend() is not None]
    assert axes, "no legend drawn"
    for ax in axes:
        legend = ax.get_legend().get_window_extent(renderer)
        for other in figure.axes:
            assert not _overlaps(legend, other.get_window_extent(renderer)), f"legend of {ax.get_title()!r} covers data"
        assert not _overlaps(legend, ax.xaxis.label.get_window_extent(renderer)), "legend covers the axis label"


def test_fig2_legends_sit_off_every_panel(tmp_path, drawn_figures):
    from condeval.crel.reports.synthetic import plot_regions

    rng = np.random.default_rng(0)
    mask = np.zeros((20, 20), dtype=bool)
    mask[5:15, 5:15] = True
    outline = ((np.linspace(-1, 1, 20), np.linspace(-1, 1, 20)), mask)
    panels = [
        {
            "z_before": _clouds(rng),
            "z_after": _clouds(rng),
            "y_before": _clouds(rng),
            "y_after": _clouds(rng),
            "z_test": np.zeros(2),
            "y_test": np.zeros(2),
            "feldman": outline,
            "dqr": outline,
        }
        for _ in range(2)
    ]
    plot_regions(panels, 0.1, tmp_path / "fig2.png")
    assert (tmp_path / "fig2.png").exists()
    _assert_legends_off_the_axes(drawn_figures[-1])


def test_fig5_legends_sit_off_every_panel(tmp_path, drawn_figures):
    from condeval.crel.reports.synthetic import plot_vae_vs_cvae

    rng = np.random.default_rng(1)
    panels = {name: {"z": _clouds(rng), "y": _clouds(rng), "y_rec": _clouds(rng)} for name in ("CVAE", "VAE")}
    plot_vae_vs_cvae(panels, tmp_path / "fig5.png")
    _assert_legends_off_the_axes(drawn_figures[-1])
