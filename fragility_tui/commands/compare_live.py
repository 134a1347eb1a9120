"""`fragility-tui compare A B --items SRC --grid NAME`: the sequential comparison of issue 45
driving the live runner.

The pool is the item set a `run --items SRC --grid NAME` would sample (same --per-benchmark
and grid seed, so the grid is the same grid); its items are taken in the seeded order
(analysis/sequential.py, stratified by benchmark for the balanced target) chunk by chunk.
For each chunk, each model whose cells are missing is evaluated on the chunk's items by the
ordinary run loop (runners/run/loop.py's Run, with `item_uids` naming the chunk): a run row
per (model, chunk) with its provenance, cells written batch by batch into the grid, the
app's live panes following it as any run. Then the decision is updated from the grid's
cells, never from the runner's memory: the path is a function of the stored cells, the
seed, the chunk and the settings, so a comparison killed mid-chunk and run again judges the
chunks already stored, resumes the chunk in flight (its died run row, by run id) and
follows the same path. Cells already in the grid (a full run of the pair, an earlier
comparison) are judged without evaluating anything.

Budgets: --max-items (the path's, reproducible); --max-seconds and --max-tokens count what
the comparison's runs recorded (their run rows' seconds and tokens, a killed run's up to its
last batch), checked before each chunk is evaluated: they depend on the machine.
"""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fragility_tui.errors import InputError

# run's options that `compare --items` shares (run_options.toml), passed to every chunk's run
RUN_FLAGS = ("--per-benchmark", "--configs", "--prompt-mode", "--max-new-tokens",
             "--trust-remote-code", "--dtype", "--device", "--batch-size", "--batch-tokens",
             "--threads", "--display")
QUANTIZED = ("int4", "int8")


@dataclass
class Side:
    """One model of the pair: the spec typed (A or B), its run spec text and quantisation,
    and the grid's name for it (NAME or NAME+int4)."""

    label: str  # "A" or "B"
    text: str
    spec: str
    quantize: str | None
    name: str = ""


def split_quantized(text: str) -> tuple[str, str | None]:
    """`NAME+int4` (the grid's name of a quantised build) -> (NAME, int4); a spec naming an
    existing file or folder is taken as it is."""
    for scheme in QUANTIZED:
        if text.endswith("+" + scheme) and not Path(text).exists():
            return text[:-len(scheme) - 1], scheme
    return text, None


def check_budgets(args) -> None:
    if args.max_seconds is not None and not args.max_seconds > 0:
        raise InputError(f"must be a number of seconds above 0, got {args.max_seconds:g}",
                         field="--max-seconds")
    if args.max_tokens is not None and args.max_tokens < 1:
        raise InputError(f"must be at least 1, got {args.max_tokens}", field="--max-tokens")


