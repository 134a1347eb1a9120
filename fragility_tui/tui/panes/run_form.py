"""The Runs pane's form and the Compare form: checking what was typed (before any process or
run row exists) and turning it into `fragility-tui run …` arguments. Apart from the widgets,
so a test checks it without starting the app."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from fragility_tui.backends import DEFAULT_BACKEND, backend_info
from fragility_tui.devices import ANY_GPU
from fragility_tui.errors import InputError
from fragility_tui.harness.config_axes import is_runner_config
from fragility_tui.processes import db_args

ENDPOINTS = ("completions", "chat")  # its --endpoint
DEVICE_CHOICES = [("auto", "auto"), ("cpu", "cpu"), ("any free GPU", ANY_GPU)]
# the CLI's own check of --api-key-env (commands/run.py): a variable's name, never a key
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# org/name[@revision] as the hub spells repository ids: a path that does not exist
# ("ckpts/", "./run-3", "/data/x") never passes for one
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?")


NEW_GRID = "my-grid"  # what the run forms propose when the open grid is not the user's own


def shipped_grid_names() -> frozenset[str]:
    """The grids sample_grids/ ships (its manifest): a release replaces one by its newer
    version only while no local run has written into it."""
    from fragility_tui.store.sample_grids import sample_grid_files

    return frozenset(meta["name"] for _, meta in sample_grid_files())


def proposed_grid(open_grid: str | None, synthetic, configs=()) -> str:
    """The grid a run form proposes: the open grid when it is the user's own, else a new
    one (NEW_GRID). Never a synthetic grid (no run writes into one), nor a shipped one (a
    newcomer's first runs would go into the shipped real grid, which then is never
    upgraded), nor one with configs our runner does not render (`configs`: the open grid's,
    e.g. imported from another harness's log): such a grid holds the log's items, which
    the run refuses to mix with its own ("holds another item set")."""
    if not open_grid or open_grid in synthetic or open_grid in shipped_grid_names():
        return NEW_GRID
    if not all(is_runner_config(c) for c in configs):
        return NEW_GRID
    return open_grid


def open_grid_configs(view, grid: str | None) -> tuple[str, ...]:
    """The open grid's configs for proposed_grid: all of them, not only the selection's;
    none while its view is not computed yet."""
    return tuple(view.full.configs) if view is not None and view.grid == grid else ()


def shipped_grid_note(grid: str | None) -> str | None:
    """What writing runs into a shipped grid means, said before the first Start; None for
    any other grid."""
    if not grid or grid not in shipped_grid_names():
        return None
    return (f"grid: {grid} is a shipped grid: your runs would go into it, and a newer "
            "release would then no longer update it (a new name creates a grid of your own)")


def run_argv(form: dict, db_path: str | None) -> list[str]:
    """`fragility-tui run …` arguments for the form's values (empty fields left out: no
    items means the shipped starter items, as on the command line; no model with a served
    backend means the served model needs no local tokenizer)."""
    argv = ["run"] + (["--model", form["model"]] if form.get("model") else [])
    argv += ["--display", "none"]
    for flag, key in (("--items", "items"), ("--grid", "grid"),
                      ("--per-benchmark", "per_benchmark"), ("--configs", "configs"),
                      ("--quantize", "quantize")):
        if form.get(key):
            argv += [flag, str(form[key])]
    if form.get("device") and form["device"] != "auto":
        argv += ["--device", form["device"]]
    backend = form.get("backend") or DEFAULT_BACKEND
    if backend != DEFAULT_BACKEND:
        argv += ["--backend", backend]
    if backend_info(backend).server_flags:
        argv += ["--base-url", form["base_url"], "--served-model", form["served_model"]]
        if form.get("api_key_env"):
            argv += ["--api-key-env", form["api_key_env"]]
        argv += ["--endpoint", form.get("endpoint") or "completions"]
    argv += shlex.split(form.get("extra") or "")
    return argv + db_args(db_path)


def check_run_form(form: dict, cwd: Path) -> tuple[dict, list[str]]:
    """(the form with its paths resolved against `cwd`, problems): a model spec or an items
    path that the run process could not use is caught here, before any run row exists.
    Hub ids are checked only for their shape (the hub is asked when the run loads it)."""
    from fragility_tui.items.sources import SOURCE_NAMES, is_named_source

    form, problems = dict(form), []
    try:
        served = backend_info(form.get("backend")).server_flags
    except InputError as exc:
        served = False
        problems.append(f"backend: {exc}")
    # a served model needs no local model: --model then only names its tokenizer
    for key in ("grid",) if served else ("model", "grid"):
        if not form.get(key):
            problems.append(f"fill in the {key}")
    if form.get("model"):
        form["model"], problem = _check_model(form["model"], cwd)
        problems += [f"model: {problem}"] if problem else []
    items = form.get("items") or ""
    if items:
        path = (cwd / items).expanduser()
        if path.exists():
            form["items"] = str(path.resolve())
        elif not is_named_source(items):
            problems.append(f"items: no such file or folder {path}, and not a named source "
                            f"({', '.join(SOURCE_NAMES)})")
    if form.get("configs"):
        from fragility_tui.harness.configs import parse_config_list

        try:
            parse_config_list(form["configs"])
        except ValueError as exc:
            problems.append(f"configs: {exc}")
    if served:
        problems += _served_problems(form)
    if shlex_error := _shlex_problem(form.get("extra") or ""):
        problems.append(shlex_error)
    return form, problems


def _check_model(model: str, cwd: Path) -> tuple[str, str | None]:
    """(the spec, absolute where it names a file or folder; what is wrong with it or None)."""
    from fragility_tui.model_aliases import ALIASES

    if model in ALIASES:
        return model, None
    path = (cwd / model).expanduser()
    if model.endswith(".gguf") or path.exists():
        if not path.exists():
            return model, f"no such file {path}"
        if path.is_dir() and not (path / "config.json").is_file():
            return model, f"{path} has no config.json (not a model folder)"
        return str(path.resolve()), None
    if not HUB_ID.fullmatch(model):
        return model, (f"{model!r} is not an alias ({', '.join(ALIASES)}), a .gguf file, a "
                       "model folder or a hub id org/name[@revision]")
    return model, None


def _served_problems(form: dict) -> list[str]:
    """A served backend's fields, checked as the CLI checks its flags."""
    problems = []
    url = form.get("base_url") or ""
    if not url:
        problems.append("fill in the base URL (e.g. http://127.0.0.1:8000/v1)")
    elif not url.startswith(("http://", "https://")):
        problems.append(f"base URL: {url!r} does not start with http:// or https://")
    if not form.get("served_model"):
        problems.append("fill in the served model (its id in the server's /v1/models)")
    key_env = form.get("api_key_env") or ""
    if key_env and not ENV_NAME.fullmatch(key_env):
        problems.append("API key variable: the name of an environment variable (letters, "
                        "digits, _), never the key itself")
    if form.get("endpoint") not in (None, "", *ENDPOINTS):
        problems.append(f"endpoint: {form['endpoint']!r} is not one of {', '.join(ENDPOINTS)}")
    if form.get("quantize"):
        problems.append("quantise: a served model is quantised by its server, not here")
    return problems


