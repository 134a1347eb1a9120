"""Import and export of long-format grids (one row per cell).

A long-format grid has the columns model, item, config, correct and optionally benchmark,
subject, pred, raw_output. Everything is validated before the store is touched, and the
write is one transaction: a bad file leaves the store exactly as it was.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np

from fragility_tui.errors import InputError
from fragility_tui.grid.configs import CONFIG_IDS
from fragility_tui.grid.grid_writer import GridContent, write_grid
from fragility_tui.grid.items import Item

REQUIRED = ("model", "item", "config", "correct")
OPTIONAL = ("benchmark", "subject", "pred", "raw_output")
# Written by `export` so a grid re-imports without loss; accepted on import too.
DETAIL = ("permutation", "scores", "tokens", "ms", "run_id", "prompt_sha")
_TRUE = {"true", "1", "t", "yes", "y"}
_FALSE = {"false", "0", "f", "no", "n"}


def read_long_grid(path: str | Path):
    """Read and validate a CSV or Parquet long-format grid into an Arrow table with the
    columns model, item, config, correct, benchmark, subject, pred, raw_output.

    Validation is vectorised (grids have millions of cells); an error names the data row
    (1-based, header excluded) and the column."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such file", path=str(path))
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        table = _read_parquet(path)
    elif suffix in (".csv", ".tsv"):
        table = _read_csv(path, "\t" if suffix == ".tsv" else ",")
    else:
        raise InputError(f"unsupported grid format {suffix or '(none)'}: use .csv or .parquet",
                         path=str(path))
    return _validate(path, table)


def _read_csv(path: Path, delimiter: str):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(f"invalid UTF-8 at byte {exc.start}", path=str(path), line=line) from None
    if not data.strip():
        raise InputError("empty file", path=str(path))
    header = next(csv.reader(io.StringIO(data.decode("utf-8-sig")), delimiter=delimiter))
    _check_header(path, [h.strip() for h in header])
    try:
        return pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=[h.strip() for h in header], skip_rows=1),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={h.strip(): pa.string() for h in header},
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        raise InputError(f"malformed CSV: {exc}", path=str(path)) from None


def _read_parquet(path: Path):
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(f"cannot read Parquet: {exc}", path=str(path)) from None
    _check_header(path, table.column_names)
    return table


def _check_header(path: Path, header: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"missing required column(s) {', '.join(missing)}; a grid needs "
                         f"{', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})",
                         path=str(path), line=1)
    dupes = {h for h in header if header.count(h) > 1}
    if dupes:
        raise InputError(f"duplicate column(s) {', '.join(sorted(dupes))}", path=str(path), line=1)


def _fail(path: Path, row: int, column: str, message: str):
    raise InputError(f"row {row + 1}, column {column!r}: {message}", path=str(path))


def _first_true(mask) -> int | None:
    hits = np.flatnonzero(np.asarray(mask))
    return int(hits[0]) if len(hits) else None


def _required_text(path: Path, table, name: str):
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column(name)
    if not pa.types.is_string(col.type) and not pa.types.is_large_string(col.type):
        if pa.types.is_integer(col.type) or pa.types.is_dictionary(col.type):
            col = col.cast(pa.string())
        else:
            _fail(path, 0, name, f"must be text, found {col.type}")
    bad = pc.or_kleene(pc.is_null(col), pc.equal(pc.utf8_trim_whitespace(col), ""))
    row = _first_true(bad.to_numpy(zero_copy_only=False))
    if row is not None:
        _fail(path, row, name, "empty value")
    return col


