"""The calibration line of the Pairs and Compare panes: how often the selected pair's verdict
or label comes out under two named scenarios: reproducibility at the observed gap, and a
null — exchangeable rows for a verdict (Pairs), no reference gap with each model's harness
effects kept for a label (Compare) (analysis/calibration.py: quoted_scenarios,
summary_line), computed in a worker thread and kept in the store (services/reports.py:
grid_calibration)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rich.text import Text
from textual.message import Message

from fragility_tui.tui.sanitize import clean

CALIBRATING = "calibrating…"
_ONE_AT_A_TIME = threading.Lock()  # a calibration holds a few stacked cubes: never two at once


@dataclass
class CalibrationReady(Message):
    view: object  # the GridView it was computed for
    a: str
    b: str
    result: dict | None  # the pair's tallies (oriented A, B); None when it failed
    error: str | None = None


def failed_line(error: str) -> Text:
    """The line when the worker failed (the error may quote untrusted names: cleaned)."""
    return Text("calibration failed: " + clean(error, one_line=True, limit=200), style="yellow")


def pair_calibration(gateway, view, a: str, b: str, still_wanted) -> dict | None:
    """The pair's calibration on the view's cube (its selection and reference), from the
    store's cache or computed now; None if `still_wanted()` turns false while it waits its
    turn."""
    with _ONE_AT_A_TIME:
        if not still_wanted():
            return None
        from fragility_tui.services.reports import grid_calibration

        return grid_calibration(gateway, view.grid, cube=view.cube, pairs=[(a, b)],
                                seed=view.seed)["pairs"][0]


def start_calibration(pane, view, a: str, b: str) -> None:
    """Calibrate the pair in a thread worker of `pane` (one at a time per pane: a newer
    request cancels the older one); the result arrives as CalibrationReady."""
    pane.run_worker(lambda: _calibrate_in_worker(pane, view, a, b), thread=True,
                    exclusive=True, group="calibration", exit_on_error=False)


def _calibrate_in_worker(pane, view, a: str, b: str) -> None:
    """Posts CalibrationReady to `pane` (and WorkFailed when the calibration fails);
    nothing when the worker was cancelled while it waited."""
    from textual.worker import get_current_worker

    from fragility_tui.tui.messages import WorkFailed

    worker = get_current_worker()
    try:
        result = pair_calibration(pane.gateway, view, a, b, lambda: not worker.is_cancelled)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        pane.post_message(WorkFailed(f"calibrating {a} vs {b}", error))
        pane.post_message(CalibrationReady(view, a, b, None, error))
        return
    if result is not None:
        pane.post_message(CalibrationReady(view, a, b, result))


def verdict_line(result: dict, width: int) -> Text:
    """Pairs pane: the pair's verdict, or `manufactured` when it is manufactured."""
    from fragility_tui.analysis.calibration import summary_line

    observed = result["observed"]
    outcome = "manufactured" if observed["manufactured"] else observed["verdict"]
    return Text(summary_line(result, outcome, width=width))


def label_line(result: dict, width: int, target: str = "observed") -> Text:
    """Compare pane: the pair's decision label under the observed target."""
    from fragility_tui.analysis.calibration import summary_line

    return Text(summary_line(result, result["observed"]["labels"][target], target, width=width))


def line_width(widget) -> int:
    """Columns the line may use: the widget's content width once laid out, else 78."""
    width = widget.content_region.width if widget.is_mounted else 0
    return width if width > 20 else 78
