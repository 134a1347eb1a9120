"""The modal forms: help (every binding), selection, export."""

from __future__ import annotations


from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Select, SelectionList, Static
from textual.widgets.selection_list import Selection as ListItem

from fragility_tui.grid.reference import ReferenceNotInView, check_reference
from fragility_tui.harness.configs import REFERENCE, default_reference
from fragility_tui.tui.selection import Selection
from fragility_tui.text import distinct_labels
from fragility_tui.tui.sanitize import clean




# ---------------------------------------------------------------- modal forms
class HelpScreen(ModalScreen):
    """Every binding of the app, its panes, screens and tables: (keys, does, where, id) rows
    handed down by the app, which knows them all and the user's keymap. The columns fit the
    box and long cells wrap: at 80 columns the descriptions were cut off mid-word."""

    BINDINGS = [Binding("escape,f1,question_mark,q", "dismiss", "Close", id="help.close")]
    KEY_WIDTH, WHERE_WIDTH, ID_WIDTH = 14, 12, 19
    ID_COLUMN_FROM = 110  # terminal columns from which the keymap id has a column of its own

    def __init__(self, rows: list[tuple[str, str, str, str]]):
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(Text("Keys (Esc closes) — mouse works too: click tabs, headers "
                              "(sort), rows", style="bold"))
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        self._fill()
        self.query_one(DataTable).focus()

    def on_resize(self) -> None:
        self._fill()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        own_id = self.app.size.width >= self.ID_COLUMN_FROM
        fixed = [self.KEY_WIDTH, self.WHERE_WIDTH] + ([self.ID_WIDTH] if own_id else [])
        # the box is 90% of the screen; its border, the scrollbar and each column's padding
        inner = int(self.app.size.width * 0.9) - 4 - 2 * table.cell_padding * (len(fixed) + 1)
        table.add_column("key", width=self.KEY_WIDTH)
        table.add_column("where", width=self.WHERE_WIDTH)
        table.add_column("does" if own_id else "does  (keymap.toml id)",
                         width=max(20, inner - sum(fixed)))
        if own_id:
            table.add_column("id (keymap.toml)", width=self.ID_WIDTH)
        for key, description, where, binding_id in self.rows:
            does = Text(description)
            if binding_id and not own_id:
                does.append(f"  {binding_id}", style="dim")
            cells = [Text(key, style="bold"), Text(where, style="dim"), does]
            table.add_row(*cells, *([Text(binding_id, style="dim")] if own_id else []),
                          height=None)
        table.move_cursor(row=min(cursor, table.row_count - 1))

    def action_dismiss(self) -> None:
        self.dismiss(None)


