"""Per-layer statistics as depth profiles: a layer x step heatmap per statistic, not L curves.

A 96-layer run logs 8-10 per-layer statistics; one TensorBoard scalar per layer made 775
cards (8,000 at 1000 layers). Here each statistic becomes one image, log10 of the value by
layer (rows) and step (columns) beside the profile over depth at the last step, plus a few
chosen layers (`chosen_layers`) as scalars. NumPy only; matplotlib is imported on the first
render (process 0 only).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

DEPTH_IMAGES = ("eval", "end", "none")  # diag.depth_images


def drawing(mode: str, eval_every: int) -> tuple[bool, int | None]:
  """(draw depth images at all, redraw every this many steps; None: at the end only) of
  diag.depth_images=`mode`; ValueError naming the choices on another value."""
  if mode not in DEPTH_IMAGES:
    raise ValueError(f"diag.depth_images={mode!r} is not one of {', '.join(DEPTH_IMAGES)}")
  return mode != "none", eval_every if mode == "eval" else None


def chosen_layers(num_layers: int) -> list[int]:
  """The layers kept as scalars: first, quarter, middle and last (fewer when they coincide)."""
  n = num_layers
  return sorted({0, n // 4, n // 2, n - 1})


class DepthHistory:
  """Per-layer arrays by log step, at most `max_columns` of them (evenly thinned).

  When the history fills, every second column is dropped and from then on only every
  second log step is kept, so the columns stay evenly spaced in log steps and a
  100,000-step, 1000-layer run holds at most max_columns x layers floats per statistic.
  The latest arrays are always kept, so a render ends at the current step.
  """

  def __init__(self, max_columns: int = 512):
    self.max_columns = max_columns
    self.steps: list[int] = []
    self.columns: dict[str, list[np.ndarray]] = {}
    self.latest: tuple[int, dict[str, np.ndarray]] | None = None
    self._seen = 0
    self._stride = 1

  def add(self, step: int, arrays: Mapping[str, np.ndarray]) -> None:
    """Records one log step's per-layer arrays ({name: [L]})."""
    arrays = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
    self.latest = (int(step), arrays)
    self._seen += 1
    if (self._seen - 1) % self._stride:
      return
    self.steps.append(int(step))
    for name, values in arrays.items():
      self.columns.setdefault(name, []).append(values)
    if len(self.steps) > self.max_columns:
      self.steps = self.steps[::2]
      self.columns = {k: v[::2] for k, v in self.columns.items()}
      self._stride *= 2

  def matrix(self, name: str) -> tuple[list[int], np.ndarray]:
    """(steps, values [L, T]) of one statistic, the latest step included."""
    steps, cols = list(self.steps), list(self.columns.get(name, []))
    if (
      self.latest is not None
      and name in self.latest[1]
      and (not steps or steps[-1] != self.latest[0])
    ):
      steps.append(self.latest[0])
      cols.append(self.latest[1][name])
    if not cols:
      return [], np.zeros((0, 0), np.float32)
    return steps, np.stack(cols, axis=1)


def _log10(values: np.ndarray) -> np.ndarray:
  """log10 where positive and finite, NaN elsewhere (a zero branch, a diverged value)."""
  with np.errstate(divide="ignore", invalid="ignore"):
    return np.where(np.isfinite(values) & (values > 0), np.log10(values), np.nan)


def render(name: str, steps: list[int], values_LxT: np.ndarray, size=(6.4, 2.9), dpi=80):
  """An RGB uint8 image [H, W, 3]: log10 heatmap (layer x step) and the profile at the end.

  Sized for a TensorBoard card (about 400 px wide): few, large labels.
  """
  import matplotlib
  from matplotlib.backends.backend_agg import FigureCanvasAgg
  from matplotlib.figure import Figure
  from matplotlib.ticker import MaxNLocator, NullFormatter

  logv = _log10(values_LxT)
  finite = logv[np.isfinite(logv)]
  lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (-1.0, 1.0)
  if hi - lo < 1e-6:
    lo, hi = lo - 0.5, hi + 0.5
  n_layers = values_LxT.shape[0]
  half = (steps[-1] - steps[0]) / (2 * (len(steps) - 1)) if len(steps) > 1 else 0.5
  x0, x1 = steps[0] - half, steps[-1] + half  # each column centred on its step
  style = {"font.size": 11, "xtick.labelsize": 9, "ytick.labelsize": 9}
  with matplotlib.rc_context(style):
    fig = Figure(figsize=size, dpi=dpi)  # fixed axes: a constrained layout took 3/5 of the time
    FigureCanvasAgg(fig)
    heat = fig.add_axes((0.1, 0.17, 0.45, 0.71))
    bar = fig.add_axes((0.565, 0.17, 0.015, 0.71))
    prof = fig.add_axes((0.75, 0.17, 0.235, 0.71))
    image = heat.imshow(
      np.ma.masked_invalid(logv),
      aspect="auto",
      origin="lower",
      interpolation="nearest",
      cmap=matplotlib.colormaps["viridis"].with_extremes(bad="#d0d0d0"),  # <= 0, NaN
      vmin=lo,
      vmax=hi,
      extent=(x0, x1, -0.5, n_layers - 0.5),
    )
    fig.colorbar(image, cax=bar)
    bar.yaxis.set_major_locator(MaxNLocator(4))
    heat.set(xlabel="step", ylabel="layer", title=f"log10 {name}")
    heat.title.set_fontsize(10)
    for axis in (heat.xaxis, heat.yaxis, prof.xaxis):
      axis.set_major_locator(MaxNLocator(4, integer=True))
    layers = np.arange(n_layers)
    prof.plot(layers, values_LxT[:, 0], "--", color="0.55", lw=1, label=f"step {steps[0]}")
    prof.plot(layers, values_LxT[:, -1], color="C3", lw=1.5, label=f"step {steps[-1]}")
    if finite.size and hi - lo >= 1:  # a log axis labels nothing inside one decade
      prof.set_yscale("log")
      prof.yaxis.set_minor_formatter(NullFormatter())
    else:
      prof.yaxis.set_major_locator(MaxNLocator(4))
    prof.set(xlabel="layer", title="over depth")
    prof.title.set_fontsize(10)
    prof.legend(fontsize=8, loc="best", handlelength=1.5)
    fig.canvas.draw()
    return np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()
