"""The flag checks `run` and `compare --items` share (issue 58): one set, run before the
store is touched, so a bad value is one `error:` line naming its flag (exit 2) and never a
run row, a half-made grid or a traceback from DuckDB or numpy.

- `--max-new-tokens`, `--threads`: at least 1 (0 stored cells with no new tokens, or wrote a
  run row and then failed in torch).
- Seeds (`run --seed`, `compare --grid-seed`, `compare --seed`): a whole number from 0 to
  2**63 - 1, what the store's BIGINT seed column and numpy's generators take.
- `compare --margin`: a finite number of points, at least 0 and below 100 (an accuracy gap
  lies within ±100 points, so a margin of 100 or more is met by any two models).
"""

from __future__ import annotations

import math

from fragility_tui.errors import InputError

SEED_MAX = 2 ** 63 - 1  # the store's seed column is a BIGINT
MARGIN_LIMIT = 100.0  # points: |Δ| <= 100 always, so a margin this large says nothing


def check_minimum(value, flag: str, minimum: int, wording: str | None = None) -> None:
    if value is None or value < minimum:
        raise InputError(f"{flag} must be {wording or f'at least {minimum}'}, got {value}",
                         field=flag)


def check_seed(value, flag: str) -> None:
    if value is None:
        return
    if not 0 <= value <= SEED_MAX:
        raise InputError(f"{flag} must be a whole number from 0 to 2**63 - 1 "
                         f"({SEED_MAX}), got {value}", field=flag)


def check_margin(value: float, flag: str = "--margin") -> None:
    if not math.isfinite(value) or not 0 <= value < MARGIN_LIMIT:
        raise InputError(f"{flag} must be a number of accuracy points from 0 up to (not "
                         f"including) {MARGIN_LIMIT:g}, got {value:g}: a margin of "
                         f"{MARGIN_LIMIT:g} points or more calls any two models equivalent",
                         field=flag)


def check_run_flags(args, seed_flag: str = "--seed") -> None:
    """The options `compare --items` shares with `run` (as each command names them):
    `--max-new-tokens`, `--threads`, `--per-benchmark` and the run's seed (`run --seed`,
    `compare --grid-seed`)."""
    check_minimum(args.max_new_tokens, "--max-new-tokens", 1)
    check_minimum(args.threads, "--threads", 1)
    check_minimum(args.per_benchmark, "--per-benchmark", 0, "0 (all) or more")
    check_seed(getattr(args, seed_flag[2:].replace("-", "_")), seed_flag)