class SelectionScreen(ModalScreen[Selection | None]):
    """Choose the configs, models and benchmarks every pane honours."""

    BINDINGS = [
        Binding("a", "apply", "Apply", tooltip="Apply the selection and recompute",
                id="selection.apply"),
        Binding("r", "reset", "Reset", tooltip="Select everything again", id="selection.reset"),
        Binding("escape", "cancel", "Cancel", tooltip="Close without changing the selection",
                id="selection.cancel"),
    ]

    def __init__(self, cube, current: Selection):
        super().__init__()
        self.cube = cube
        self.current = current

    def compose(self) -> ComposeResult:
        cube, cur = self.cube, self.current
        benchmarks = sorted(set(cube.benchmarks.tolist()))
        with Vertical(id="selection-box"):
            yield Static(Text("Space toggles · a applies · r resets · Esc cancels. The "
                              "reference config (every statistic is measured against it; "
                              "report --reference) always stays in view.", style="bold"))
            yield Input(placeholder="configs by axis: harness=lm-eval shots=0 order=o3 or "
                                    "text of an id; Enter selects them", id="sel-axes")
            with Horizontal(id="selection-lists"):
                yield _list("configs", cube.configs, cur.configs)
                yield _list("models", cube.models, cur.models)
                yield _list("benchmarks", benchmarks, cur.benchmarks)
            # a name cut to its list's width, whole (three lists of starter-real's names
            # need ~90 columns)
            yield Static("", id="sel-highlighted")
            yield Static("", id="selection-error")
            with Horizontal(id="selection-buttons"):
                yield Static("reference", id="sel-reference-label")
                yield Select([(clean(c, one_line=True, limit=40), c) for c in cube.configs],
                             value=cube.reference, allow_blank=False, id="sel-reference")
                yield Button("Apply (a)", id="apply", variant="primary")
                yield Button("Cancel (Esc)", id="cancel")

    def on_mount(self) -> None:
        self._size_lists()
        # the lists have the focus, so a / r / Esc act at once; the axis field is Tab away
        self.query_one("#sel-configs", SelectionList).focus()

    def on_resize(self) -> None:
        self._size_lists()

    def _size_lists(self) -> None:
        """Configs and benchmarks as wide as their longest name, up to a third of the screen
        each (a third of the box each cut "o0.instruct" and "arc_challenge" at 80 columns);
        the models take the rest. Then every label is cut to its list's new width."""
        for name in ("configs", "benchmarks"):
            widget = self.query_one(f"#sel-{name}", SelectionList)
            longest = max((len(str(widget.get_option_at_index(k).value))
                           for k in range(widget.option_count)), default=0)
            # the border and the padding take 2 each, a scrollbar 2 more when rows overflow
            scrollbar = 2 if widget.option_count > self.app.size.height // 2 else 0
            widget.styles.width = min(longest + CHECKBOX_WIDTH + 4 + scrollbar,
                                      self.app.size.width // 3)
        self.call_after_refresh(self._fit_labels)

    def _fit_labels(self) -> None:
        """Cut long names to the list's width so that no two look alike (SelectionList
        would cut them all at the end: twelve "synthetic-mode…")."""
        for widget in self.query(SelectionList):
            width = widget.scrollable_content_region.width - CHECKBOX_WIDTH
            values = [widget.get_option_at_index(k).value for k in range(widget.option_count)]
            for k, label in enumerate(distinct_labels([clean(v, one_line=True, limit=200)
                                                       for v in values], width)):
                widget.replace_option_prompt_at_index(k, label)

    @on(SelectionList.SelectionHighlighted)
    def _highlighted(self, event: SelectionList.SelectionHighlighted) -> None:
        self._show_whole_name(event.selection_list)

    def on_descendant_focus(self, event) -> None:
        self._show_whole_name(event.widget)

    def _show_whole_name(self, widget) -> None:
        """The focused list's highlighted name, whole (its list may show it cut)."""
        if not isinstance(widget, SelectionList) or not widget.has_focus or \
                widget.highlighted is None:
            return
        value = widget.get_option_at_index(widget.highlighted).value
        self.query_one("#sel-highlighted", Static).update(Text(
            f"{widget.border_title}: {clean(value, one_line=True, limit=200)}", style="dim"))

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        chosen = {name: tuple(self.query_one(f"#sel-{name}", SelectionList).selected)
                  for name in ("configs", "models", "benchmarks")}
        reference = self.query_one("#sel-reference", Select).value
        problem = _selection_problem(chosen, len(self.cube.models), reference)
        if problem:
            self.query_one("#selection-error", Static).update(Text(problem, style="bold red"))
            return
        every = {"configs": self.cube.configs, "models": self.cube.models,
                 "benchmarks": sorted(set(self.cube.benchmarks.tolist()))}
        fields = {name: None if set(values) == set(every[name]) else
                  tuple(v for v in every[name] if v in values)
                  for name, values in chosen.items()}
        # None while it is the grid's default, so a grid without o0.letter keeps its own
        default = default_reference(self.cube.configs)
        self.dismiss(Selection(**fields, reference=None if reference == default else reference))

    @on(Input.Submitted, "#sel-axes")
    def select_configs_by_axes(self, event: Input.Submitted) -> None:
        """Select exactly the configs whose axes match the query (the others deselected)."""
        from fragility_tui.harness.config_axes import select_by_axes

        try:
            wanted = set(select_by_axes(event.value, self.cube.configs, self.cube.axes))
        except ValueError as exc:
            self.query_one("#selection-error", Static).update(
                Text(clean(exc, one_line=True, limit=300), style="bold red"))
            return
        widget = self.query_one("#sel-configs", SelectionList)
        widget.deselect_all()
        for config in wanted:
            widget.select(config)
        self.query_one("#selection-error", Static).update(
            Text(f"{len(wanted)} configs match" + ("" if wanted else ": nothing selected"),
                 style="dim" if wanted else "bold red"))
        event.stop()

    def action_reset(self) -> None:
        for name in ("configs", "models", "benchmarks"):
            self.query_one(f"#sel-{name}", SelectionList).select_all()
        self.query_one("#sel-reference", Select).value = default_reference(self.cube.configs)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


CHECKBOX_WIDTH = 5  # "▐X▌ " before each label, and a cell of margin


def _list(name: str, values, chosen) -> SelectionList:
    chosen = set(values) if chosen is None else set(chosen)
    widget = SelectionList(*(ListItem(clean(v, one_line=True, limit=80), v, v in chosen)
                             for v in values), id=f"sel-{name}")
    widget.border_title = name
    return widget


def _selection_problem(chosen: dict, n_models: int, reference: str = REFERENCE) -> str | None:
    try:
        check_reference(reference, chosen["configs"])
    except ReferenceNotInView as exc:
        return str(exc)
    if len(chosen["models"]) < min(2, n_models):
        return "choose at least two models (pairs and rankings need them)"
    if not chosen["benchmarks"]:
        return "choose at least one benchmark"
    return None


class ExportScreen(ModalScreen[str | None]):
    """Ask where to export the current table; the suffix picks the format."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export.cancel")]

    def __init__(self, default_path: str):
        super().__init__()
        self.default_path = default_path

    def compose(self) -> ComposeResult:
        with Vertical(id="export-box"):
            yield Static(Text("Export the current table (filter and sort applied). The suffix "
                              "picks the format: .csv, .parquet or .md. Enter saves, Esc "
                              "cancels.", style="bold"))
            yield Input(value=self.default_path, id="export-path")

    @on(Input.Submitted, "#export-path")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
