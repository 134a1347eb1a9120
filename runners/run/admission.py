"""What a run checks before it touches the store: its items load, and the grid it names can
take its cells. Torch-free, and run before the run row is written or a model is prepared,
so a refused run (a typo in --items, a synthetic grid, another item set) leaves the store
exactly as it was: no failed run row for a grid that never existed, no overwritten record
of a resumed run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.items.item import Item, item_set_hash, shard_of

# The repository root: shipped run records name their items relative to it
# ("sample_grids/starter_items.jsonl"), whatever folder they are resumed from.
REPO_ROOT = Path(__file__).resolve().parents[2]  # runners/run/admission.py


@dataclass
class RunItems:
    items: list[Item]  # this run's items (its shard's, with --shard)
    positions: list[int]  # each item's place in the whole sampled set
    set_hash: str  # of every shard's items: one grid, one item set
    report: object  # the loaders' load report (counts, exclusions)
    pool: list[Item] | None = None  # the whole sampled set (every shard's): +kN's examples


def item_path(text: str) -> str:
    """An item path as given, made absolute when it names a file or folder, so a run record
    resumes from any working directory. A relative path that is not under the current folder
    but is under the repository root (a shipped run's `sample_grids/…`) resolves there.
    Anything else (a named source such as `hub:…`) is kept as written."""
    path = Path(text).expanduser()
    if path.exists():
        return str(path.resolve())
    if not path.is_absolute() and (REPO_ROOT / path).exists():
        return str(REPO_ROOT / path)
    return text


def load_run_items(spec) -> RunItems:
    """Load, assemble and sample the spec's items (InputError naming the file if one fails)."""
    from fragility_tui.items.loaders import load_many

    items, report = load_many([item_path(p) for p in spec.items],
                              per_benchmark=spec.per_benchmark, seed=spec.seed)
    set_hash = item_set_hash(items)
    pool, positions = items, list(range(len(items)))
    if spec.shard:  # after sampling, so every shard samples the same items
        index, count = spec.shard
        positions = [k for k, it in enumerate(items) if shard_of(it.item_uid, count) == index]
        items = [items[k] for k in positions]
    if getattr(spec, "item_uids", None) is not None:  # a sequential comparison's chunk
        wanted = set(spec.item_uids)
        keep = [k for k, it in enumerate(items) if it.item_uid in wanted]
        positions, items = [positions[k] for k in keep], [items[k] for k in keep]
    return RunItems(items, positions, set_hash, report, pool)


def check_grid(store, spec, set_hash: str) -> str | None:
    """Refuse a grid that cannot take this run's cells (InputError, exit 2). Returns a note
    for the user when the run is allowed to change the grid's item set (--add-items).
    Checked here before the run row, and again by `check_settings` in the transaction that
    creates the grid when the run starts writing (a queued run may wait for hours)."""
    if not store.has_grid(spec.grid):
        return None
    meta = dict(store.grid_meta(spec.grid))
    if meta.get("item_set_hash") is None:
        meta["item_set_hash"] = _stored_items_hash(store, spec.grid)
    return check_settings(spec, set_hash, meta)


def check_settings(spec, set_hash: str, meta: dict | None) -> str | None:
    """check_grid's rule on the grid's settings as read (None: no grid yet)."""
    if meta is None:
        return None
    if meta.get("synthetic"):
        raise InputError(f"grid {spec.grid!r} is SYNTHETIC (simulated cells, labelled so "
                         "everywhere): a model's real cells do not go into it; name another "
                         "--grid (a new name creates one)", field="--grid")
    seed = meta.get("seed")
    if seed is not None and int(seed) != spec.seed:
        raise InputError(f"grid {spec.grid!r} was created with seed {seed}; the option "
                         f"shuffles depend on it, so a run with seed {spec.seed} cannot add "
                         f"to it (use --seed {seed} or another --grid)", field="--seed")
    recorded = meta.get("item_set_hash")
    if recorded is None or recorded == set_hash:
        return None
    if not getattr(spec, "add_items", False):
        raise InputError(
            f"grid {spec.grid!r} holds another item set (item-set hash {recorded[:12]}…) than "
            f"this run's items (item-set hash {set_hash[:12]}…): models evaluated on other "
            "items cannot be ranked together; use another --grid, or --add-items to add "
            "these items to the grid (it becomes partial until every model has them)",
            field="--items")
    return (f"--add-items: grid {spec.grid!r} (item-set hash {recorded[:12]}…) takes the items "
            f"of item set {set_hash[:12]}…; it is partial until every model has every item")


def _stored_items_hash(store, grid: str) -> str | None:
    """An imported grid records no item-set hash: its stored items' hash stands in."""
    load = getattr(store, "load_items", None)  # a parts folder records the hash itself
    items = load(grid) if load is not None else []
    return item_set_hash(items) if items else None


def check_examples(spec, inputs: RunItems) -> None:
    """A +kN config needs N other items of each benchmark in the run's pool (its whole
    sampled set): refused before the run row, naming the benchmarks short of them."""
    from fragility_tui.harness.configs import get_config
    from fragility_tui.harness.fewshot import short_benchmarks

    shots = max((get_config(c).shots for c in spec.configs), default=0)
    if not shots:
        return
    short = short_benchmarks(inputs.pool or inputs.items, shots)
    if short:
        named = ", ".join(f"{name} ({n} items)" for name, n in sorted(short.items()))
        raise InputError(f"+k{shots} shows {shots} solved examples of the item's own "
                         f"benchmark, never the item: {named} cannot give them; use fewer "
                         "shots or more items (--per-benchmark)", field="--configs")