def _shlex_problem(text: str) -> str | None:
    try:
        shlex.split(text)
    except ValueError as exc:
        return f"extra flags: {exc}"
    return None


# ---------------------------------------------------------------- the Compare form
@dataclass(frozen=True)
class ComparePlan:
    """Two runs into one grid and the pair Compare opens on: each run's `fragility-tui run`
    arguments and the model name its cells are recorded under."""

    grid: str
    a: str  # model A's name in the grid
    b: str  # model B's name (A's quantised build: A+int8 / A+int4)
    argv_a: tuple[str, ...]
    argv_b: tuple[str, ...]


def grid_model_name(spec: str, quantize: str | None = None) -> str:
    """The name a run records a model under, as runners/models.resolve_spec and
    runners/models/prepare.py name it (tests/tui/test_compare_form.py holds them to agree): an
    alias by itself, a .gguf file by its stem, a folder by its own name, a hub id without
    its @revision; a quantised build gets +int8 / +int4."""
    from fragility_tui.model_aliases import ALIASES

    if spec in ALIASES:
        name = spec
    elif spec.endswith(".gguf"):
        name = Path(spec).stem
    elif Path(spec).expanduser().is_dir():
        name = Path(spec).expanduser().resolve().name
    else:
        name = spec.split("@")[0]
    return f"{name}+{quantize}" if quantize else name


