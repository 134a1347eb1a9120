"""What the CLI and the app ask of a stored grid's statistics: its report (`report`,
`export --what report`) and the verdict calibration of its pairs (`calibrate`, the Pairs and
Compare panes), each measured against the grid's reference (grid/reference.py) and with
what only the store knows (run costs, cached calibrations)."""

from __future__ import annotations

from fragility_tui.grid.reference import check_reference, choose_reference


def grid_report(store, grid: str, *, cube=None, reference: str | None = None,
                inputs: dict | None = None, **options):
    """The report (analysis.report.Report) of a grid, or of `cube`, a selection of it that
    carries its own reference, with each model's cost per item from its runs: what `report`
    prints and `export --what report` writes (`.to_json()`). reference: for a whole grid,
    the config to measure against (default: `configs.default_reference` of its configs).
    inputs: what report_inputs read for this cube, when the caller read it already."""
    from dataclasses import replace

    from fragility_tui.analysis.report import report_of

    with store_session(store):  # the store's reads on one connection, none kept after
        cube = _measured_cube(store, grid, cube, reference)
        inputs = inputs if inputs is not None else report_inputs(store, grid, cube)
    report = report_of(cube, name=grid, costs=inputs["costs"], near_tie=inputs["near_tie"],
                       **options)
    # labelled synthetic wherever it is shown (README): the flag is the store's
    return replace(report, grid=replace(report.grid, synthetic=inputs["synthetic"]))


def report_inputs(store, grid: str, cube) -> dict:
    """What only the store knows of a grid's report: each model's cost per item, the
    near-tie mask aligned with `cube`, and whether the grid is synthetic."""
    with store_session(store):
        return {"costs": store.model_costs(grid), "near_tie": store.near_tie_mask(grid, cube),
                "synthetic": bool(store.grid_meta(grid).get("synthetic"))}


def store_session(store):
    """store.session() (one connection for every read inside), or nothing for a store
    without sessions (the app's gateway)."""
    from contextlib import nullcontext

    session = getattr(store, "session", None)
    return session() if session is not None else nullcontext()


def _measured_cube(store, grid: str, cube, reference: str | None):
    """The grid's cube with its reference chosen (or `cube` as given), which must hold
    cells of that reference."""
    if cube is None:
        cube = choose_reference(store.load_cube(grid), reference)
    check_reference(cube.reference, cube.configs, field="--grid",
                    hint=f"grid {grid!r} has no cells for it in view")
    return cube


def grid_calibration(store, grid: str, *, cube=None, reference: str | None = None,
                     pairs=None, **settings) -> dict:
    """Verdict calibration (analysis/calibration.py) of a grid's adjacent pairs, or of
    `pairs`, reusing the tallies the store keeps for this content and these settings
    (store/calibration_cache.py) and keeping the ones computed now. `store`: a Store or
    anything with its load_cube / calibration_results / save_calibration (the app's
    StoreGateway). The result says how many pairs came from the cache."""
    from fragility_tui.analysis import calibration

    cube = _measured_cube(store, grid, cube, reference)
    key = calibration.cache_key(cube, calibration.settings(cube, **settings))
    cached = store.calibration_results(grid, key)
    result = calibration.calibrate(cube, pairs, cached=cached, **settings)
    new = result.pop("new")
    store.save_calibration(grid, key, new)
    result["grid"] = grid
    result["cache"] = {"key": key, "pairs_reused": len(result["pairs"]) - len(new),
                       "pairs_computed": len(new)}
    return result