def _validate(path: Path, table):
    import pyarrow as pa
    import pyarrow.compute as pc

    n = table.num_rows
    if n == 0:
        raise InputError("the grid has a header but no rows", path=str(path))
    model = _required_text(path, table, "model")
    item = _required_text(path, table, "item")
    config = pc.utf8_trim_whitespace(_required_text(path, table, "config"))
    row = _first_true(pc.invert(pc.is_in(config, pa.array(CONFIG_IDS))).to_numpy(zero_copy_only=False))
    if row is not None:
        _fail(path, row, "config", f"unknown config id {config[row].as_py()!r} (known: "
              "o0.letter … o5.instruct, cloze_qa, cloze_bare)")
    correct = _bool_column(path, table.column("correct"))
    _check_duplicates(path, model, item, config)
    optional = {}
    for name in ("benchmark", "subject", "raw_output"):
        optional[name] = (_empty_as_null(table.column(name).cast(pa.string()))
                          if name in table.column_names else pa.nulls(n, pa.string()))
    optional["pred"] = (_pred_column(path, table.column("pred")) if "pred" in table.column_names
                        else pa.nulls(n, pa.int8()))
    detail = _detail_columns(path, table)
    return pa.table({"model": model, "item": item, "config": config, "correct": correct,
                     **optional, **detail})


def _empty_as_null(col):
    """CSV cannot tell an empty text from a missing one; both mean missing here."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)


def _detail_columns(path: Path, table) -> dict:
    """permutation, scores, tokens, ms, run_id, prompt_sha: typed, nulls where absent."""
    import pyarrow as pa

    n = table.num_rows
    types = {"permutation": pa.string(), "scores": pa.list_(pa.float64()), "tokens": pa.int32(),
             "ms": pa.float32(), "run_id": pa.string(), "prompt_sha": pa.string()}
    out = {}
    for name, typ in types.items():
        if name not in table.column_names:
            out[name] = pa.nulls(n, typ)
            continue
        col = table.column(name)
        if name == "scores" and pa.types.is_string(col.type):  # CSV: JSON lists as text
            col = pa.array([_json_list(path, k, v) for k, v in enumerate(col.to_pylist())], typ)
        elif name in ("tokens", "ms") and pa.types.is_string(col.type):
            col = pa.array([_number(path, k, name, v) for k, v in enumerate(col.to_pylist())], typ)
        if name in ("permutation", "run_id", "prompt_sha"):
            col = _empty_as_null(col.cast(pa.string()))
        try:
            out[name] = col.cast(typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            _fail(path, 0, name, f"cannot be read as {typ}: {exc}")
    return out


def _json_list(path: Path, row: int, value):
    if value is None or not value.strip():
        return None
    try:
        parsed = json.loads(value)
        if isinstance(parsed, list) and all(isinstance(x, (int, float)) for x in parsed):
            return [float(x) for x in parsed]
    except json.JSONDecodeError:
        pass
    _fail(path, row, "scores", f"must be a JSON list of numbers, got {value[:40]!r}")


def _number(path: Path, row: int, name: str, value):
    if value is None or not value.strip():
        return None
    try:
        return float(value) if name == "ms" else int(value)
    except ValueError:
        _fail(path, row, name, f"must be a number, got {value!r}")


def _bool_column(path: Path, col):
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_boolean(col.type):
        row = _first_true(pc.is_null(col).to_numpy(zero_copy_only=False))
        if row is not None:
            _fail(path, row, "correct", "missing value; correct must be true or false")
        return col
    values = pc.utf8_lower(pc.utf8_trim_whitespace(col.cast(pa.string())))
    is_true = pc.is_in(values, pa.array(sorted(_TRUE)))
    is_false = pc.is_in(values, pa.array(sorted(_FALSE)))
    bad = pc.invert(pc.or_(is_true, is_false)).to_numpy(zero_copy_only=False)
    row = _first_true(bad)
    if row is not None:
        _fail(path, row, "correct", f"must be a boolean (true/false/1/0), got {col[row].as_py()!r}")
    return is_true


def _pred_column(path: Path, col):
    import pyarrow as pa

    values = col.to_pylist()
    out = []
    for row, value in enumerate(values):
        if value is None or (isinstance(value, str) and not value.strip()):
            out.append(None)
            continue
        try:
            pred = int(value) if isinstance(value, int) else int(str(value).strip())
        except ValueError:
            _fail(path, row, "pred", f"must be an integer option index (-1 = unparsed), got {value!r}")
        if not -1 <= pred <= 3:
            _fail(path, row, "pred", f"must be -1..3, got {pred}")
        out.append(pred)
    return pa.array(out, pa.int8())


def _check_duplicates(path: Path, model, item, config) -> None:
    import pyarrow.compute as pc

    codes = [pc.dictionary_encode(c).combine_chunks().indices.to_numpy().astype(np.int64)
             for c in (model, item, config)]
    key = (codes[0] * (codes[1].max() + 1) + codes[1]) * (codes[2].max() + 1) + codes[2]
    order = np.argsort(key, kind="stable")
    same = np.flatnonzero(key[order][1:] == key[order][:-1])
    if len(same):
        dup_rows = np.sort(np.stack([order[same], order[same + 1]], axis=1), axis=1)
        first, second = dup_rows[np.argmin(dup_rows[:, 1])]
        _fail(path, int(second), "item",
              f"duplicate cell (model {model[int(second)].as_py()!r}, item "
              f"{item[int(second)].as_py()!r}, config {config[int(second)].as_py()}); "
              f"first seen at row {int(first) + 1}")


def items_for_grid(grid, attached: list[Item] | None, path: str) -> list[Item]:
    """One Item per distinct grid item, in first-appearance order.

    With attached items (from --items), each grid item must match one by item_uid or by the
    source id (the part after "benchmark/"); the benchmark comes from the attached item."""
    first = _first_rows(grid.column("item"))
    order = grid.column("item").take(first).to_pylist()
    meta = dict(zip(order, zip(grid.column("benchmark").take(first).to_pylist(),
                               grid.column("subject").take(first).to_pylist())))
    if attached is None:
        return [Item(uid, meta[uid][0] or _benchmark_from_uid(uid), meta[uid][1], "", (), -1)
                for uid in order]
    by_uid = {it.item_uid: it for it in attached}
    by_source: dict[str, list[Item]] = {}
    for it in attached:
        by_source.setdefault(it.source_id, []).append(it)
    result = []
    for uid in order:
        found = by_uid.get(uid)
        if found is None:
            candidates = by_source.get(uid, [])
            if len(candidates) > 1:
                raise InputError(f"item {uid!r} matches {len(candidates)} items of the --items "
                                 "file (ambiguous source id; use benchmark/id in the grid)",
                                 path=path, field="item")
            found = candidates[0] if candidates else None
        if found is None:
            raise InputError(f"item {uid!r} of the grid is not in the --items file",
                             path=path, field="item")
        result.append(Item(uid, found.benchmark, found.subject, found.question, found.choices,
                           found.gold))
    return result


def _first_rows(column) -> np.ndarray:
    """Row index of each distinct value's first appearance, in appearance order."""
    import pyarrow.compute as pc

    codes = pc.dictionary_encode(column).combine_chunks().indices.to_numpy()
    _, first = np.unique(codes, return_index=True)
    return np.sort(first)


