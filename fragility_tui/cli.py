"""`fragility-tui` entry point: the app by default, subcommands for everything else.

Exit codes: 0 success, 2 bad input (InputError, argparse errors), 1 internal failure.
Errors go to stderr as one line starting with `error:`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from typing import NoReturn

from fragility_tui import __version__
from fragility_tui import settings
from fragility_tui.errors import InputError, StoreBusyError

# Subcommand modules: each has register(subparsers) and run(args) -> int (or sets func).
COMMAND_MODULES = (
    "fragility_tui.commands.grid_commands",
    "fragility_tui.commands.report",
    "fragility_tui.commands.selfcheck",
    "fragility_tui.commands.calibrate",
    "fragility_tui.commands.run",
    "fragility_tui.commands.runs",
    "fragility_tui.commands.lmeval",
    "fragility_tui.commands.import_log",
    "fragility_tui.commands.harnesses",
    "fragility_tui.commands.merge",
    "fragility_tui.commands.compare",
)
# Which module registers each subcommand: `fragility-tui report ...` imports that module
# alone (the others pull in the runner's records, provenance and devices: ~50 ms of a
# command that should take well under a second). tests/commands/test_command_modules.py
# keeps this table equal to what the modules register.
COMMAND_OF = {
    **dict.fromkeys(("grids", "import", "simulate", "export", "load-samples"),
                    "fragility_tui.commands.grid_commands"),
    "report": "fragility_tui.commands.report",
    "selfcheck": "fragility_tui.commands.selfcheck",
    "calibrate": "fragility_tui.commands.calibrate",
    "run": "fragility_tui.commands.run",
    "runs": "fragility_tui.commands.runs",
    "import-lmeval": "fragility_tui.commands.lmeval",
    "import-log": "fragility_tui.commands.import_log",
    "harnesses": "fragility_tui.commands.harnesses",
    "merge": "fragility_tui.commands.merge",
    "compare": "fragility_tui.commands.compare",
}


class _Parser(argparse.ArgumentParser):
    commands: tuple = ()  # the top parser's command names
    argv: tuple = ()  # the top parser's words, to name the command in its errors

    def error(self, message):  # argparse's usage errors are bad input: exit 2, one line
        named = next((w for w in self.argv if w in self.commands), None)
        prog = f"{self.prog} {named}" if named else self.prog
        hint = f"`{prog} --help` lists the options"
        if named and message.startswith("unrecognized arguments") and _takes_paths(
                self._subparsers._group_actions[0].choices[named]):
            hint += "; its paths go before its options"
        sys.stderr.write(f"error: {message} ({hint})\n")
        sys.exit(2)


def _db_parent(suppress: bool) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--db", metavar="PATH",
                        default=argparse.SUPPRESS if suppress else None,
                        help="DuckDB store file (default: the user data dir; "
                             "FRAGILITY_TUI_DB overrides it)")
    return parent


def build_parser(modules=None) -> argparse.ArgumentParser:
    """The whole CLI's parser, or one that registers only `modules` (command_modules)."""
    parser = _Parser(prog="fragility-tui", parents=[_db_parent(False)],
                     description="Is a multiple-choice leaderboard gap real, or made by the "
                                 "harness? With no subcommand, opens the app.")
    parser.add_argument("--version", action="version", version=f"fragility-tui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.db_parent = _db_parent(True)  # commands pass parents=[sub.db_parent]
    for name in COMMAND_MODULES if modules is None else modules:
        module = importlib.import_module(name)  # a missing one is a broken install: say so
        before = set(sub.choices)
        module.register(sub)
        for added in set(sub.choices) - before:
            p = sub.choices[added]
            if not any(a.dest == "db" for a in p._actions):
                p.add_argument("--db", metavar="PATH", default=argparse.SUPPRESS,
                               help="DuckDB store file (default: the user data dir)")
            if p.get_default("func") is None and hasattr(module, "run"):
                p.set_defaults(func=module.run)
    return parser


def _takes_paths(parser: argparse.ArgumentParser) -> bool:
    """Whether a command takes positional words (a stray one after its options is then
    most likely one of them: argparse takes positionals only before the options)."""
    return any(not a.option_strings and a.nargs in ("+", "*") for a in parser._actions)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser(command_modules(argv))
    parser.argv = tuple(argv)
    parser.commands = tuple(parser._subparsers._group_actions[0].choices)
    return parser.parse_args(argv)


def resolve_db(args) -> str | None:
    return getattr(args, "db", None) or settings.db_path_override()


def app_only(argv: list[str]) -> argparse.Namespace | None:
    """`fragility-tui` or `fragility-tui --db PATH`: the app, parsed without importing the
    command modules (the first paint waits for whatever runs before it); None otherwise."""
    if not argv:
        return argparse.Namespace(command=None, db=None)
    if len(argv) == 2 and argv[0] == "--db" and not argv[1].startswith("-"):
        return argparse.Namespace(command=None, db=argv[1])
    if len(argv) == 1 and argv[0].startswith("--db=") and len(argv[0]) > 5:
        return argparse.Namespace(command=None, db=argv[0][5:])
    return None


def command_modules(argv: list[str]) -> tuple[str, ...] | None:
    """The one module to register when argv names a subcommand (after any --db PATH);
    None (every module) otherwise: top-level help, --version, a misspelt command."""
    k = 0
    while k < len(argv) and (argv[k] == "--db" or argv[k].startswith("--db=")):
        k += 1 if "=" in argv[k] else 2
    module = COMMAND_OF.get(argv[k]) if k < len(argv) else None
    return None if module is None else (module,)


def quiet_blas_threads() -> None:
    """OpenBLAS (numpy's BLAS) keeps its worker threads spinning for 2^28 cycles (~0.1 s)
    after every call; on a 2-core machine they take the core the main thread needs next.
    2^4 cycles puts them to sleep at once: on a loaded 2-core machine `report` and
    `calibrate` ran in ~0.6x the time (docs/scale.md, "Report speed"). Every figure
    is unchanged: the same threads split the same work. Read when numpy loads its BLAS, so
    set before anything imports numpy; a value the user set wins."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")


# Commands that read the store, run one analysis, print it and exit. Started as a process
# (entry), they tune it for that: run_one_shot (docs/scale.md, "Report speed").
ONE_SHOT = frozenset({"report"})
_GLIBC_TUNING = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def reuse_freed_memory() -> bool:
    """Have glibc keep freed memory for the next allocation instead of unmapping it. By
    default every array above 32 MB (and, after a trim, many smaller ones) gets fresh pages
    from the kernel, which zeroes each one: the paper-size report's bootstrap counts and
    their temporaries went that way (page faults 36,000 -> 17,700 and kernel time 0.14 ->
    0.06 s with this setting; docs/scale.md). Arrays up to 512 MB then come from the heap,
    which is not returned to the kernel below 1 GB: a process that exits after one analysis
    peaks no higher and keeps what it freed until it exits. No figure changes (the same
    arithmetic in other memory). Skipped where the user tuned glibc's allocator through its
    environment, and where the C library has no mallopt (not glibc). True when the setting
    took."""
    if any(name in os.environ for name in _GLIBC_TUNING):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's <malloc.h>
    return bool(mallopt(m_mmap_threshold, 512 << 20)) and bool(mallopt(m_trim_threshold, 1 << 30))


def run_one_shot(args) -> NoReturn:
    """A ONE_SHOT command in a process of its own: freed memory is reused
    (reuse_freed_memory), the cycle collector stays off (one analysis makes no cycles worth
    collecting; its passes over the ~10^5 objects numpy, DuckDB and our modules leave cost
    ~10 ms), and the process ends once the output is out, without the interpreter's
    teardown: freeing every module, object and array one by one, which the kernel does at
    once (~25 ms once numpy and DuckDB are loaded). The command holds no open file or
    connection when it returns (its store session is closed) and registers no atexit work.
    An error, or a flush that fails (a closed pipe), raises to main's usual handling."""
    reuse_freed_memory()
    gc.disable()
    code = int(args.func(args) or 0)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: list[str] | None = None, *, own_process: bool = False) -> int:
    """Run the app or a subcommand; the exit status. own_process: main runs the whole
    process (entry does), so a ONE_SHOT command may tune it and end it (run_one_shot); a
    caller in-process gets the status back."""
    argv = sys.argv[1:] if argv is None else list(argv)
    quiet_blas_threads()
    args = app_only(argv) or _parse(argv)
    args.db = resolve_db(args)
    try:
        if args.command is None:
            # No collection while Textual and the app load and paint their first frame
            # (nothing they make is garbage worth the pause); enabled after it (tui/entry.py).
            gc.disable()
            from fragility_tui.tui.entry import run_app

            return run_app(args.db)
        if own_process and args.command in ONE_SHOT:
            return run_one_shot(args)
        return int(args.func(args) or 0)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except StoreBusyError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the CLI's last line of defence
        if settings.debug():
            raise
        print(f"error: internal failure: {type(exc).__name__}: {exc} "
              "(set FRAGILITY_TUI_DEBUG=1 for a traceback)", file=sys.stderr)
        return 1


def entry() -> None:
    """The `fragility-tui` console script and `python -m fragility_tui.cli`."""
    sys.exit(main(own_process=True))


if __name__ == "__main__":
    entry()
