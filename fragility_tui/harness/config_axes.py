"""Configs as data (SPEC v5 §2b): what a config id says about its axes, and the canonical
order of any set of config ids.

Three kinds of id:
- our runner's: the paper set's 26 (`o0.letter` … `cloze_bare`), the letter-likelihood
  configs `{order}.{format}.lik`, each optionally followed by modifiers in the fixed order
  `+bos|+nobos`, `+raw|+chat`, `+kN`; their axes follow from the id alone;
- imported (another harness's log): `{harness}:{task}:{metric}`, then `+chat` when the
  harness applied the chat template, `+kN` when the log says N shots, `+eN` for epoch N;
  the id gives harness, task, metric, shots (and chat, epoch), the log the rest;
- any other id a long-format file brings: axes only from the file (`--config-axes`,
  `axis_<name>` columns).

Axis levels are strings; an axis a config does not state is absent, or `unknown`.
Nothing here imports numpy: the app's selection and the CLI's argument checks use it.
"""

from __future__ import annotations

import re
from functools import lru_cache

ORDERS = ("o0", "o1", "o2", "o3", "o4", "o5")
GENERATION_FORMATS = ("letter", "paren", "digit", "instruct")
CLOZE_FORMATS = ("cloze_qa", "cloze_bare")
LIK_FORMATS = ("letter", "paren", "digit")
PAPER_IDS: tuple[str, ...] = tuple(f"{o}.{f}" for o in ORDERS for f in GENERATION_FORMATS) \
    + CLOZE_FORMATS
LIK_IDS: tuple[str, ...] = tuple(f"{o}.{f}.lik" for o in ORDERS for f in LIK_FORMATS)
RUNNER_HARNESS = "fragility-tui"
UNKNOWN = "unknown"

# SPEC §7's list: the axes reported in this order, then any other axis by name.
AXIS_ORDER = ("order", "format", "scoring", "stem", "bos", "template", "shots", "harness",
              "task", "metric", "chat", "epoch")
# The levels a reference lacking the axis counts as (§7: the paper reference's levels).
REFERENCE_DEFAULTS = {"order": "o0", "format": "letter"}

_BASE_POSITION = {cid: k for k, cid in enumerate(PAPER_IDS + LIK_IDS)}
_MODIFIER = re.compile(r"^(?P<base>[^+]+)(?P<bos>\+bos|\+nobos)?(?P<tpl>\+raw|\+chat)?"
                       r"(?:\+k(?P<shots>0|[1-9][0-9]{0,3}))?$")
_IMPORTED = re.compile(r"^(?P<harness>[^:+\s]+):(?P<task>[^:+\s]+):(?P<metric>[^:+\s]+)"
                       r"(?P<chat>\+chat)?(?:\+k(?P<shots>0|[1-9][0-9]{0,3}))?"
                       r"(?:\+e(?P<epoch>[1-9][0-9]{0,3}))?$")
_BOS_RANK = {None: 0, "+bos": 1, "+nobos": 2}
_TEMPLATE_RANK = {None: 0, "+raw": 1, "+chat": 2}
MAX_ID_LENGTH = 200


def runner_parts(config_id: str):
    """(base, bos, template, shots) of a runner id, or None when it is not one."""
    match = _MODIFIER.match(config_id)
    if match is None or match["base"] not in _BASE_POSITION:
        return None
    shots = None if match["shots"] is None else int(match["shots"])
    return match["base"], match["bos"], match["tpl"], shots


def modifier_problem(config_id: str) -> str | None:
    """Why a runner id's modifiers do not apply to its base (None when they do): a cloze
    prompt is never templated (SPEC v5 §2 names +raw/+chat for the configs whose prompt is
    a generation prompt: the generation configs, and so the .lik configs)."""
    parts = runner_parts(config_id)
    if parts is None:
        return None
    base, _, template, _ = parts
    if template and base in CLOZE_FORMATS:
        return f"{config_id}: {template} does not apply to a cloze config (never templated)"
    return None


def is_runner_config(config_id: str) -> bool:
    """Whether our runner can render this id (paper set, `.lik`, with modifiers)."""
    return runner_parts(config_id) is not None


def is_paper_config(config_id: str) -> bool:
    return config_id in _BASE_POSITION and _BASE_POSITION[config_id] < len(PAPER_IDS)


