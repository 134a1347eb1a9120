"""Decision wording shared by the report and the app (numpy-free: the app imports it before
its first frame)."""

from __future__ import annotations

MIN_BALANCED_ITEMS = 20  # a benchmark the balanced target weighs needs this many paired items


def lacking_benchmarks(names, n_items: dict[str, int]) -> str:
    """Why these benchmarks leave a decision unsupported: no item complete for both models,
    or (the balanced target, which weighs each benchmark) too few to weigh."""
    empty = [b for b in names if not n_items.get(b)]
    small = [f"{b} ({n_items[b]})" for b in names if n_items.get(b)]
    parts = []
    if empty:
        parts.append("no item complete for both models in " + ", ".join(empty))
    if small:
        parts.append(f"fewer than {MIN_BALANCED_ITEMS} paired items to weigh in "
                     + ", ".join(small))
    return "; ".join(parts)