def _benchmark_from_uid(uid: str) -> str:
    return uid.split("/", 1)[0] if "/" in uid else "unknown"


def import_long_grid(store, path: str | Path, grid_name: str, *, items: list[Item] | None = None,
                     items_path: str | None = None, synthetic: bool = False,
                     description: str = "", replace: bool = False,
                     meta: dict | None = None) -> dict:
    """Validate then write a long-format grid as one transaction. Returns a summary."""
    import pyarrow as pa

    from fragility_tui.grid.store_schema import cell_schema

    grid = read_long_grid(path)
    grid_items = items_for_grid(grid, items, items_path or str(path))
    n = grid.num_rows
    table = pa.table({
        "grid": pa.array([grid_name] * n, pa.string()), "model": grid.column("model"),
        "item_uid": grid.column("item"), "config_id": grid.column("config"),
        "correct": grid.column("correct"), "pred": grid.column("pred"),
        "permutation": grid.column("permutation"), "raw_output": grid.column("raw_output"),
        "scores": grid.column("scores"), "tokens": grid.column("tokens"),
        "ms": grid.column("ms"), "run_id": grid.column("run_id"),
    }, schema=cell_schema()).append_column("prompt_sha", grid.column("prompt_sha"))
    models = grid.column("model").take(_first_rows(grid.column("model"))).to_pylist()
    written = write_grid(store, GridContent(
        grid_name, grid_items,
        {m: (f"import:{Path(path).name}", {"imported_from": str(path)}) for m in models},
        table, synthetic=synthetic, description=description or f"imported from {Path(path).name}",
        meta={"source": str(path), "items_source": items_path, **(meta or {})}),
        mode="replace" if replace else "new")
    return {"grid": grid_name, "cells": written, "models": len(models),
            "items": len(grid_items),
            "configs": len(grid.column("config").unique())}