@lru_cache(maxsize=4096)
def _derived_axes(config_id: str) -> tuple[tuple[str, str], ...]:
    parts = runner_parts(config_id)
    if parts is not None:
        base, bos, template, shots = parts
        if base in CLOZE_FORMATS:
            axes = {"scoring": "likelihood", "stem": base.split("_", 1)[1]}
        else:
            order, fmt, *lik = base.split(".")
            axes = {"order": order, "format": fmt,
                    "scoring": "letter_lik" if lik else "generate"}
        axes.update(harness=RUNNER_HARNESS,
                    bos={None: "default", "+bos": "on", "+nobos": "off"}[bos],
                    template={None: "default", "+raw": "raw", "+chat": "chat"}[template],
                    shots=str(shots or 0))
        return tuple(axes.items())
    match = _IMPORTED.match(config_id)
    if match is not None:
        axes = (("harness", match["harness"]), ("task", match["task"]),
                ("metric", match["metric"]),
                ("shots", match["shots"] if match["shots"] is not None else UNKNOWN))
        axes += (("chat", "on"),) if match["chat"] else ()
        return axes + ((("epoch", match["epoch"]),) if match["epoch"] else ())
    return ()


def derived_axes(config_id: str) -> dict[str, str]:
    """The axes a config id states by itself (empty for a free-form id)."""
    return dict(_derived_axes(config_id))


def merge_axes(config_id: str, stated: dict | None) -> dict[str, str]:
    """A config's axes: what its id says, overridden by what was stored with it."""
    axes = derived_axes(config_id)
    if stated:
        axes.update({str(k): str(v) for k, v in stated.items()})
    return axes


def imported_config_id(harness: str, task: str, metric: str, shots: int | None,
                       epoch: int | None = None, chat: bool = False) -> str:
    """SPEC §2b's id of a config read from a log: `{harness}:{task}:{metric}[+kN]`; `+chat`
    before it when the harness applied the model's chat template (the same task with and
    without it are two configs), and `+eN` after it for epoch N of a log that ran its
    samples several times (replicates, axis epoch)."""
    parts = []
    for name, value in (("harness", harness), ("task", task), ("metric", metric)):
        clean = re.sub(r"[:+\s]+", "_", str(value).strip()) or UNKNOWN
        parts.append(clean)
    suffix = "+chat" if chat else ""
    suffix += f"+k{int(shots)}" if shots is not None else ""
    suffix += f"+e{int(epoch)}" if epoch is not None else ""
    return ":".join(parts) + suffix


@lru_cache(maxsize=65536)
def config_sort_key(config_id: str) -> tuple:
    """§2b's canonical order: the paper set, then runner extensions by base and modifiers,
    then imported configs by (harness, task, metric, shots), then free-form ids."""
    parts = runner_parts(config_id)
    if parts is not None:
        base, bos, template, shots = parts
        if bos is None and template is None and shots is None and is_paper_config(base):
            return (0, _BASE_POSITION[base], 0, 0, 0, "", "", "", 0, "")
        return (1, _BASE_POSITION[base], _BOS_RANK[bos], _TEMPLATE_RANK[template],
                shots or 0, "", "", "", 0, "")
    match = _IMPORTED.match(config_id)
    if match is not None:
        shots = int(match["shots"]) if match["shots"] is not None else 0
        epoch = int(match["epoch"]) if match["epoch"] else 0
        return (2, 0, 0, 0, 0, match["harness"], match["task"], match["metric"],
                shots, f"{int(bool(match['chat']))}{epoch:06d}")
    return (3, 0, 0, 0, 0, "", "", "", 0, config_id)


def canonical_order(config_ids) -> list[str]:
    """Distinct ids in canonical order."""
    return sorted(set(config_ids), key=config_sort_key)


def config_id_problem(config_id) -> str | None:
    """Why a string cannot be a config id (None when it can): ids are written to every
    export and shown in the terminal, so no control characters, no surrounding spaces."""
    problem = _text_problem(config_id, "config id")
    if problem:
        return problem
    if _LOOKS_OURS.match(config_id) and not is_runner_config(config_id):
        return (f"unknown config id {config_id!r}: it reads as one of our runner's ids but is "
                "not one (orders o0-o5; formats letter, paren, digit, instruct; cloze_qa, "
                "cloze_bare; .lik; modifiers +bos|+nobos, +raw|+chat, +kN in that order)")
    return None


