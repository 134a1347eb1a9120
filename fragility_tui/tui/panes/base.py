"""The pane base class: a titled area that renders the open grid's GridView.

The app hands its state down (data_bind): `grids`, `grid_name`, `view`. A pane re-renders
when one changes while it is shown, else when it is shown next; it tells the app what the
user wants by posting a message (fragility_tui.tui.messages), never by calling into it."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.events import Mount
from textual.containers import Vertical
from textual.reactive import var
from textual.widgets import Static

from fragility_tui.tui.messages import PaneMounted
from fragility_tui.tui.sanitize import clean
from fragility_tui.tui.widgets import TABLES, ReportTable, TableRows


class Pane(Vertical):
    """One of the eight top-level areas. Subclasses fill `render_view`."""

    pane_id = "pane"
    title = "Pane"
    help = ""
    needs_view = True  # False for panes that work without an open grid (Grids, Runs)
    needs_statistics = True  # False for panes a big grid's first sections serve (Bands, Items)
    # The usual body: a ReportTable named after the pane, with optional Statics (by id)
    # above and below it. Panes with other bodies override compose_body.
    static_above: str | None = None
    static_below: str | None = None

    def __init_subclass__(cls, pane_id: str | None = None, title: str | None = None,
                          above: str | None = None, below: str | None = None, **kwargs):
        """`class AxesPane(Pane, pane_id="axes", title="Axes", below="axes-chart")`."""
        super().__init_subclass__(**kwargs)
        for name, value in (("pane_id", pane_id), ("title", title),
                            ("static_above", above), ("static_below", below)):
            if value is not None:
                setattr(cls, name, value)

    grids: var[list | None] = var(None, always_update=True)
    grid_name: var[str | None] = var(None)
    view = var(None, always_update=True)

    def __init__(self, *, gateway=None, **kwargs):
        super().__init__(**kwargs)
        self.gateway = gateway  # tui.gateway.StoreGateway: typed store reads, for workers
        self.db_path = gateway.db_path if gateway else None
        self.stale = True

    @on(Mount)  # a decorated handler: subclasses keep their own on_mount
    def _announce_mount(self) -> None:
        self.post_message(PaneMounted(self.pane_id))

    def watch_grids(self) -> None:
        self._changed()

    def watch_grid_name(self) -> None:
        self._changed()

    def watch_view(self) -> None:
        self._changed()

    def _changed(self) -> None:
        self.stale = True
        if self.is_mounted and self.display:
            self.refresh_pane()

    def compose(self) -> ComposeResult:
        yield Static(Text(self.help, style="dim"), classes="pane-help")
        yield Static("", classes="pane-empty")
        yield from self.compose_body()

    def compose_body(self) -> ComposeResult:
        if self.static_above:
            yield Static("", id=self.static_above)
        yield ReportTable(table_name=self.pane_id, id=f"{self.pane_id}-table")
        if self.static_below:
            yield Static("", id=self.static_below)

    def refresh_pane(self) -> None:
        """Re-render from the app's state (called when the pane is shown and stale)."""
        self.stale = False
        view = self.view
        empty = self.query_one(".pane-empty", Static)
        waiting = (self.needs_view and view is None) or \
            (self.needs_statistics and view is not None and view.partial)
        if self.needs_view:  # no other grid's figures under the waiting message
            for child in self.children:
                if not (child.has_class("pane-help") or child.has_class("pane-empty")):
                    child.display = not waiting
        empty.display = waiting
        if waiting:
            empty.update(Text(self.waiting_message(), style="italic"))
            return
        self.render_view(view)

    def waiting_message(self) -> str:
        if self.view is not None and self.view.partial:
            return ("computing the statistics (bootstrap intervals) of this big grid… "
                    "the Bands (2) and Items (4) panes are ready")
        if self.grids is None:
            return "opening the store…"
        if self.grid_name is not None:
            return f"computing grid {clean(self.grid_name, one_line=True, limit=80)}…"
        return "no grid open: choose one in the Grids pane (1)"

    def render_view(self, view) -> None:
        raise NotImplementedError

    def main_table(self) -> TableRows | None:
        tables = list(self.query(TABLES))
        return tables[0] if tables else None

    def focus_main(self) -> None:
        table = self.main_table()
        if table is not None:
            table.focus()

    def focus_on_open(self) -> None:
        """Where the focus goes when the pane is switched to: its table, unless the pane
        starts elsewhere (Compare: its first model picker)."""
        self.focus_main()

    def apply_filter(self, text: str) -> None:
        table = self.main_table()
        if table is not None:
            table.set_filter(text)
            self.update_caption()

    def update_caption(self) -> None:
        table = self.main_table()
        if table is not None:
            table.border_subtitle = Text(table.caption_text)
