"""The flag checks every command shares (issue 58): run before the store is touched, so a bad
value is one `error:` line naming its flag, the value and what is accepted (exit 2), and
never a run row, a half-made grid or a traceback from DuckDB, numpy or torch.

- `--max-new-tokens`, `--threads`: at least 1 (0 stored cells with no new tokens, or wrote a
  run row and then failed in torch), and at most MAX_NEW_TOKENS_MAX and THREADS_MAX.
- Seeds (`run --seed`, `compare --grid-seed`, `compare --seed`, and the `--seed` of `report`,
  `calibrate`, `selfcheck` and `simulate`): a whole number from 0 to 2**63 - 1, what the
  store's BIGINT seed columns and numpy's generators take (numpy refused -1 with a bare
  ValueError, exit 1).
- `--margin` (`compare`, `report`): a finite number of points, at least 0 and below 100 (an
  accuracy gap lies within ±100 points, so a margin of 100 or more is met by any two
  models; `nan` passed every comparison and broke `report --json`).
- Counts that size arrays (`--boot`, `calibrate --replicates`, `report --random-draws`,
  `simulate --models/--items`): at most a bound stated with the arrays behind it, checked
  before anything is allocated (a MemoryError was an exit-1 "internal failure").
"""

from __future__ import annotations

import math

from fragility_tui.errors import InputError

SEED_MAX = 2 ** 63 - 1  # the store's seed column is a BIGINT
MARGIN_LIMIT = 100.0  # points: |Δ| <= 100 always, so a margin this large says nothing

# The bootstrap keeps its resampling counts (resamples x items, float32) for a whole decision
# pass beside [resamples, columns] float64 estimates: `report --boot 100000` on the paper-size
# grid (12 x 3,679 x 26) peaked at 4.3 GB and 25 s (the default 2,000: 0.19 GB, 1.3 s), 50
# times the default; `calibrate --boot 100000` on one pair, 20 replicates: 5 GB.
BOOT_MAX = 100_000
BOOT_WHY = ("each resample holds a row of counts per item: 100,000 took 4.3 GB on a "
            "3,679-item grid")
# The words --help gives each bound (the same numbers; argparse reads '%' specially, so none).
BOOT_HELP = f"at most {BOOT_MAX:,}: memory grows with it (~43 KB a resample on a 3,679-item grid)"
SEED_HELP = "a whole number from 0 to 2**63 - 1"
# `run --threads`: torch starts an OpenMP thread for each (2**31 - 1 made libgomp abort the
# process allocating 463 GB; 100,000 failed mapping shared objects): 1,024 is beyond the
# hardware threads of any one machine we run on.
THREADS_MAX = 1024
# `--max-new-tokens`: a decoding row holds 2 x DECODE_GROUP_LEAVES (4) x N key columns and one
# call holds at most MAX_TOKENS (2**18) budget tokens (runners/backends/transformers/
# decoding.py, runners/plan/budget.py; tests/commands/test_number_flags.py keeps them
# equal), so a larger N never fits a call (10**20 crashed in torch with a C++ trace).
MAX_NEW_TOKENS_MAX = (1 << 18) // (2 * 4)


def check_minimum(value, flag: str, minimum: int, wording: str | None = None) -> None:
    if value is None or value < minimum:
        raise InputError(f"{flag} must be {wording or f'at least {minimum}'}, got {value}",
                         field=flag)


def check_count(value, flag: str, minimum: int, maximum: int, why: str = "") -> None:
    """A whole number from minimum to maximum; `why` says what the upper bound guards (the
    arrays or columns it sizes). None (a flag not given) passes."""
    if value is None:
        return
    if not minimum <= value <= maximum:
        raise InputError(f"{flag} must be a whole number from {minimum:,} to {maximum:,}"
                         f"{f' ({why})' if why else ''}, got {value}", field=flag)


def check_listed(value, flag: str) -> None:
    """A list flag given empty (`--configs ''`, as a script with an unset variable writes
    it) is an error: it quietly meant a default (the paper's 26 configs) the user did not
    ask for."""
    if value is not None and not value.strip(" ,"):
        raise InputError(f"{flag} is empty: name at least one, or leave the flag out",
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


def check_boot(value, flag: str = "--boot") -> None:
    check_count(value, flag, 1, BOOT_MAX, BOOT_WHY)


def check_run_flags(args, seed_flag: str = "--seed") -> None:
    """The options `compare --items` shares with `run` (as each command names them):
    `--max-new-tokens`, `--threads`, `--per-benchmark` and the run's seed (`run --seed`,
    `compare --grid-seed`)."""
    check_minimum(args.max_new_tokens, "--max-new-tokens", 1)
    check_count(args.max_new_tokens, "--max-new-tokens", 1, MAX_NEW_TOKENS_MAX,
                "a decoding row of 4 leaves x 2 x N key columns must fit one call's "
                "262,144-token budget")
    check_minimum(args.threads, "--threads", 1)
    check_count(args.threads, "--threads", 1, THREADS_MAX, "an OpenMP thread each")
    check_minimum(args.per_benchmark, "--per-benchmark", 0, "0 (all) or more")
    check_seed(getattr(args, seed_flag[2:].replace("-", "_")), seed_flag)