def check_compare_form(form: dict, cwd: Path,
                       db_path: str | None) -> tuple[ComparePlan | None, list[str]]:
    """(the plan, or None; problems, each naming its field). `form`: model_a, model_b,
    b_build ("" = model B as typed, "int8" / "int4" = A's quantised build), items, grid,
    per_benchmark, configs, device: the same for both runs."""
    common = {key: form.get(key) or "" for key in ("items", "grid", "per_benchmark",
                                                   "configs", "device")}
    run_a, problems = check_run_form({**common, "model": form.get("model_a") or ""}, cwd)
    problems = [_field("model A", p) for p in problems]
    build = form.get("b_build") or ""
    if build:  # A's own quantised build: B's field is not read
        run_b = {**run_a, "quantize": build}
    else:
        run_b = {**run_a, "model": form.get("model_b") or ""}
        if not run_b["model"]:
            problems.append("fill in model B, or choose A's int8 or int4 build")
        else:
            run_b["model"], problem = _check_model(run_b["model"], cwd)
            problems += [f"model B: {problem}"] if problem else []
    if problems:
        return None, problems
    a, b = grid_model_name(run_a["model"]), grid_model_name(run_b["model"], build or None)
    if not build and run_a["model"] == run_b["model"]:
        return None, ["model B: the same model as A: choose A's int8 or int4 build, or "
                      "another model"]
    if a == b:
        return None, [f"model B: would be recorded as {a!r}, the name model A's cells get: "
                      "rename one folder, or run one with --name from the Runs pane"]
    return ComparePlan(run_a["grid"], a, b, tuple(run_argv(run_a, db_path)),
                       tuple(run_argv(run_b, db_path))), []


def _field(name: str, problem: str) -> str:
    """check_run_form's `model: …` / `fill in the model` said of model A."""
    if problem.startswith("model: "):
        return f"{name}: {problem.removeprefix('model: ')}"
    return problem.replace("fill in the model", f"fill in {name}")


def check_sequential_form(form: dict, cwd: Path, db_path: str | None):
    """The Compare form with "stop when settled": (a tui.sequence.SequencePlan, or None;
    problems, each naming its field). The models, items, grid, sample size, configs and
    device are checked as for two runs; margin, reference, seed and the budgets as
    `compare` checks its flags; the plan is one `fragility-tui compare A B --items ...`."""
    from fragility_tui.tui.sequence import SequencePlan, check_sequence_fields, compare_argv

    plan, problems = check_compare_form(form, cwd, db_path)
    settings, more = check_sequence_fields(form)
    problems = problems + more
    if problems:
        return None, problems
    argv_a, argv_b = list(plan.argv_a), list(plan.argv_b)
    spec_a = argv_a[argv_a.index("--model") + 1]
    build = form.get("b_build") or ""
    spec_b = f"{spec_a}+{build}" if build else argv_b[argv_b.index("--model") + 1]
    return SequencePlan(plan.grid, plan.a, plan.b,
                        tuple(compare_argv(spec_a, spec_b, argv_a, settings)), settings), []
