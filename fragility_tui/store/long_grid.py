"""A long-format grid file (one row per cell) read and validated by DuckDB, in SQL.

A grid has millions of cells (100 models × 20,000 items × 26 configs = 52 M), so no Python
object is made per cell: DuckDB reads a Parquet file itself, streaming, and the same SQL
validates it and later inserts it into the store. A CSV file is read by pyarrow (it checks
the encoding and the quoting) and handed to DuckDB as an Arrow table.

Columns: model, item, config, correct; optionally benchmark, subject, pred, raw_output; and
what `export` writes so a grid re-imports without loss (permutation, scores, tokens, ms,
run_id, prompt_sha, prompt, margin, near_tie, examples, and an imported config's axes as
`axis_<name>`). A config is any id (SPEC v5 §2b); `axis_<name>` columns state its axes,
one level per config throughout the file. Every error names the data row (1-based, header
excluded) and column.
"""

from __future__ import annotations

import csv
import io
import re
import tempfile
from contextlib import contextmanager
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.harness.config_axes import (axis_levels_problem, canonical_order,
                                               config_id_problem)

REQUIRED = ("model", "item", "config", "correct")
OPTIONAL = ("benchmark", "subject", "pred", "raw_output")
DETAIL = ("permutation", "scores", "tokens", "ms", "run_id", "prompt_sha", "prompt", "margin",
          "near_tie", "examples")
TRUE = ("true", "1", "t", "yes", "y")
FALSE = ("false", "0", "f", "no", "n")
MEMORY_LIMIT = "1GB"  # DuckDB spills to disk beyond this: a 52 M-cell file stays in ~2 GB
SCATTER_ROWS = 1 << 20  # cells per batch scattered into the dense cube


def _sql_list(values) -> str:
    return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


def _text(name: str) -> str:
    return f"CAST({name} AS VARCHAR)"


