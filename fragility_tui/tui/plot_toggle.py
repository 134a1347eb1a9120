"""A plot beside its table, or one of them at a time on a small terminal (`g` swaps them).

Apart from fragility_tui.tui.plots on purpose: the panes that hold a plot are imported when
the app starts, and textual-plot imports numpy (~0.1 s), which must wait until after the
first frame; the plots themselves are built when a pane is composed."""

from __future__ import annotations

TALL_ENOUGH = 30  # terminal rows from which a plot and its table are shown together


class PlotToggle:
    """For a pane or screen holding a plot (`plot_id`) beside a table (`table_id`): below
    TALL_ENOUGH rows (80×24) one of the two is shown at a time, the table first, and `g`
    swaps them (the plot then also takes the place of `small_hides`, e.g. a long summary);
    from TALL_ENOUGH rows both are shown and `g` hides or shows the plot."""

    plot_id = ""
    table_id = ""
    small_hides: tuple[str, ...] = ()
    plot_wanted: bool | None = None  # None until the user presses g

    def action_toggle_plot(self) -> None:
        self.plot_wanted = not self._plot_shown()
        self.apply_plot_layout()

    def _tall(self) -> bool:
        return self.app.size.height >= TALL_ENOUGH

    def _plot_shown(self) -> bool:
        return self._tall() if self.plot_wanted is None else self.plot_wanted

    def apply_plot_layout(self) -> None:
        shown = self._plot_shown()
        plot, table = self.query_one(f"#{self.plot_id}"), self.query_one(f"#{self.table_id}")
        had_focus = self.app.focused in (plot, table)
        plot.display = shown
        table.display = self._tall() or not shown
        if shown:
            plot.call_after_refresh(plot.redraw_if_resized)  # laid out at its new size
        if had_focus:
            (table if table.display else plot).focus()
        for other in self.small_hides:
            self.query_one(f"#{other}").display = self._tall() or not shown
