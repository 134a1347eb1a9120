"""Drill-down screens (Enter pushes, Esc pops) and the modal forms: help, selection, export."""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, DataTable, Footer, Input, SelectionList, Static
from textual.widgets.selection_list import Selection as ListItem

from fragility_tui.grid.configs import REFERENCE
from fragility_tui.tui.compute import Selection, pair_item_groups
from fragility_tui.tui.panes.items import COLUMNS as ITEM_COLUMNS
from fragility_tui.tui.panes.items import item_rows
from fragility_tui.tui.sanitize import block, clean
from fragility_tui.tui.widgets import Column, ReportTable, hbar, safe_title


# ---------------------------------------------------------------- drill-down base
class DrillScreen(Screen):
    """A pushed view: Esc (or q) goes back; / filters its table; the app's keys still work."""

    BINDINGS = [
        Binding("escape", "back", "Back", tooltip="Back to the previous view"),
        Binding("slash", "filter", "Filter", tooltip="Filter this view's table"),
    ]

    def compose_header(self) -> ComposeResult:
        yield Static("", classes="drill-title")

    def set_title(self, text: str) -> None:
        self.query_one(".drill-title", Static).update(Text(clean(text, one_line=True, limit=300),
                                                           style="bold"))

    def compose_footer(self) -> ComposeResult:
        yield Input(placeholder="filter rows (Esc closes)", classes="drill-filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(".drill-filter", Input).display = False

    def action_back(self) -> None:
        box = self.query_one(".drill-filter", Input)
        if box.display and box.has_focus:
            box.display = False
            self._focus_table()
            return
        self.app.pop_screen()

    def action_filter(self) -> None:
        box = self.query_one(".drill-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, ".drill-filter")
    def _filter(self, event: Input.Changed) -> None:
        tables = list(self.query(ReportTable))
        if tables:
            tables[0].set_filter(event.value)
            tables[0].border_subtitle = Text(tables[0].caption_text)

    @on(Input.Submitted, ".drill-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self._focus_table()

    def _focus_table(self) -> None:
        tables = list(self.query(DataTable))
        if tables:
            tables[0].focus()


# ---------------------------------------------------------------- Bands → model
class ModelScreen(DrillScreen):
    """A model's accuracy under every config in view (Bands → Enter)."""

    def __init__(self, model: str):
        super().__init__()
        self.model = model

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        yield ReportTable(table_name="model-configs", id="model-table")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.app.view
        self.set_title(f"{self.model}: accuracy under each config in view "
                       f"(grid {view.grid})")
        ref = next((e["accuracy"].get(self.model) for e in view.report.get("configs", [])
                    if e["config"] == REFERENCE), None)
        rows = []
        for e in view.report.get("configs", []):
            acc = e["accuracy"].get(self.model)
            delta = None if acc is None or ref is None else 100 * (acc - ref)
            rows.append((e["config"], [e["config"], acc, delta,
                                       self.model in e.get("champions", []),
                                       hbar(acc, 30, style="green")]))
        table = self.query_one(ReportTable)
        table.set_data([Column("config"), Column("accuracy %", "pct"),
                        Column("Δ vs reference (points)", "num"), Column("champion", "bool"),
                        Column("", "rich")], rows)
        table.border_title = safe_title(f"{self.model} × {len(rows)} configs")
        table.border_subtitle = Text(table.caption_text)
        table.focus()


# ---------------------------------------------------------------- Pairs → items
class PairScreen(DrillScreen):
    """The items behind a pair's stable and fragile parts (Pairs → Enter)."""

    def __init__(self, a: str, b: str):
        super().__init__()
        self.a, self.b = a, b

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        yield Static("", id="pair-summary")
        yield ReportTable(table_name="pair-items", id="pair-items")
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.app.view
        self.set_title(f"A = {self.a}   B = {self.b}: the items behind the gap")
        groups = pair_item_groups(view, self.a, self.b)
        summary = Text()
        rows = []
        explain = {"stable: A only": "A robust-correct, B robust-wrong (supports A)",
                   "stable: B only": "B robust-correct, A robust-wrong (supports B)",
                   "fragile split": "the reference config splits them, but at least one of "
                                    "the two is fragile on the item"}
        for part, idx in groups.items():
            summary.append(f"{len(idx):>5,}  {part}: {explain.get(part, '')}\n")
            for key, values in item_rows(view, idx):
                rows.append((key, [part] + values))
        summary.append("Enter on an item: its models × configs matrix and every cell's prompt "
                       "and output.", style="dim")
        self.query_one("#pair-summary", Static).update(summary)
        table = self.query_one(ReportTable)
        table.set_data([Column("part")] + ITEM_COLUMNS, rows)
        table.border_title = "Items by part of the gap split"
        table.border_subtitle = Text(table.caption_text)
        table.focus()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.app.push_screen(ItemScreen(event.row_key.value))


# ---------------------------------------------------------------- Items → item
CONFIG_SHORT = {"letter": "L", "paren": "P", "digit": "D", "instruct": "I"}


def short_config(config_id: str) -> str:
    """Column label of the bit matrix: o3.paren → 3P, cloze_qa → qa, cloze_bare → cb."""
    if "." in config_id:
        order, fmt = config_id.split(".")
        return order[1:] + CONFIG_SHORT.get(fmt, fmt[:1].upper())
    return {"cloze_qa": "qa", "cloze_bare": "cb"}.get(config_id, config_id[:2])


@dataclass
class CellsLoaded(Message):
    cells: dict  # (model, config_id) -> cell dict


class ItemScreen(DrillScreen):
    """One item: the models × configs bit matrix and, for the cell under the cursor, the
    exact prompt, the permutation, the raw output, the parse and the option scores."""

    def __init__(self, item_uid: str):
        super().__init__()
        self.item_uid = item_uid
        self.cells: dict = {}

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with Horizontal(id="item-body"):
            with Vertical(id="item-left"):
                yield DataTable(id="bit-matrix", cursor_type="cell", zebra_stripes=False,
                                cell_padding=0)
                yield Static("", id="matrix-legend")
            with VerticalScroll(id="item-right"):
                yield Static("", id="item-text", markup=False)
                yield Static("", id="cell-detail", markup=False)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        view = self.app.view
        self.item = view.items.get(self.item_uid)
        k = view.cube.items.index(self.item_uid)
        self.set_title(f"item {self.item_uid} · {view.cube.benchmarks[k]} · fragility "
                       f"{_fmt(view.fragility[k])} · discrimination {_fmt(view.discrimination[k])}")
        self.query_one("#item-text", Static).update(item_text(self.item))
        self._fill_matrix(view, k)
        self.query_one("#matrix-legend", Static).update(Text(
            "✓ correct  ✗ wrong  · missing   columns: 0L = o0.letter, 3P = o3.paren, "
            "D digit, I instruct, qa/cb = cloze_qa/cloze_bare", style="dim"))
        self.load_cells()
        self.query_one("#bit-matrix", DataTable).focus()

    def _fill_matrix(self, view, k: int) -> None:
        table = self.query_one("#bit-matrix", DataTable)
        table.add_column(Text("model"), key="model")
        for c in view.cube.configs:
            table.add_column(Text(short_config(c).rjust(3)), key=c, width=3)
        for m, model in enumerate(view.cube.models):
            marks = [bit_mark(bool(view.cube.bits[m, k, c]), bool(view.cube.present[m, k, c]))
                     for c in range(len(view.cube.configs))]
            table.add_row(Text(clean(model, one_line=True, limit=200)[:28] + " "), *marks,
                          key=model)
        if len(view.cube.configs):
            table.move_cursor(row=0, column=1, animate=False)

    @work(thread=True, exclusive=True, group="item-cells", exit_on_error=False)
    def load_cells(self) -> None:
        try:
            rows = self.app.store_call("item_cells", self.app.view.grid, self.item_uid)
        except Exception as exc:  # the matrix stays useful without the cell details
            rows = []
            self.app.call_from_thread(self.app.notify, clean(exc, limit=300),
                                      title="could not load cells", severity="error",
                                      markup=False)
        self.post_message(CellsLoaded({(r["model"], r["config_id"]): r for r in rows}))

    @on(CellsLoaded)
    def _cells_loaded(self, message: CellsLoaded) -> None:
        self.cells = message.cells
        self._show_cell()

    @on(DataTable.CellHighlighted, "#bit-matrix")
    def _highlighted(self, event: DataTable.CellHighlighted) -> None:
        self._show_cell()

    def _show_cell(self) -> None:
        table = self.query_one("#bit-matrix", DataTable)
        if not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate)
        model, config_id = key.row_key.value, key.column_key.value
        detail = self.query_one("#cell-detail", Static)
        if config_id == "model":
            detail.update(Text("move right onto a config column to see that cell", style="dim"))
            return
        view = self.app.view
        detail.update(cell_detail(self.item, model, config_id, self.cells.get((model, config_id)),
                                  view.seed))


def bit_mark(correct: bool, present: bool) -> Text:
    if not present:
        return Text("  ·", style="dim")
    return Text("  ✓", style="bold green") if correct else Text("  ✗", style="bold red")


ITEM_TEXT_LIMIT = 4_000  # characters of one question/choice/output shown in the drill-down


def item_text(item) -> Text:
    if item is None:
        return Text("(item text not in the store)", style="dim")
    text = Text()
    text.append("Question\n", style="bold")
    text.append_text(block(item.question, limit=ITEM_TEXT_LIMIT))
    text.append("\n\nChoices (native order, gold marked)\n", style="bold")
    for j, choice in enumerate(item.choices):
        mark = "★" if j == item.gold else " "
        text.append(f"{mark} {j}: ", style="bold green" if j == item.gold else "")
        text.append_text(block(choice, limit=ITEM_TEXT_LIMIT))
        text.append("\n")
    return text


def cell_detail(item, model: str, config_id: str, cell: dict | None, seed: int) -> Text:
    """Everything that explains one correctness bit, all untrusted text sanitised."""
    text = Text()
    text.append(f"\n{clean(model, one_line=True, limit=200)} × {config_id}\n", style="bold underline")
    if cell is None:
        text.append("no cell recorded for this model and config\n", style="dim")
        return text
    text.append("correct\n" if cell["correct"] else "wrong\n",
                style="bold green" if cell["correct"] else "bold red")
    perm = _perm(cell.get("permutation"))
    prompt = None
    if item is not None:
        try:
            from fragility_tui.grid.render import render

            prompt = render(item, config_id, seed, permutation=perm)
        except (ValueError, KeyError) as exc:
            text.append(f"cannot re-render the prompt: {clean(exc, limit=300)}\n", style="red")
    if cell.get("permutation"):
        text.append(f"permutation {clean(cell['permutation'], one_line=True, limit=20)} "
                    "(display position j shows native choice p[j])\n")
    if prompt is not None:
        _append_prompt(text, prompt)
    _append_output(text, cell, prompt)
    scores = cell.get("scores")
    if scores:
        _append_scores(text, scores, item)
    extras = [f"{k} {cell[k]}" for k in ("tokens", "ms", "run_id") if cell.get(k) is not None]
    if extras:
        text.append(clean(" · ".join(extras), one_line=True, limit=300) + "\n", style="dim")
    return text


def _append_prompt(text: Text, prompt) -> None:
    from fragility_tui.grid.render import ClozePrompt

    if isinstance(prompt, ClozePrompt):
        text.append("context (likelihood scoring)\n", style="bold")
        text.append_text(block(prompt.context, limit=ITEM_TEXT_LIMIT, style="on grey11"))
        text.append("\ncontinuations\n", style="bold")
        for j, cont in enumerate(prompt.continuations):
            text.append(f"  {j}: ")
            text.append_text(block(cont, limit=ITEM_TEXT_LIMIT))
            text.append("\n")
        return
    text.append("prompt as the model saw it", style="bold")
    text.append(" (instruct models: the same body as one user chat message, no "
                "'Answer:' line, through their chat template)\n", style="dim")
    text.append_text(block(prompt.text, limit=3 * ITEM_TEXT_LIMIT, style="on grey11"))
    text.append("\n")


def _append_output(text: Text, cell: dict, prompt) -> None:
    raw = cell.get("raw_output")
    if raw is None and cell.get("scores") is None:
        text.append("no raw output stored (imported or synthetic cell)\n", style="dim")
    if raw is not None:
        text.append("raw output\n", style="bold")
        text.append_text(block(raw, limit=ITEM_TEXT_LIMIT, style="on grey11"))
        text.append("\n")
        if prompt is not None and hasattr(prompt, "labels"):
            from fragility_tui.grid.parser import explain

            text.append("parse: ", style="bold")
            text.append(clean(explain(raw, prompt.labels, prompt.options), limit=2000) + "\n")
    pred = cell.get("pred")
    if pred is not None:
        label = "unparsed (counted wrong)" if pred == -1 else f"native choice {pred}"
        text.append(f"prediction: {label}\n")


def _append_scores(text: Text, scores: list, item) -> None:
    """Raw log-likelihoods and lm-eval's acc_norm (per character of the option text)."""
    text.append("option scores (raw log-likelihood · per character = acc_norm)\n", style="bold")
    lengths = [len(c.strip()) for c in item.choices] if item is not None else [0] * len(scores)
    norm = [s / n if n else float("nan") for s, n in zip(scores, lengths)]
    best = int(np.nanargmax(norm)) if any(n == n for n in norm) else -1
    for j, (s, v) in enumerate(zip(scores, norm)):
        mark = "→" if j == best else " "
        text.append(f" {mark} {j}: {s:10.4f} · {v:8.4f}\n")


def _perm(value) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(ch) for ch in str(value))
    except ValueError:
        return None


def _fmt(x) -> str:
    return "—" if x is None or x != x else f"{x:.2f}"


# ---------------------------------------------------------------- Runs → provenance
class ProvenanceScreen(DrillScreen):
    """A run's provenance card: everything a score must carry (SPEC §10)."""

    def __init__(self, run: dict):
        super().__init__()
        self.run = run

    def compose(self) -> ComposeResult:
        yield from self.compose_header()
        with VerticalScroll():
            yield Static("", id="provenance", markup=False)
        yield from self.compose_footer()

    def on_mount(self) -> None:
        super().on_mount()
        self.set_title(f"run {self.run.get('run_id')}: provenance")
        text = Text()
        for key in ("run_id", "grid", "model", "status", "pid", "created_at", "started_at",
                    "ended_at", "cells_done", "cells_total", "tokens", "seconds", "events_path",
                    "error"):
            if self.run.get(key) is not None:
                text.append(f"{key:<12} ", style="bold")
                text.append(clean(self.run[key], one_line=True, limit=2000) + "\n")
        for key in ("spec", "provenance"):
            text.append(f"\n{key}\n", style="bold underline")
            dumped = json.dumps(self.run.get(key) or {}, indent=2, sort_keys=True, default=str)
            text.append_text(block(dumped))
            text.append("\n")
        self.query_one("#provenance", Static).update(text)


# ---------------------------------------------------------------- modal forms
class HelpScreen(ModalScreen):
    """Every binding of the app, its panes, screens and tables."""

    BINDINGS = [Binding("escape,f1,question_mark,q", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            yield Static(Text("Keys (Esc closes) — mouse works too: click tabs, headers "
                              "(sort), rows", style="bold"))
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("key", "where", "does")
        for key, description, where in binding_rows():
            table.add_row(Text(key, style="bold"), Text(where, style="dim"), Text(description))
        table.focus()

    def action_dismiss(self) -> None:
        self.dismiss(None)


def binding_rows() -> list[tuple[str, str, str]]:
    """(keys, description, where) for every binding, read from the classes themselves."""
    from fragility_tui.tui.app import FragilityApp
    from fragility_tui.tui.panes import PANES

    rows = [("1 … 8", "switch pane: " + ", ".join(f"{k + 1} {p.title}"
                                                  for k, p in enumerate(PANES)), "everywhere")]
    sources = [("everywhere", FragilityApp.BINDINGS), ("tables", ReportTable.BINDINGS),
               ("drill-downs", DrillScreen.BINDINGS), ("selection form", SelectionScreen.BINDINGS)]
    sources += [(f"{p.title} pane", p.BINDINGS) for p in PANES if "BINDINGS" in p.__dict__]
    for where, bindings in sources:
        for b in bindings:
            if b.key[:1].isdigit() and len(b.key) == 1:
                continue
            rows.append((_key_label(b.key), b.tooltip or b.description, where))
    rows += [("ctrl+p", "command palette: panes, selections, copy, export, screenshot",
              "everywhere"),
             ("↑ ↓ ← → PgUp PgDn Home End", "move in a table", "tables"),
             ("Enter", "drill down (model, pair, item, run)", "tables"),
             ("Tab / shift+Tab", "move focus between widgets", "everywhere"),
             ("ctrl+q", "quit", "everywhere")]
    return rows


def _key_label(key: str) -> str:
    names = {"question_mark": "?", "slash": "/", "escape": "Esc"}
    return ", ".join(names.get(k, k) for k in key.split(","))


class SelectionScreen(ModalScreen[Selection | None]):
    """Choose the configs, models and benchmarks every pane honours."""

    BINDINGS = [
        Binding("a", "apply", "Apply", tooltip="Apply the selection and recompute"),
        Binding("r", "reset", "Reset", tooltip="Select everything again"),
        Binding("escape", "cancel", "Cancel", tooltip="Close without changing the selection"),
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
                              f"reference config {REFERENCE} always stays in view.", style="bold"))
            with Horizontal(id="selection-lists"):
                yield _list("configs", cube.configs, cur.configs)
                yield _list("models", cube.models, cur.models)
                yield _list("benchmarks", benchmarks, cur.benchmarks)
            yield Static("", id="selection-error")
            with Horizontal(id="selection-buttons"):
                yield Button("Apply (a)", id="apply", variant="primary")
                yield Button("Cancel (Esc)", id="cancel")

    @on(Button.Pressed, "#apply")
    def action_apply(self) -> None:
        chosen = {name: tuple(self.query_one(f"#sel-{name}", SelectionList).selected)
                  for name in ("configs", "models", "benchmarks")}
        problem = _selection_problem(chosen, len(self.cube.models))
        if problem:
            self.query_one("#selection-error", Static).update(Text(problem, style="bold red"))
            return
        every = {"configs": self.cube.configs, "models": self.cube.models,
                 "benchmarks": sorted(set(self.cube.benchmarks.tolist()))}
        fields = {name: None if set(values) == set(every[name]) else
                  tuple(v for v in every[name] if v in values)
                  for name, values in chosen.items()}
        self.dismiss(Selection(**fields))

    def action_reset(self) -> None:
        for name in ("configs", "models", "benchmarks"):
            self.query_one(f"#sel-{name}", SelectionList).select_all()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)


def _list(name: str, values, chosen) -> SelectionList:
    chosen = set(values) if chosen is None else set(chosen)
    widget = SelectionList(*(ListItem(clean(v, one_line=True, limit=80), v, v in chosen)
                             for v in values), id=f"sel-{name}")
    widget.border_title = name
    return widget


def _selection_problem(chosen: dict, n_models: int) -> str | None:
    if REFERENCE not in chosen["configs"]:
        return f"keep the reference config {REFERENCE}: every statistic is relative to it"
    if len(chosen["models"]) < min(2, n_models):
        return "choose at least two models (pairs and rankings need them)"
    if not chosen["benchmarks"]:
        return "choose at least one benchmark"
    return None


class ExportScreen(ModalScreen[str | None]):
    """Ask where to export the current table; the suffix picks the format."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

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