class LongGrid:
    """A validated long-format grid file: `relation()` is SQL for its normalised cells."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError("no such file", path=str(self.path))
        suffix = self.path.suffix.lower()
        if suffix == ".parquet":
            self.arrow = None
            self.columns, self.types = _parquet_columns(self.path)
        elif suffix in (".csv", ".tsv"):
            self.arrow = _read_csv(self.path, "\t" if suffix == ".tsv" else ",")
            self.columns = self.arrow.column_names[:-1]  # the last is the row number
            self.types = {c: "string" for c in self.columns}
        else:
            raise InputError(f"unsupported grid format {suffix or '(none)'}: use .csv or "
                             ".parquet", path=str(self.path))
        _check_header(self.path, self.columns)

    # -- SQL ---------------------------------------------------------------------------------

    def attach(self, con) -> None:
        """Make the file readable as `_long_grid` in this connection."""
        from fragility_tui.store.connection import relational

        if self.arrow is not None:
            relational(con).register("_long_grid_file", self.arrow)
            source = "_long_grid_file"
        else:
            path = str(self.path).replace("'", "''")
            source = f"read_parquet('{path}', file_row_number = true)"
        con.execute(f"CREATE OR REPLACE TEMP VIEW _long_grid AS SELECT * FROM {source}")

    def _raw(self, name: str) -> str:
        return name if name in self.columns else "NULL"

    def normalised(self, with_raw: bool = False) -> str:
        """SELECT of one row per cell: typed columns, empty text as NULL, `row` 0-based
        (`with_raw`: also each checked column as the file has it, as text, for messages)."""
        col = {n: self._raw(n) for n in (*REQUIRED, *OPTIONAL, *DETAIL)}
        raw = "".join(f"{_text(col[n])} AS raw_{n}, "
                      for n in ("correct", "pred", "scores", "tokens", "ms")) if with_raw else ""
        return f"""SELECT file_row_number AS row, {raw}{_text(col['model'])} AS model,
            {_text(col['item'])} AS item, trim({_text(col['config'])}) AS config,
            {self._correct()} AS correct, {self._optional_text('benchmark')} AS benchmark,
            {self._optional_text('subject')} AS subject,
            TRY_CAST(NULLIF(trim({_text(col['pred'])}), '') AS INTEGER) AS pred,
            {self._raw_output()} AS raw_output,
            {self._optional_text('permutation')} AS permutation, {self._scores()} AS scores,
            TRY_CAST(NULLIF(trim({_text(col['tokens'])}), '') AS INTEGER) AS tokens,
            TRY_CAST(NULLIF(trim({_text(col['ms'])}), '') AS REAL) AS ms,
            {self._optional_text('run_id')} AS run_id,
            {self._optional_text('prompt_sha')} AS prompt_sha,
            {self._optional_text('prompt')} AS prompt,
            TRY_CAST(NULLIF(trim({_text(col['margin'])}), '') AS DOUBLE) AS margin,
            TRY_CAST(NULLIF(trim({_text(col['near_tie'])}), '') AS BOOLEAN) AS near_tie,
            {self._examples()} AS examples
            FROM _long_grid"""

    def _raw_output(self) -> str:
        """The model's answer; an empty one ("": it generated nothing) stays empty where the
        file can say so (Parquet: null and "" differ; in CSV both are an empty field)."""
        if self.arrow is None and "raw_output" in self.columns:
            return _text("raw_output")
        return self._optional_text("raw_output")

    def _examples(self) -> str:
        """A +kN cell's solved examples: a list in Parquet, JSON text in CSV (as exported)."""
        if "examples" not in self.columns:
            return "CAST(NULL AS VARCHAR[])"
        if self.types["examples"] == "string":
            return "TRY_CAST(from_json(NULLIF(trim(examples), ''), '[\"VARCHAR\"]') AS VARCHAR[])"
        return "TRY_CAST(examples AS VARCHAR[])"

    def _optional_text(self, name: str) -> str:
        return f"NULLIF({_text(self._raw(name))}, '')"

    def _correct(self) -> str:
        if self.types.get("correct") == "bool":
            return "correct"
        value = f"lower(trim({_text('correct')}))"
        return (f"CASE WHEN {value} IN {tuple(TRUE)} THEN true "
                f"WHEN {value} IN {tuple(FALSE)} THEN false END")

    def _scores(self) -> str:
        if "scores" not in self.columns:
            return "CAST(NULL AS DOUBLE[])"
        if self.types["scores"] == "string":  # CSV: the log-likelihoods as JSON text
            return "TRY_CAST(NULLIF(trim(scores), '') AS DOUBLE[])"
        return "TRY_CAST(scores AS DOUBLE[])"

    # -- validation --------------------------------------------------------------------------

    def validate(self) -> dict:
        """Check every row, and build the grid's dense cube on the way (a duplicate cell is
        found as a cube cell written twice). Returns the shape: models and items in order
        of first appearance (items with their first benchmark and subject), the number of
        configs and cells, and `cube` = (models by name, configs, bits, present)."""
        from fragility_tui.store.connection import duckdb

        con = duckdb.connect()
        try:
            with _spill_dir() as tmp:
                con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
                con.execute(f"SET temp_directory = '{tmp}'")
                self.attach(con)
                con.execute(f"CREATE TEMP VIEW _cells AS {self.normalised(with_raw=True)}")
                n = con.execute("SELECT count(*) FROM _long_grid").fetchall()[0][0]
                if n == 0:
                    raise InputError("the grid has a header but no rows", path=str(self.path))
                self._check_types()
                keys = self._distinct_keys(con)
                self._check_values(con, keys)
                axes = self._config_axes(con)
                cube = self._cube(con, keys, n)
                return {"models": [m for m, _ in keys["model"]], "items": keys["items"],
                        "configs": len(cube[1]), "cells": n, "cube": cube,
                        "config_axes": axes}
        finally:
            con.close()

    def _check_types(self) -> None:
        for name in ("model", "item", "config"):
            if self.types[name] not in ("string", "integer", "dictionary"):
                self._fail(0, name, f"must be text, found {self.types[name]}")

    @staticmethod
    def _distinct_keys(con) -> dict:
        """Each distinct model, item and config with its first row, in one scan (items also
        with the benchmark and subject of their first row)."""
        rows = con.execute("""
            SELECT model, item, config, min(row), arg_min(benchmark, row),
                   arg_min(subject, row), GROUPING(model), GROUPING(item)
            FROM _cells GROUP BY GROUPING SETS ((model), (item), (config))""").fetchall()
        keys = {"model": [], "item": [], "config": []}
        items = []
        for model, item, config, first, benchmark, subject, no_model, no_item in rows:
            if not no_model:
                keys["model"].append((model, first))
            elif not no_item:
                keys["item"].append((item, first))
                items.append((first, item, benchmark, subject))
            else:
                keys["config"].append((config, first))
        for name in keys:
            keys[name].sort(key=lambda pair: pair[1])
        keys["items"] = [(uid, b, s) for _, uid, b, s in sorted(items, key=lambda r: r[0])]
        return keys

    @property
    def axis_columns(self) -> list[str]:
        return [c for c in self.columns if c.startswith("axis_")]

    def _config_axes(self, con) -> dict[str, dict[str, str]]:
        """{config: {axis: level}} from the axis_<name> columns: one level per config (an
        empty cell: the config does not state that axis)."""
        names = self.axis_columns
        if not names:
            return {}
        cols = ", ".join(f"NULLIF(trim({_text(c)}), '') AS {c}" for c in names)
        con.execute(f"CREATE TEMP VIEW _axes AS SELECT file_row_number AS row, "
                    f"trim({_text('config')}) AS config, {cols} FROM _long_grid")
        levels = ", ".join(names)
        rows = con.execute(f"SELECT config, {levels}, min(row) FROM _axes "
                           f"GROUP BY ALL ORDER BY min(row)").fetchall()
        axes: dict[str, dict[str, str]] = {}
        for config, *values, first in rows:
            stated = {c[len("axis_"):]: v for c, v in zip(names, values) if v is not None}
            if config in axes and axes[config] != stated:
                column = next(c for c, v in zip(names, values)
                              if axes[config].get(c[len("axis_"):]) != v)
                self._fail(first, column, f"config {config!r} has another level of "
                                          f"{column} than on its first row")
            problem = axis_levels_problem(config, stated)
            if problem:
                self._fail(first, "config", problem)
            axes[config] = stated
        return {c: a for c, a in axes.items() if a}

    def _checks(self) -> list[tuple[str, str]]:
        """(column, SQL condition of a bad row) for the columns checked row by row."""
        checks = [("correct", "c.correct IS NULL")]
        if "pred" in self.columns:
            checks.append(("pred", "c.pred IS NULL AND NULLIF(trim(c.raw_pred), '') IS NOT NULL"))
            checks.append(("pred", "c.pred NOT BETWEEN -1 AND 3"))
        if "scores" in self.columns:
            checks.append(("scores", "(c.scores IS NULL AND NULLIF(trim(c.raw_scores), '') IS "
                                     "NOT NULL) OR list_count(c.scores) < len(c.scores)"))
        for name in ("tokens", "ms"):
            if name in self.columns:
                checks.append((name, f"c.{name} IS NULL AND NULLIF(trim(c.raw_{name}), '') "
                                     "IS NOT NULL"))
        return checks

    def _check_values(self, con, keys: dict) -> None:
        """The earliest bad row wins: model, item and config values are checked once each
        (their first row stands for all), the other columns in one pass over the rows."""
        found = [(first, name) for name in ("model", "item", "config")
                 for value, first in keys[name] if value is None or not str(value).strip()]
        found += [(first, "config") for value, first in keys["config"]
                  if value and value.strip() and config_id_problem(value)]
        checks = self._checks()
        firsts = con.execute("SELECT " + ", ".join(
            f"min(c.row) FILTER (WHERE {cond})" for _, cond in checks) +
            " FROM _cells c").fetchall()[0]
        found += [(row, checks[k][0]) for k, row in enumerate(firsts) if row is not None]
        if not found:
            return
        row, column = min(found)
        cur = con.execute("SELECT * FROM _cells WHERE row = ?", [row])
        values = dict(zip([d[0] for d in cur.description], cur.fetchall()[0]))
        self._fail(row, column, _bad_value_message(column, values))

    def _cube(self, con, keys: dict, n: int) -> tuple:
        """(models by name, configs in canonical order, bits, present): the cells scattered
        into dense arrays, a batch at a time. Fewer distinct cells than rows means a cell is
        there twice."""
        import numpy as np
        import pyarrow as pa

        from fragility_tui.store.connection import relational

        models = sorted(m for m, _ in keys["model"])
        items = [uid for uid, _, _ in keys["items"]]
        configs = canonical_order(c for c, _ in keys["config"])
        for name, values in (("_m", models), ("_i", items), ("_f", configs)):
            relational(con).register(name, pa.table({"key": values, "k": range(len(values))}))
        shape = (len(models), len(items), len(configs))
        bits = np.zeros(shape, dtype=bool)
        present = np.zeros(shape, dtype=bool)
        flat_bits, flat_present = bits.reshape(-1), present.reshape(-1)
        cells = relational(con).sql(f"""
            SELECT (CAST(m.k AS BIGINT) * {shape[1]} + i.k) * {shape[2]} + f.k AS cell,
                   c.correct
            FROM _cells c JOIN _m m ON m.key = c.model JOIN _i i ON i.key = c.item
            JOIN _f f ON f.key = c.config""")
        with cells.to_arrow_reader(batch_size=SCATTER_ROWS) as reader:
            for batch in reader:
                cell = batch.column(0).to_numpy()
                flat_present[cell] = True
                flat_bits[cell[batch.column(1).to_numpy(zero_copy_only=False)]] = True
        if int(np.count_nonzero(flat_present)) != n:
            self._check_duplicates(con)
        return models, configs, bits, present

    def _check_duplicates(self, con) -> None:
        dup = con.execute("SELECT 1 FROM _cells GROUP BY model, item, config "
                          "HAVING count(*) > 1 LIMIT 1").fetchall()
        if not dup:
            return
        # The duplicate pair whose second row comes first (what a reader meets first).
        second, first, model, item, config = con.execute("""
            WITH d AS (SELECT model, item, config FROM _cells GROUP BY ALL HAVING count(*) > 1),
                 r AS (SELECT c.row, c.model, c.item, c.config,
                              row_number() OVER w AS k, min(c.row) OVER w AS first
                       FROM _cells c SEMI JOIN d USING (model, item, config)
                       WINDOW w AS (PARTITION BY c.model, c.item, c.config ORDER BY c.row))
            SELECT row, first, model, item, config FROM r WHERE k = 2 ORDER BY row LIMIT 1
            """).fetchall()[0]
        self._fail(second, "item", f"duplicate cell (model {model!r}, item {item!r}, config "
                                   f"{config}); first seen at row {first + 1}")

    def _fail(self, row: int, column: str, message: str):
        raise InputError(f"row {row + 1}, column {column!r}: {message}", path=str(self.path))

    # -- writing -----------------------------------------------------------------------------

    def insert_into(self, con, grid: str) -> int:
        """Insert the (validated) cells into the store's cells table as grid `grid`, inside
        the caller's transaction (a new or emptied grid: no cell of it exists yet)."""
        self.attach(con)
        before = con.execute("SELECT count(*) FROM cells").fetchall()[0][0]
        con.execute(f"""INSERT INTO cells (grid, model, item_uid, config_id, correct, pred,
                            permutation, raw_output, scores, tokens, ms, run_id, prompt_sha,
                            prompt, margin, near_tie, examples)
                        SELECT $grid, model, item, config, correct, CAST(pred AS TINYINT),
                               permutation, raw_output, scores, tokens, ms, run_id,
                               prompt_sha, prompt, margin, near_tie, examples
                        FROM ({self.normalised()})""", {"grid": grid})
        con.execute("DROP VIEW _long_grid")
        if self.arrow is not None:
            con.unregister("_long_grid_file")
        return con.execute("SELECT count(*) FROM cells").fetchall()[0][0] - before


