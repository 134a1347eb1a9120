"""The three plots (textual-plot's PlotWidget: real axes, ticks, a legend), each beside the
text figure it draws, which stays for copying and export:

- discrimination against fragility, one point per item (Compression);
- each model in view's accuracy over the configs in view (Bands → a model);
- a pair's Δ̂ per config with its 95% interval (Compare).

Readable without colour (NO_COLOR, monochrome terminals): each series has its own marker
glyph, and the legend names the glyph; colour only helps. Configs sit on the x axis by
their canonical position, labelled by order (o0…o5), `cl` for the cloze configs and the
start of the harness's name for another harness's (`lm`, `insp`), thinned to never touch.
Panning and zooming are off: the arrow keys keep moving through the tables."""

from __future__ import annotations

import re
from contextlib import ExitStack
from math import ceil, floor, log10
from typing import Sequence

from rich.segment import Segment
from rich.style import Style
from textual import on
from textual.strip import Strip
from textual_hires_canvas import Canvas
from textual.events import Resize
from textual.reactive import reactive
from textual_plot import AxisFormatter, HiResMode, NumericAxisFormatter, PlotWidget

from fragility_tui.harness.config_axes import derived_axes
from fragility_tui.text import distinct_labels
from fragility_tui.tui.sanitize import clean

NULL_STYLE = Style()
MARKERS = "●◆▲■✚✖○◇△□"  # one per model; the legend shows the glyph with the name
STYLES = ["green", "magenta", "cyan", "yellow", "red", "blue", "white", "bright_green",
          "bright_magenta", "bright_cyan"]
LEGEND_ROOM = 1.5  # x range stretched by this when the plot's width is not known yet
LEGEND_NAME_WIDTH = 18  # a model's name in the legend, cut in the middle
LEGEND_MARKER_BORDER = 6  # a legend line's marker (3) and space, and the box's two sides
MAX_SERIES = len(MARKERS)  # beyond that the plot names the first ten (the table has all)


def config_tick_label(config_id: str) -> str:
    """A config's x tick label: its order (o0…o5), `cl` for a cloze config, the start of
    its harness's name for another harness's (`lm` for lm-eval, `insp` for inspect), the
    start of its id for a free-form one."""
    axes = derived_axes(config_id)
    if "order" in axes:
        return axes["order"]
    if "stem" in axes:
        return "cl"
    name = axes.get("harness") or config_id
    return (re.split(r"[^0-9A-Za-z]", name)[0] or name)[:4]


def config_axis_label(configs: Sequence[str]) -> str:
    """The x axis's title: what its tick labels stand for, only those it can show."""
    labels = {config_tick_label(c): derived_axes(c) for c in configs}
    parts = []
    if any("order" in axes for axes in labels.values()):
        parts.append("o0…o5: orders")
    if "cl" in labels:
        parts.append("cl: cloze")
    parts += [f"{label}: {clean(axes.get('harness', 'free-form'), one_line=True, limit=20)}"
              for label, axes in labels.items()
              if "order" not in axes and "stem" not in axes]
    return f"config ({' · '.join(parts)})"


class ConfigAxis(AxisFormatter):
    """x = a config's position in view; a tick at the first config of each order, of the
    cloze configs and of each other harness's (config_tick_label; the table beside the plot
    names every config). On a narrow plot a label that would touch the one before it is
    left out with its tick (48 configs at 80 columns ran `cl o0cl o0` together)."""

    def __init__(self, configs: Sequence[str], plot: PlotWidget | None = None):
        self.configs = list(configs)
        self.plot = plot

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        ticks, last, right = [], None, None
        for k, config in enumerate(self.configs):
            label = config_tick_label(config)
            if label != last and min_ - 0.5 <= k <= max_ + 0.5:
                left, end = self._span(k, label)
                if right is None or left > right + 1:  # a blank column between labels
                    ticks.append(float(k))
                    right = end
            last = label
        return ticks

    def _span(self, k: int, label: str) -> tuple[float, float]:
        """The columns the label of the tick at config k takes (centred on its tick);
        while the plot is not laid out, one config a column (drawn again once it is)."""
        if self.plot is None or not self.plot.size.width:
            x = k
        else:
            x, _ = self.plot.get_pixel_from_coordinate(float(k), 0.0)
        left = x - len(label) // 2  # as textual-hires-canvas centres a text
        return left, left + len(label) - 1

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return [config_tick_label(self.configs[int(round(t))]) for t in ticks]