class LiveComparison:
    """The loop: judge what the grid holds, evaluate the next chunk, judge again."""

    def __init__(self, args, store, *, evaluate=None, out=None):
        self.args, self.store = args, store
        self.out = out or sys.stdout
        self.evaluate = evaluate or self._evaluate_with_runner
        self.started = time.monotonic()
        self.runs: list[str] = []  # run ids this invocation started or resumed
        self.held = None  # the models its chunks' runs keep loaded (runners/run/held_models)

    # -- setting up ------------------------------------------------------------------------

    def prepare(self) -> None:
        """Everything checked before any run row or cell: the pool, the grid, both models
        (prepared, not loaded), the configs and the reference."""
        from runners.run.admission import check_grid, load_run_items
        from fragility_tui.harness.configs import default_reference

        args = self.args
        self.sides = [Side("A", args.a, *split_quantized(args.a)),
                      Side("B", args.b, *split_quantized(args.b))]
        base = self._spec(self.sides[0])
        if args.reference and args.reference not in base.configs:  # before any model's files
            raise InputError(self._not_evaluated(args.reference, base.configs),
                             field="--reference")
        try:
            inputs = load_run_items(base)
        except InputError as exc:
            raise InputError(_bare(exc), field="--items") from None
        if not inputs.items:
            raise InputError(f"no items in {', '.join(args.items)}: the pool is empty",
                             field="--items")
        self.pool = inputs.items
        self.set_hash = inputs.set_hash
        with compare_wording():
            note = check_grid(self.store, base, self.set_hash)
        if note:
            print(f"note: {note}", file=sys.stderr, flush=True)
        refused: set[str] = set()
        for side in self.sides:
            prepared = self._prepare(side)
            side.name = prepared.name
            refused |= set(prepared.refused)
        if self.sides[0].name == self.sides[1].name:
            raise InputError(f"A and B would both be recorded as {self.sides[0].name!r}",
                             field="A B")
        self.configs = [c for c in base.configs if c not in refused]
        self.reference = args.reference or default_reference(self.configs)
        if self.reference not in self.configs:
            raise InputError(self._not_evaluated(self.reference, self.configs),
                             field="--reference")

    @staticmethod
    def _not_evaluated(reference: str, configs) -> str:
        return (f"the reference {reference} is not among the configs evaluated "
                f"({', '.join(configs)})")

    def _spec(self, side: Side, **extra):
        from runners.run.admission import item_path
        from runners.run.loop import RunSpec
        from fragility_tui.commands.run import _positive_or_auto
        from fragility_tui.devices import normalise_device
        from fragility_tui.harness.configs import parse_config_list

        from fragility_tui.commands.flag_checks import check_listed

        args = self.args
        check_listed(args.configs, "--configs")
        try:
            configs = parse_config_list(args.configs)
        except ValueError as exc:
            raise InputError(str(exc), field="--configs") from None
        try:
            device = normalise_device(args.device)
        except ValueError as exc:
            raise InputError(str(exc), field="--device") from None
        return RunSpec(models=[side.spec], items=[item_path(p) for p in args.items],
                       grid=args.grid, per_benchmark=args.per_benchmark or None,
                       seed=self.grid_seed, configs=configs, quantize=side.quantize,
                       dtype=args.dtype, device=device,
                       batch_size=_positive_or_auto(args.batch_size, "--batch-size"),
                       batch_tokens=_positive_or_auto(args.batch_tokens, "--batch-tokens"),
                       max_new_tokens=args.max_new_tokens,
                       trust_remote_code=args.trust_remote_code, threads=args.threads,
                       prompt_mode=args.prompt_mode, **extra)

    @property
    def grid_seed(self) -> int:
        if self.args.grid_seed is not None:
            return self.args.grid_seed
        if self.store.has_grid(self.args.grid):  # the grid's own seed
            seed = self.store.grid_meta(self.args.grid).get("seed")
            return 0 if seed is None else int(seed)
        return 0

    def _prepare(self, side: Side):
        from runners.run.loop import prepare_models

        try:
            with compare_wording():
                return prepare_models(self._spec(side), self.store)[0]
        except InputError as exc:
            raise InputError(f"{side.text}: {_bare(exc)}", field=side.label) from None

    # -- the loop --------------------------------------------------------------------------

    def execute(self):
        import numpy as np

        from fragility_tui.analysis.sequential import SequentialRun

        args = self.args
        uids = [it.item_uid for it in self.pool]
        benchmarks = [it.benchmark for it in self.pool]
        d = np.zeros((len(uids), len(self.configs)), dtype=np.int8)
        self.seq = SequentialRun(d, benchmarks, uids, self.configs, self.reference,
                                 seed=args.seed, chunk=args.chunk, margin=args.margin / 100,
                                 target=args.target, max_items=args.max_items,
                                 scope=args.scope)
        self._header()
        self._record_start()
        try:
            return self._loop(uids)
        finally:
            if self.held is not None:
                self.held.release()

    def _loop(self, uids):
        args = self.args
        while True:
            avail = self._read_cells(uids)
            for step in self.seq.advance(avail):
                self._progress(step)
            if self.seq.done:
                break
            nxt = self.seq.next_chunk()
            spent = self.spent()
            if args.max_seconds is not None and spent["seconds"] >= args.max_seconds:
                self.seq.stop("budget", "max-seconds")
                break
            if args.max_tokens is not None and spent["tokens"] >= args.max_tokens:
                self.seq.stop("budget", "max-tokens")
                break
            chunk_uids = [uids[i] for i in nxt.tolist()]
            index = len(self.seq.result.path)
            for side in self.sides:
                if not self._has_cells(side.name, chunk_uids):
                    self.evaluate(side, chunk_uids, index)
            if not self._read_cells(uids)[nxt].all():  # a run that wrote less than asked
                self.seq.stop("awaiting-cells")
                break
        return self.seq.result

    def _read_cells(self, uids):
        """Availability of every pool item (both models' cells in every config in view),
        and the d rows of those available, from the grid as stored."""
        import numpy as np

        avail = np.zeros(len(uids), dtype=bool)
        if not self.store.has_grid(self.args.grid):
            return avail
        cube = self.store.load_cube(self.args.grid)
        names = [s.name for s in self.sides]
        if any(n not in cube.models for n in names) or \
                any(c not in cube.configs for c in self.configs):
            return avail
        m = [cube.models.index(n) for n in names]
        cols = [cube.configs.index(c) for c in self.configs]
        where = {u: k for k, u in enumerate(cube.items)}
        rows = np.array([where.get(u, -1) for u in uids])
        known = rows >= 0
        present = np.zeros((len(uids), len(cols)), dtype=bool)
        present[known] = (cube.present[m[0]][rows[known]][:, cols]
                          & cube.present[m[1]][rows[known]][:, cols])
        avail = present.all(axis=1)
        idx = np.flatnonzero(avail)
        bits_a = cube.bits[m[0]][rows[idx]][:, cols].astype(np.int8)
        bits_b = cube.bits[m[1]][rows[idx]][:, cols].astype(np.int8)
        self.seq.comp.d[idx] = bits_a - bits_b
        return avail

    def _has_cells(self, name: str, chunk_uids) -> bool:
        done = self.store.done_keys(self.args.grid, name) \
            if self.store.has_grid(self.args.grid) else set()
        return all((u, c) in done for u in chunk_uids for c in self.configs)

    def spent(self) -> dict:
        """Seconds and tokens the comparison's runs recorded (every chunk's, earlier
        invocations' included)."""
        runs = self._own_runs()
        return {"seconds": float(sum(r.seconds or 0.0 for r in runs)),
                "tokens": int(sum(r.tokens or 0 for r in runs)), "runs": len(runs)}

    def _pair_tag(self) -> list[str]:
        return [s.name for s in self.sides]

    def _own_runs(self):
        if not self.store.has_grid(self.args.grid):
            return []
        return [r for r in self.store.runs(self.args.grid)
                if (r.spec.get("compare") or {}).get("pair") == self._pair_tag()]

    def _evaluate_with_runner(self, side: Side, chunk_uids: list[str], index: int) -> None:
        """The ordinary run loop over the chunk's items for one model; a died run of the same
        chunk (a killed comparison) is resumed by its id."""
        from fragility_tui import settings
        from fragility_tui.commands.run import _imports_not_collected
        from fragility_tui.processes import pid_alive
        from fragility_tui.store.runs import RunStatus
        from runners.run.events import Display, choose_display
        from runners.run.failure import failure_reason
        from runners.run.loop import Run, RunSpec

        tag = {"pair": self._pair_tag(), "model": side.name, "chunk": index}
        spec = self._spec(side, item_uids=list(chunk_uids), compare=tag)
        run_id = None
        for r in self._own_runs():
            if r.spec.get("compare") == tag and r.status != RunStatus.FINISHED and \
                    not pid_alive(r.pid, r.pid_started) and same_settings(r.spec, spec):
                run_id, spec = r.run_id, RunSpec.from_dict(r.spec)
        mode = choose_display(self.args.display, sys.stderr)
        if self.held is None:
            from runners.run.held_models import HeldModels

            self.held = HeldModels()  # each model loads once for the whole comparison
        with _imports_not_collected(), compare_wording():
            runner = Run(spec, self.store, run_id=run_id, display="none", held=self.held)
        runner.display = Display(mode, stream=sys.stderr)  # stdout: the comparison's lines
        self.runs.append(runner.run_id)
        try:
            with compare_wording():  # the grid is checked again when the run starts writing
                status = runner.execute()
        except (InputError, KeyboardInterrupt):
            raise
        except Exception as exc:
            if settings.debug():
                raise
            raise RunFailedError(f"run {runner.run_id} ({side.name}, chunk {index + 1}) "
                                 f"failed: {failure_reason(exc)}") from None
        if status != RunStatus.FINISHED:
            raise KeyboardInterrupt  # cancelled (ctrl+c, `runs cancel`): exit 130

    # -- output ----------------------------------------------------------------------------

    def _write(self, text: str) -> None:
        stream = sys.stderr if self.args.json else self.out
        stream.write(text + "\n")
        stream.flush()

    def _header(self) -> None:
        from fragility_tui.commands.compare_text import header_line

        a, b = self.sides
        self._write(header_line(self.args, a.name, b.name, self.seq.result,
                                f"live runs over {', '.join(self.args.items)}",
                                len(self.configs)))

    def _record_start(self) -> None:
        """The pair's first comparison is recorded before any chunk is evaluated, so a
        comparison killed mid-way still counts as the first (services/comparisons.py)."""
        from fragility_tui.services.comparisons import first_comparison

        r = self.seq.result
        start = {"a": self.sides[0].name, "b": self.sides[1].name, "reference": r.reference,
                 "target": r.target, "seed": r.seed, "scope": r.scope, "margin": r.margin,
                 "chunk": r.chunk, "path": None}
        first_comparison(self.store, self.args.grid, start, live=True)
        if not start["independent_evidence"]:
            from fragility_tui.services.comparisons import print_first_line

            print_first_line(start, sys.stderr)

    def _progress(self, step) -> None:
        from fragility_tui.commands.compare_text import progress_line

        self._write(progress_line(step, self.seq.result))

    def to_json(self) -> dict:
        from fragility_tui.commands.compare_text import pool_delta
        from fragility_tui.services.comparisons import first_comparison

        result = self.seq.result
        spent = self.spent()
        out = result.to_json()
        per_item = (spent["seconds"] / result.items_used
                    if result.items_used and spent["runs"] else None)
        out.update({
            "grid": self.args.grid, "a": self.sides[0].name, "b": self.sides[1].name,
            "replay": False, "items_source": list(self.args.items),
            "configs_in_view": list(self.configs),
            "order_items": [self.pool[k].item_uid for k in result.order.tolist()],
            "pool_complete": result.items_used == result.pool,
            # the whole pool's exact Δ at the decision config for the decision's target,
            # once every item is judged
            "pool_delta": (pool_delta(self.seq.comp.d[:, self.seq.comp.ref],
                                      [it.benchmark for it in self.pool], result.target)
                           if result.items_used == result.pool and result.pool else None),
            "seconds_per_item": per_item,
            "seconds_used": spent["seconds"] if spent["runs"] else None,
            "seconds_pool": None if per_item is None else per_item * result.pool,
            "tokens_used": spent["tokens"] if spent["runs"] else None,
            "wall_seconds": time.monotonic() - self.started,
            "runs": self.runs,
            "margin_points": self.args.margin,
        })
        return first_comparison(self.store, self.args.grid, out, live=True)


