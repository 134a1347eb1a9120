"""The cells half of a merge: Parquet parts streamed into the store a batch at a time.

Each batch is checked (its run, model, item and config must be ones the parts account for)
and placed in the grid's dense cube by index; a cell the grid already holds, or that an
earlier part of this merge brought, is left out. So merging again, or a part that is there
twice, adds nothing, without an anti-join over millions of stored cells, and the cube that
comes out is packed with the grid (the app opens it without a cold read).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fragility_tui.errors import InputError
from fragility_tui.store import cube_cache
from fragility_tui.store.schema import forget_derived
from fragility_tui.harness.config_axes import canonical_order
from fragility_tui.harness.configs import CONFIG_IDS

BATCH_ROWS = 1 << 20
CELL_COLUMNS = ("model", "item", "config", "correct", "pred", "permutation", "raw_output",
                "scores", "tokens", "ms", "run_id", "prompt_sha", "margin", "near_tie",
                "examples")
# parts written before these existed lack them
LATER_COLUMNS = ("margin", "near_tie", "examples")


def _part_types() -> dict:
    from fragility_tui.store.parts import part_schema

    return {f.name: f.type for f in part_schema()}


class CellMerger:
    """Inside the merge's transaction, after the grid's items and models are written."""

    def __init__(self, con, grid: str, existing: tuple, run_models: dict[str, list[str]],
                 part_items: set[str], run_configs=()):
        """`existing`: the grid's cube before the merge (models, configs, bits, present),
        its items the first of the grid's items now; `run_configs`: the configs the runs
        were asked for beyond the paper set (letter likelihood, modifiers)."""
        import pyarrow as pa

        self.con, self.grid = con, grid
        self.run_ids = sorted(run_models)
        old_models, old_configs, old_bits, old_present = existing
        self.models = sorted(set(old_models).union(*run_models.values()))
        self.items = [r[0] for r in con.execute(
            "SELECT item_uid FROM items WHERE grid = ? ORDER BY position", [grid]).fetchall()]
        item_index = {uid: k for k, uid in enumerate(self.items)}
        self.part_items = pa.array(sorted(part_items), pa.string())
        self.part_item_index = np.array([item_index[u] for u in sorted(part_items)], np.int64)
        # allowed[r, m]: run r recorded model m (a worker writes only its own models)
        self.allowed = np.zeros((len(self.run_ids), len(self.models)), dtype=bool)
        for r, run_id in enumerate(self.run_ids):
            for model in run_models[run_id]:
                self.allowed[r, self.models.index(model)] = True
        # the grid's configs (imported ones too) and every config a run can write
        self.configs = canonical_order([*old_configs, *CONFIG_IDS, *run_configs])
        shape = (len(self.models), len(self.items), len(self.configs))
        self.bits = np.zeros(shape, dtype=bool)
        self.present = np.zeros(shape, dtype=bool)
        if old_models:
            m = np.array([self.models.index(x) for x in old_models])[:, None, None]
            i = np.arange(old_bits.shape[1])[None, :, None]
            c = np.array([self.configs.index(x) for x in old_configs])[None, None, :]
            self.bits[m, i, c] = old_bits
            self.present[m, i, c] = old_present
        self.added = 0

    def merge(self, files: list[Path]) -> None:
        """Insert the new cells of every part in one statement that reads the batches as
        they are checked (one streaming insert keeps DuckDB's memory bounded; many small
        ones grow it by gigabytes). A bad cell stops the stream; its error is raised here,
        and the caller's transaction writes nothing."""
        import pyarrow as pa

        from fragility_tui.store.connection import relational

        self.error: InputError | None = None
        types = _part_types()
        schema = pa.schema([(name, types[name]) for name in CELL_COLUMNS])
        stream = pa.RecordBatchReader.from_batches(schema, self._new_batches(files, schema))
        relational(self.con).register("_part_cells", stream)
        try:
            self.con.execute("""
                INSERT INTO cells (grid, model, item_uid, config_id, correct, pred, permutation,
                                   raw_output, scores, tokens, ms, run_id, prompt_sha,
                                   margin, near_tie, examples)
                SELECT $grid, model, item, config, correct, pred, permutation, raw_output,
                       scores, tokens, ms, run_id, prompt_sha, margin, near_tie, examples
                FROM _part_cells""",
                             {"grid": self.grid})
        except Exception:
            if self.error is None:
                raise
        finally:
            self.con.unregister("_part_cells")
        if self.error is not None:
            raise self.error

    def _new_batches(self, files: list[Path], schema):
        import pyarrow.parquet as pq

        for path in files:
            try:
                offset = 0
                part = pq.ParquetFile(path)
                held = set(part.schema_arrow.names)
                columns = [c for c in CELL_COLUMNS if c in held or c not in LATER_COLUMNS]
                for batch in part.iter_batches(batch_size=BATCH_ROWS, columns=columns):
                    batch = _with_later_columns(batch, schema)
                    kept = self._check_and_keep(path, offset, batch)
                    offset += batch.num_rows
                    if kept is not None:
                        yield kept.cast(schema)
            except InputError as exc:
                self.error = exc
                return
            except Exception as exc:  # pyarrow raises several types for corrupt files
                self.error = InputError(f"cannot read the cells part: {exc}", path=str(path))
                return

    def _codes(self, path: Path, offset: int, batch, column: str, values) -> np.ndarray:
        """Each row's index into `values`; a value not there is an error naming the row."""
        import pyarrow.compute as pc

        codes = pc.index_in(batch.column(column), value_set=values)
        bad = np.flatnonzero(codes.is_null().to_numpy(zero_copy_only=False))
        if len(bad):
            k = int(bad[0])
            row = batch.slice(k, 1).to_pylist()[0]
            why = {"run_id": f"run {row['run_id']!r} has no record in runs/",
                   "model": f"model {row['model']!r} is in no run record",
                   "item": f"item {row['item']!r} is in no items part",
                   "config": f"unknown config id {row['config']!r}"}[column]
            raise InputError(f"row {offset + k + 1}: {why} (model {row['model']!r}, item "
                             f"{row['item']!r}, config {row['config']!r})", path=str(path))
        return codes.to_numpy(zero_copy_only=False).astype(np.int64)

    def _check_and_keep(self, path: Path, offset: int, batch):
        """The batch's rows that are new to the grid and to this merge (None: no row)."""
        import pyarrow as pa

        run = self._codes(path, offset, batch, "run_id", pa.array(self.run_ids, pa.string()))
        model = self._codes(path, offset, batch, "model", pa.array(self.models, pa.string()))
        item = self.part_item_index[self._codes(path, offset, batch, "item", self.part_items)]
        config = self._codes(path, offset, batch, "config", pa.array(self.configs, pa.string()))
        stray = np.flatnonzero(~self.allowed[run, model])
        if len(stray):
            k = int(stray[0])
            raise InputError(f"row {offset + k + 1}: model {self.models[model[k]]!r} is not "
                             f"among run {self.run_ids[run[k]]}'s models", path=str(path))
        correct = batch.column("correct")
        if correct.null_count:
            k = int(np.flatnonzero(correct.is_null().to_numpy(zero_copy_only=False))[0])
            raise InputError(f"row {offset + k + 1}: a cell without a correct value",
                             path=str(path))
        flat = (model * len(self.items) + item) * len(self.configs) + config
        new = np.flatnonzero(~self.present.reshape(-1)[flat])
        _, first = np.unique(flat[new], return_index=True)  # a cell twice in one batch
        keep = np.sort(new[first])
        if not len(keep):
            return None
        kept = batch.take(pa.array(keep))
        self.present.reshape(-1)[flat[keep]] = True
        self.bits.reshape(-1)[flat[keep]] = kept.column("correct").to_numpy(
            zero_copy_only=False)
        self.added += len(keep)
        return kept

    def pack_cube(self) -> None:
        """Keep the merged grid's cube packed (its configs: those with a cell)."""
        if self.added:
            forget_derived(self.con, [self.grid])
        if not self.present.any():
            return
        held = self.present.any(axis=(0, 1))
        models = self.present.any(axis=(1, 2))
        configs = [c for c, h in zip(self.configs, held) if h]
        cube_cache.write(self.con, self.grid, cube_cache.grid_stamp(self.con, self.grid),
                         [m for m, h in zip(self.models, models) if h], configs,
                         self.bits[models][:, :, held], self.present[models][:, :, held])


def _with_later_columns(batch, schema):
    """A batch from a part written before margin, near_tie or examples existed, with them
    as nulls, its columns in the schema's order."""
    import pyarrow as pa

    if all(name in batch.schema.names for name in LATER_COLUMNS):
        return batch
    columns = [batch.column(name) if name in batch.schema.names else
               pa.nulls(batch.num_rows, schema.field(name).type) for name in schema.names]
    return pa.RecordBatch.from_arrays(columns, names=list(schema.names))