def write_synthetic_grid(store, synthetic, grid_name: str, *, replace: bool = False) -> dict:
    """Write a simulate() result as a grid labelled synthetic, in one transaction: each
    cell with the option it chose (pred, native index; its permutation is the grid seed's
    shuffle, which `render` reproduces), the grid's metadata with the generator's true
    parameters (`SyntheticGrid.meta`)."""
    import pyarrow as pa

    from fragility_tui.grid.store_schema import cell_schema

    cube = synthetic.cube
    m, i, c = np.nonzero(cube.present)
    n = len(m)
    pred = (pa.nulls(n, pa.int8()) if synthetic.pred is None
            else pa.array(synthetic.pred[m, i, c], pa.int8()))
    table = pa.table({
        "grid": pa.array([grid_name] * n, pa.string()),
        "model": pa.DictionaryArray.from_arrays(m.astype(np.int32), list(cube.models)).cast(pa.string()),
        "item_uid": pa.DictionaryArray.from_arrays(i.astype(np.int32), list(cube.items)).cast(pa.string()),
        "config_id": pa.DictionaryArray.from_arrays(c.astype(np.int32), list(cube.configs)).cast(pa.string()),
        "correct": cube.bits[m, i, c],
        "pred": pred, "permutation": pa.nulls(n, pa.string()),
        "raw_output": pa.nulls(n, pa.string()), "scores": pa.nulls(n, pa.list_(pa.float64())),
        "tokens": pa.nulls(n, pa.int32()), "ms": pa.nulls(n, pa.float32()),
        "run_id": pa.nulls(n, pa.string()),
    }, schema=cell_schema())
    written = write_grid(store, GridContent(
        grid_name, synthetic.items,
        {model: ("synthetic", {"synthetic": True}) for model in cube.models}, table,
        synthetic=True, description=synthetic.description, meta=synthetic.meta()),
        mode="replace" if replace else "new")
    return {"grid": grid_name, "cells": written, "models": len(cube.models),
            "items": len(cube.items), "configs": len(cube.configs)}


def export_cells(store, grid_name: str, out: str | Path, fmt: str) -> int:
    """Write one row per cell (model, item, benchmark, config, correct, pred, raw_output)."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    store.grid_info(grid_name)  # clear error for an unknown grid
    table = store.export_cells(grid_name)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    if fmt == "csv":
        pacsv.write_csv(_scores_as_json(table), tmp)
    elif fmt == "parquet":
        pq.write_table(table, tmp, compression="zstd")
    else:
        raise InputError(f"unknown export format {fmt!r} (csv, parquet)", field="--format")
    tmp.replace(out)
    return table.num_rows


def _scores_as_json(table):
    """CSV has no list type: write the option log-likelihoods as JSON text."""
    import pyarrow as pa

    k = table.column_names.index("scores")
    text = [None if v is None else json.dumps(v) for v in table.column("scores").to_pylist()]
    return table.set_column(k, "scores", pa.array(text, pa.string()))


def import_provenance(store, grid: str, doc: dict) -> None:
    """Models and runs of an `export --what provenance --format json` document, so a shipped
    real grid keeps its harness disclosure (SPEC §10)."""
    from fragility_tui.grid.store_schema import RUN_FIELDS

    for m in doc.get("models", []):
        store.upsert_model(grid, m["model"], source=m.get("source"), revision=m.get("revision"),
                           dtype=m.get("dtype"), quantization=m.get("quantization"),
                           base_model=m.get("base_model"), provenance=m.get("provenance") or {},
                           fingerprint=m.get("fingerprint"))
    known = {r["run_id"] for r in store.list_runs(grid)}
    for run in doc.get("runs", []):
        if run["run_id"] in known:
            continue
        fields = {k: run.get(k) for k in RUN_FIELDS}
        store.create_run({**fields, "run_id": run["run_id"], "grid": grid, "pid": None})