def _text_problem(text, what: str) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return "empty value"
    if text != text.strip():
        return f"{what} {text!r} has surrounding spaces"
    if len(text) > MAX_ID_LENGTH:
        return f"{what} is {len(text)} characters (at most {MAX_ID_LENGTH})"
    if any(ch < " " or ch == "\x7f" or 0x80 <= ord(ch) < 0xa0 for ch in text):
        return f"{what} {text!r} contains control characters"
    return None


# An id that reads as our runner's (o7.letter, cloze_qna, o0.letter+k): a typo, not a
# free-form config of another harness.
_LOOKS_OURS = re.compile(r"^(o[0-9]+\.|cloze_|o0\b)")


def axis_levels_problem(config_id: str, axes) -> str | None:
    """Why a stated axes mapping is unusable (None when fine): a JSON object of
    non-empty axis names to scalar levels."""
    if not isinstance(axes, dict):
        return f"axes of {config_id!r} must be a JSON object of axis: level"
    for name, level in axes.items():
        if not isinstance(name, str) or not re.fullmatch(r"[a-z][a-z0-9_]{0,39}", name):
            return (f"axis name {name!r} of {config_id!r} must be lower-case letters, digits "
                    "and _ (at most 40)")
        if isinstance(level, bool) or not isinstance(level, (str, int, float)) or \
                (isinstance(level, str) and _text_problem(level, "level") is not None):
            return (f"axis {name!r} of {config_id!r} has level {level!r}: give a short string "
                    "or number")
    return None


def axes_agree(a: str | None, b: str | None) -> bool:
    """§7: two levels agree when equal, or when either is missing or `unknown`."""
    return a is None or b is None or a == UNKNOWN or b == UNKNOWN or a == b


def axis_neighbourhood(axis: str, reference_axes: dict, axes: dict) -> bool:
    """Whether a config with `axes` is in the §7 neighbourhood of `axis` around the
    reference: it agrees with the reference on every axis other than `axis` (a reference
    without an order or a format counts as o0 / letter)."""
    ref = {**REFERENCE_DEFAULTS, **reference_axes}
    return all(axes_agree(ref.get(name), axes.get(name))
               for name in set(ref) | set(axes) if name != axis)


def axes_in_view(all_axes) -> list[str]:
    """Every axis any of these configs carries, in §7's order then by name."""
    names = {name for axes in all_axes for name in axes}
    return [a for a in AXIS_ORDER if a in names] + sorted(names - set(AXIS_ORDER))


def select_by_axes(query: str, configs, axes_of) -> list[str]:
    """The configs (in the order given) matching every token of `query`: `axis=level`
    (e.g. harness=lm-eval, shots=0, order=o3), or text found in the id. An axis no config
    has, or a level no config has on it, is a ValueError naming the ones there are."""
    configs = list(configs)
    all_axes = {c: axes_of(c) for c in configs}
    chosen = configs
    for token in query.split():
        if "=" in token:
            axis, _, level = token.partition("=")
            levels = sorted({a[axis] for a in all_axes.values() if axis in a})
            if not levels:
                raise ValueError(f"no config has an axis {axis!r} (axes: "
                                 f"{', '.join(axes_in_view(all_axes.values()))})")
            if level not in levels:
                raise ValueError(f"no config has {axis}={level} ({axis}: {', '.join(levels)})")
            chosen = [c for c in chosen if all_axes[c].get(axis) == level]
        else:
            chosen = [c for c in chosen if token.casefold() in c.casefold()]
    return chosen


def axes_summary(configs) -> str:
    """The axes a set of configs varies, each level with its count, in words (a run card's
    line), e.g. `scoring: generate 24, likelihood 2, letter_lik 18; bos: default 44, off 2`."""
    from collections import Counter

    axes = [derived_axes(c) for c in configs]
    parts = []
    for axis in axes_in_view(axes):
        levels = Counter(a.get(axis, "-") for a in axes)
        if len(levels) > 1:
            parts.append(f"{axis}: " + ", ".join(f"{level} {n}" for level, n in levels.items()))
    return "; ".join(parts) or "one setting"