class RowTicks(NumericAxisFormatter):
    """y ticks at a nice step (1, 2 or 5 × 10^k), more than a row of points apart (a tick
    one row apart can round onto its neighbour's row) and at most `max_ticks`. textual-plot
    picks 5-8 ticks at any height: on a six-row plot two of them shared a row, the later
    label winning (Compare's zero line read as -10)."""

    def __init__(self, rows: int):
        self.rows = max(1, rows)

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        span = max_ - min_
        if not span > 0:
            return [min_]
        row = span / max(1, self.rows - 1)  # one row of points, in data units
        power = 10.0 ** floor(log10(max(row, span / max_ticks)))
        for step in (m * power for m in (1, 2, 5, 10, 20, 50)):  # the finest that fits
            first, last = ceil(min_ / step - 1e-9), floor(max_ / step + 1e-9)
            if step >= 1.25 * row and last - first + 1 <= max_ticks:
                break
        return [k * step for k in range(first, last + 1)]


def _row_ticks(plot: PlotWidget) -> RowTicks:
    """For the plot's current size: its canvas rows less the two axis lines."""
    return RowTicks(plot.query_one("#plot", Canvas).size.height - 2)


class FigurePlot(PlotWidget):
    """A PlotWidget with one row above the axes (the y label's), not two: at 80×24 that row
    is a row of data. It takes the focus when it replaces its table (80×24), so the pane's
    keys (g back to the table) stay active; panning and zooming are off."""

    margin_top = reactive(1)
    redraw = None  # the last draw, repeated when the plot's size changes
    drawn_size = None  # the plot's size when it was last drawn
    # textual-plot's keys that do nothing with panning and zooming off: not offered in the
    # footer, and the keys go on to the pane
    OFF_ACTIONS = frozenset({"zoom_in", "zoom_out", "zoom_x_in", "zoom_x_out", "zoom_y_in",
                             "zoom_y_out", "pan_left", "pan_right", "pan_up", "pan_down",
                             "reset_scales"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return action not in self.OFF_ACTIONS and super().check_action(action, parameters)

    def on_mount(self) -> None:
        for canvas in self.query(Canvas):
            canvas.render_line = _never_unstyled(canvas.render_line)

    def render(self):
        """The plot's canvases refresh once per render, not once per pixel: a scatter of
        3,679 items set that many pixels, each a widget refresh (~130 ms of a pane switch)."""
        canvases = list(self.query(Canvas))
        with ExitStack() as batched:
            for canvas in canvases:
                batched.enter_context(canvas.batch_refresh())
            return super().render()

    def remember(self, redraw) -> None:
        """Called by each draw: how to draw it again, and at what size it was drawn."""
        self.redraw, self.drawn_size = redraw, self.size

    def redraw_if_resized(self) -> None:
        """Error bars and hi-res lines are laid out for the size the plot had when drawn
        (zero while hidden, e.g. before `g` shows it): draw again at a new size only. A pane
        shown again gets a Resize at its old size: a 3,679-point scatter redrawn on every
        visit to Compression took ~0.1 s of the switch."""
        if self.redraw is not None and self.size != self.drawn_size:
            self.redraw()

    @on(Resize)
    def _resized(self) -> None:
        self.call_after_refresh(self.redraw_if_resized)


def _never_unstyled(render_line):
    """textual-hires-canvas leaves some segments with no style at all, and Textual's
    monochrome filter (NO_COLOR) reads `.color` of every segment's style: give each a
    null Style instead of None (tests/tui/test_snapshots.py: the NO_COLOR snapshot)."""
    def render(y: int) -> Strip:
        strip = render_line(y)
        return Strip([seg if seg.style is not None else Segment(seg.text, NULL_STYLE, seg.control)
                      for seg in strip], strip.cell_length)
    return render


def new_plot(widget_id: str) -> PlotWidget:
    return FigurePlot(id=widget_id, allow_pan_and_zoom=False)


class NoTicks(AxisFormatter):
    """An axis with no ticks: a cleared plot names nothing (not the last grid's configs)."""

    def get_ticks(self, min_: float, max_: float, max_ticks: int = 8) -> list[float]:
        return []

    def get_labels_for_ticks(self, ticks: Sequence[float]) -> list[str]:
        return []


def clear_plot(plot: PlotWidget) -> None:
    """An empty plot: no points, ticks or axis labels. PlotWidget.clear drops the points
    only, so the last draw's config ticks (another grid's, maybe) would stay, and its y
    label too: textual-plot writes that label over its row without blanking it first."""
    plot.remember(lambda: clear_plot(plot))
    plot.set_x_formatter(NoTicks())
    plot.set_y_formatter(NoTicks())
    plot.set_xlabel("")
    plot.set_ylabel("")
    plot.query_one("#margin-top", Canvas).reset()
    plot.border_title = ""
    plot.clear()


def draw_item_scatter(plot: PlotWidget, discrimination, fragility) -> int:
    """Discrimination (x) against fragility (y) per item with both defined; returns how
    many items are drawn."""
    plot.remember(lambda: draw_item_scatter(plot, discrimination, fragility))
    import numpy as np

    d, f = np.asarray(discrimination, dtype=float), np.asarray(fragility, dtype=float)
    ok = np.isfinite(d) & np.isfinite(f)
    plot.clear()
    plot.set_x_formatter(NumericAxisFormatter())
    plot.set_xlabel("discrimination (reference config)")
    plot.set_ylabel("fragility")
    plot.set_y_formatter(_row_ticks(plot))
    plot.scatter(d[ok], f[ok], marker="•", marker_style="cyan")
    plot.set_ylimits(-0.02, 1.02)
    lo, hi = (float(d[ok].min()), float(d[ok].max())) if ok.any() else (-1.0, 1.0)
    pad = max(0.02, (hi - lo) * 0.03)
    plot.set_xlimits(lo - pad, hi + pad)
    return int(ok.sum())


def draw_config_accuracy(plot: PlotWidget, configs: Sequence[str],
                         accuracy: dict[str, list], highlight: str | None = None) -> None:
    """accuracy: model -> accuracy (0..1 or None) per config, in `configs` order; each
    model's points joined by a line, the highlighted model's in bold."""
    plot.remember(lambda: draw_config_accuracy(plot, configs, accuracy, highlight))
    plot.clear()
    plot.set_x_formatter(ConfigAxis(configs, plot))
    plot.set_xlabel(config_axis_label(configs))
    plot.set_ylabel("accuracy %")
    plot.set_y_formatter(_row_ticks(plot))
    series = list(accuracy.items())[:MAX_SERIES]
    labels = legend_labels([model for model, _ in series], highlight)
    for k, ((model, values), label) in enumerate(zip(series, labels)):
        xs = [j for j, v in enumerate(values) if v is not None]
        ys = [100 * values[j] for j in xs]
        style = STYLES[k] + (" bold" if model == highlight else "")
        if len(xs) > 1:
            plot.plot(xs, ys, line_style=STYLES[k] + " dim", hires_mode=HiResMode.BRAILLE)
        plot.scatter(xs, ys, marker=MARKERS[k], marker_style=style, label=label)  # glyph: drawn
    # room on the right for the legend (it is drawn over the plot area), so no point hides
    legend_width = LEGEND_MARKER_BORDER + max((len(label) for label in labels), default=0)
    plot.set_xlimits(-0.5, _x_max_beside_legend(plot, len(configs), legend_width))
    plot.set_ylimits(0, 100)
    plot.show_legend()


def legend_labels(models: list[str], highlight: str | None) -> list[str]:
    """The legend's names: cut in the middle to LEGEND_NAME_WIDTH, as little wider as keeps
    two apart (the end tells an int4 build from an int8 one), the highlighted one marked."""
    names = distinct_labels([clean(m, one_line=True, limit=200) for m in models],
                            LEGEND_NAME_WIDTH)
    return [name + (" (this)" if model == highlight else "")
            for model, name in zip(models, names)]


def _x_max_beside_legend(plot: PlotWidget, configs: int, legend_width: int) -> float:
    """The x limit that puts the last config left of a legend `legend_width` columns wide
    at the plot's top right (more configs than columns share columns: 48 at 80 columns);
    LEGEND_ROOM while the plot is not laid out or leaves no column beside the legend."""
    canvas = plot.size.width - plot.margin_left
    room = canvas - legend_width - 2  # columns left of the legend, one kept blank
    if room < 1:
        return (configs - 0.5) * LEGEND_ROOM
    return -0.5 + configs * canvas / room


def draw_pair_deltas(plot: PlotWidget, configs: Sequence[str], deltas: list) -> None:
    """deltas: analysis.config_deltas.ConfigDelta per config (Δ̂ and interval as fractions):
    a vertical bar per interval, ● at Δ̂, a dotted zero line."""
    plot.remember(lambda: draw_pair_deltas(plot, configs, deltas))
    plot.clear()
    plot.set_x_formatter(ConfigAxis(configs, plot))
    plot.set_xlabel(config_axis_label(configs))
    plot.set_ylabel("Δ̂ A−B, points")
    plot.set_y_formatter(_row_ticks(plot))
    n = len(configs)
    plot.plot([-0.5, n - 0.5], [0, 0], line_style="dim", hires_mode=HiResMode.BRAILLE)
    xs, ys, ends = [], [], []
    bar_x, mid, half = [], [], []
    for k, d in enumerate(deltas):
        if d.delta is None:
            continue
        xs.append(k)
        ys.append(100 * d.delta)
        if d.ci is not None:  # a percentile interval need not be symmetric about Δ̂:
            lo, hi = 100 * d.ci[0], 100 * d.ci[1]  # drawn as a bar about its own middle
            bar_x.append(k)
            mid.append((lo + hi) / 2)
            half.append((hi - lo) / 2)
            ends += [lo, hi]
    if bar_x:  # each interval as a column of │ dense enough to join at any plot height
        # (error bars and hi-res lines laid out while the plot is hidden do not show)
        import numpy as np

        t = np.linspace(-1.0, 1.0, 81)
        plot.scatter(np.repeat(bar_x, t.size), (np.asarray(mid)[:, None] +
                                                np.asarray(half)[:, None] * t).ravel(),
                     marker="│", marker_style="yellow")
    plot.scatter(xs, ys, marker="●", marker_style="bold green")  # the title says ● and │
    span = [abs(v) for v in ys + ends] or [1.0]
    top = max(1.0, max(span)) * 1.1
    plot.set_xlimits(-0.5, n - 0.5)
    plot.set_ylimits(-top, top)


def draw_sequence(plot: PlotWidget, path: list, margin: float, pool: int,
                  stop_items: int | None) -> None:
    """A sequential comparison (analysis/sequential.py's Step per chunk, fractions): x the
    items done, a vertical bar per chunk for the confidence sequence, ● at Δ̂, the ±m
    margin as dashed lines, a dotted zero line and the stopping point as a column of ┊."""
    plot.remember(lambda: draw_sequence(plot, path, margin, pool, stop_items))
    import numpy as np

    plot.clear()
    plot.set_x_formatter(NumericAxisFormatter())
    plot.set_xlabel("items done")
    plot.set_ylabel("Δ̂ A−B, points")
    plot.set_y_formatter(_row_ticks(plot))
    steps = [s for s in path if s.delta is not None]
    ends = [100 * v for s in path for v in (s.lower, s.upper)]
    top = _nice_ceiling(min(100.0, max([1.0, 100 * margin] + [abs(v) for v in ends]) * 1.1))
    right = float(max(pool, 1))
    plot.plot([0, right], [0, 0], line_style="dim", hires_mode=HiResMode.BRAILLE)
    m = 100 * margin
    if m > 0:
        for y in (m, -m):
            xs = np.linspace(0, right, 41)
            plot.scatter(xs, np.full(xs.size, y), marker="╌", marker_style="cyan")
    if stop_items is not None:
        t = np.linspace(-top, top, 81)
        plot.scatter(np.full(t.size, float(stop_items)), t, marker="┊",
                     marker_style="bold magenta")
    if path:  # each sequence as a column of │ dense enough to join at any plot height
        x = np.array([float(s.items) for s in path])
        lo = np.array([100 * s.lower for s in path])
        hi = np.array([100 * s.upper for s in path])
        t = np.linspace(0.0, 1.0, 81)
        plot.scatter(np.repeat(x, t.size), (lo[:, None] + (hi - lo)[:, None] * t).ravel(),
                     marker="│", marker_style="yellow")
    if steps:
        plot.scatter([float(s.items) for s in steps], [100 * s.delta for s in steps],
                     marker="●", marker_style="bold green")
    # textual-plot maps x to floor((x - min) / (max - min) * width) columns: x at the
    # limit itself falls one column past the edge and is not drawn (the last chunk's point
    # and bar, a stop at the pool's end), so the axis runs a little past the pool
    plot.set_xlimits(0, right * (1 + SEQUENCE_X_ROOM))
    plot.set_ylimits(-top, top)


SEQUENCE_X_ROOM = 0.03  # the sequence plot's x axis past the pool: its last column drawn


def _nice_ceiling(x: float) -> float:
    """The least 1, 2 or 5 × 10^k at or above x: the axis then ends on a tick (a short plot
    at 80×24 labels its ends, not only 0)."""
    power = 10.0 ** floor(log10(x))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= x - 1e-9)