# What a run fills in itself, not a setting: the item order's seed (the run's seed unless
# recorded otherwise).
_NOT_SETTINGS = ("order_seed",)


def same_settings(recorded: dict, spec) -> bool:
    """Whether a died chunk run (its recorded spec) was started with this invocation's
    settings for the chunk: every field of the spec (models, items, sample, seed, configs,
    prompt mode, dtype, device, batching, threads, max_new_tokens, ...) but the ones a run
    fills in itself. Only such a run is resumed; any other is left as it died and the chunk
    gets a new run with the settings given now (issue 58)."""
    new = spec.to_dict()
    old = {**new, **{k: v for k, v in recorded.items() if k in new}}
    for key in _NOT_SETTINGS:
        old.pop(key, None)
        new.pop(key, None)
    old["item_uids"] = sorted(old.get("item_uids") or [])
    new["item_uids"] = sorted(new.get("item_uids") or [])
    return old == new


# `run`'s refusals that name flags `compare` does not have (or has with another meaning:
# compare's --seed orders the items), as compare says them (issue 58).
_RUN_WORDING = (
    ("(use --seed ", "(use --grid-seed "),
    ("; use another --grid, or --add-items to add these items to the grid (it becomes "
     "partial until every model has them)",
     "; use another --grid (compare takes the items the grid was made with)"),
    ("Record this run under another model name with --name NEW_NAME, or use another --grid",
     "Compare into another --grid"),
)
_RUN_FIELDS = {"--seed": "--grid-seed"}


@contextmanager
def compare_wording():
    """`run`'s InputErrors raised inside, reworded to name compare's flags."""
    try:
        yield
    except InputError as exc:
        prefix = str(InputError("", path=exc.path, line=exc.line, field=exc.field))
        message = str(exc)[len(prefix):] if str(exc).startswith(prefix) else str(exc)
        text = message
        for old, new in _RUN_WORDING:
            text = text.replace(old, new)
        field = _RUN_FIELDS.get(exc.field, exc.field)
        if text == message and field == exc.field:
            raise
        raise InputError(text, path=exc.path, line=exc.line, field=field) from None


class RunFailedError(Exception):
    """A chunk's run failed (recorded in its run row); one line for the user, exit 1."""


def _bare(exc: InputError) -> str:
    """The message without its `field '...': ` prefix (re-raised under compare's field)."""
    text = str(exc)
    if exc.field is not None:
        prefix = f"field {exc.field!r}: "
        if text.startswith(prefix):
            return text[len(prefix):]
    return text