def _bad_value_message(column: str, cell: dict) -> str:
    """Why a row's `column` was refused (`cell`: the row as _cells has it)."""
    if column in ("model", "item", "config") and not str(cell[column] or "").strip():
        return "empty value"
    if column == "config":
        return config_id_problem(cell["config"]) or "bad config id"
    if column == "correct":
        if cell["raw_correct"] is None:
            return "missing value; correct must be true or false"
        return f"must be a boolean (true/false/1/0), got {cell['raw_correct']!r}"
    raw = (cell[f"raw_{column}"] or "").strip()
    if column == "pred":
        if cell["pred"] is None:
            return f"must be an integer option index (-1 = unparsed), got {raw!r}"
        return f"must be -1..3, got {cell['pred']}"
    if column == "scores":
        return f"must be a JSON list of numbers, got {raw[:40]!r}"
    return f"must be a number, got {raw!r}"


@contextmanager
def _spill_dir():
    with tempfile.TemporaryDirectory(prefix="fragility-import-") as tmp:
        yield tmp


def _parquet_columns(path: Path) -> tuple[list[str], dict[str, str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
        pq.ParquetFile(path).metadata  # noqa: B018 - a truncated file fails here
    except Exception as exc:  # pyarrow raises several types for corrupt files
        raise InputError(f"cannot read Parquet: {exc}", path=str(path)) from None

    def kind(t) -> str:
        if pa.types.is_boolean(t):
            return "bool"
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return "string"
        if pa.types.is_integer(t):
            return "integer"
        if pa.types.is_dictionary(t):
            return "dictionary"
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return "list"
        return str(t)

    return list(schema.names), {f.name: kind(f.type) for f in schema}


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
    header = [h.strip() for h in next(csv.reader(io.StringIO(data.decode("utf-8-sig")),
                                                 delimiter=delimiter))]
    _check_header(path, header)
    try:
        table = pacsv.read_csv(
            io.BytesIO(data),
            read_options=pacsv.ReadOptions(column_names=header, skip_rows=1),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
            convert_options=pacsv.ConvertOptions(
                column_types={h: pa.string() for h in header},
                strings_can_be_null=False, quoted_strings_can_be_null=False))
    except pa.ArrowInvalid as exc:
        raise InputError(f"malformed CSV: {exc}", path=str(path)) from None
    return table.append_column("file_row_number", pa.array(range(table.num_rows), pa.int64()))


def _check_header(path: Path, header: list[str]) -> None:
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise InputError(f"missing required column(s) {', '.join(missing)}; a grid needs "
                         f"{', '.join(REQUIRED)} (optional: {', '.join(OPTIONAL)})",
                         path=str(path), line=1)
    dupes = {h for h in header if header.count(h) > 1}
    if dupes:
        raise InputError(f"duplicate column(s) {', '.join(sorted(dupes))}", path=str(path), line=1)
    bad = [h for h in header if h.startswith("axis_")
           and not re.fullmatch(r"axis_[a-z][a-z0-9_]{0,39}", h)]
    if bad:
        raise InputError(f"column {bad[0]!r}: an axis column is axis_ plus a lower-case name "
                         "(letters, digits, _)", path=str(path), line=1)
