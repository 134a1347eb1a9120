"""Opening the store: the one way the CLI and the app do it. The default store (no --db)
gets the grids shipped in sample_grids/ on first use, and their newer versions after an
upgrade, so a fresh machine starts with something to explore."""

from __future__ import annotations


def open_store(db: str | None, *, load_samples: bool | None = None, progress=None,
               session: bool = False):
    """Open the store; the default store (no --db) gets the shipped sample grids (and their
    updates, see ensure_sample_grids), so a fresh machine starts with something to explore.
    `progress(k, n, name)` hears of each shipped grid loaded (the app's status line).
    session=True: the connection stays open for the caller's first `with store.session()`
    block, which must follow at once (Store)."""
    from fragility_tui.store.store import Store

    store = Store(db, session=session)
    if load_samples is None:
        load_samples = db is None
    if load_samples:
        ensure_sample_grids(store, progress)
    return store


def ensure_sample_grids(store, progress=None) -> list[str]:
    """Load the shipped grids this store lacks or holds in an older shipped version. A
    shipped grid the user deleted is not brought back (`load-samples` does that)."""
    from fragility_tui.store.sample_grids import (load_sample_grids, record_sample_grids,
                                                  recorded_sample_grids)

    recorded = recorded_sample_grids(store)
    loaded = load_sample_grids(store, recorded or set(), progress)
    if loaded or recorded is None:
        record_sample_grids(store, (recorded or set()) | set(loaded))
    return loaded
