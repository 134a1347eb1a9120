"""The 26 harness configurations of SPEC §2 as data, and the per-item option shuffles.

Canonical order (used for tie-breaks and every listing): o0.letter, o0.paren, o0.digit,
o0.instruct, o1.letter, ..., o5.instruct, cloze_qa, cloze_bare.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from functools import lru_cache

from fragility_tui.harness.config_axes import (CLOZE_FORMATS, GENERATION_FORMATS, LIK_IDS,
                                               ORDERS, canonical_order, modifier_problem,
                                               runner_parts)
from fragility_tui.items.item import N_OPTIONS  # re-exported: the harness shuffles four options

REFERENCE = "o0.letter"


@dataclass(frozen=True)
class Config:
    config_id: str
    order: str | None  # "o0".."o5"; None for the order-invariant cloze configs
    format: str  # letter | paren | digit | instruct | cloze_qa | cloze_bare
    scoring: str  # generate | likelihood (cloze) | letter_lik (SPEC v5 §2 extensions)
    is_reference: bool
    # the extension modifiers (SPEC v5 §2): None = the model's own setting
    bos: str | None = None  # "on" (+bos) | "off" (+nobos)
    template: str | None = None  # "raw" (+raw) | "chat" (+chat)
    shots: int = 0  # +kN: solved examples before the question

    @property
    def shuffle_index(self) -> int:
        """k of the order (0 = native); cloze configs score options in native order."""
        return int(self.order[1:]) if self.order else 0

    @property
    def base_id(self) -> str:
        """The id without its modifiers (o2.digit.lik of o2.digit.lik+raw+k5)."""
        return self.config_id.split("+", 1)[0]

    @property
    def scores_options(self) -> bool:
        """Scored by log-likelihoods (cloze and letter likelihood), not by generation."""
        return self.scoring != "generate"


def _build() -> tuple[Config, ...]:
    gen = [
        Config(f"{o}.{f}", o, f, "generate", f"{o}.{f}" == REFERENCE)
        for o in ORDERS
        for f in GENERATION_FORMATS
    ]
    cloze = [Config(f, None, f, "likelihood", False) for f in CLOZE_FORMATS]
    return tuple(gen + cloze)


CONFIGS: tuple[Config, ...] = _build()
CONFIG_IDS: tuple[str, ...] = tuple(c.config_id for c in CONFIGS)
CONFIG_BY_ID: dict[str, Config] = {c.config_id: c for c in CONFIGS}
CONFIG_POSITION: dict[str, int] = {cid: i for i, cid in enumerate(CONFIG_IDS)}


def get_config(config_id: str) -> Config:
    """The config of any id our runner renders: the paper's 26, the letter-likelihood
    configs and either with modifiers (KeyError names what is known otherwise)."""
    config = CONFIG_BY_ID.get(config_id)
    return config if config is not None else _extension(config_id)


@lru_cache(maxsize=4096)
def _extension(config_id: str) -> Config:
    parts = runner_parts(config_id)
    problem = None if parts is None else modifier_problem(config_id)
    if parts is None or problem:
        raise KeyError(problem or f"unknown config id {config_id!r}; known: the paper set "
                       f"({', '.join(CONFIG_IDS)}), {{order}}.{{letter|paren|digit}}.lik, "
                       "each with modifiers +bos|+nobos, +raw|+chat, +kN in that order")
    base, bos, template, shots = parts
    if base in CLOZE_FORMATS:
        order, fmt, scoring = None, base, "likelihood"
    else:
        order, fmt, *lik = base.split(".")
        scoring = "letter_lik" if lik else "generate"
    return Config(config_id, order, fmt, scoring, False,
                  {None: None, "+bos": "on", "+nobos": "off"}[bos],
                  {None: None, "+raw": "raw", "+chat": "chat"}[template], shots or 0)


def default_reference(config_ids) -> str | None:
    """The reference a grid with these configs is measured against (SPEC §2b): o0.letter
    when it is among them, else the first of them in canonical order (a grid imported from
    another harness's log has no o0.letter); None for no configs."""
    present = canonical_order(config_ids)
    if REFERENCE in present:
        return REFERENCE
    return present[0] if present else None


GROUPS_HELP = ("ids like o0.letter, cloze_qa, o2.digit.lik, o0.letter+nobos, or a group: "
               "paper (the 26), lik (the 18 letter-likelihood), generate, likelihood, o0..o5, "
               "letter, paren, digit, instruct; a group takes modifiers too: paper+nobos, "
               "lik+k5")


def _group(token: str) -> list[str] | None:
    """The ids a group name stands for (None: not a group)."""
    if token == "paper":
        return list(CONFIG_IDS)
    if token == "lik":
        return list(LIK_IDS)
    matched = [c.config_id for c in CONFIGS if token in (c.scoring, c.order, c.format)]
    return matched or None


def parse_config_list(text: str | None, *, any_id: bool = False) -> list[str]:
    """Parse a comma-separated --configs value into canonical order (None/'' = the 26).

    Accepts any id our runner renders (the paper set, `.lik`, with modifiers), the groups
    `paper` and `lik`, the paper set's shorthands 'generate', 'likelihood', an order ('o3')
    or a format ('paren'), and a group or id followed by modifiers (`paper+nobos`,
    `lik+k5`); with `any_id` (a grid's configs in view, not a run's) also any other
    well-formed id (imported, free-form: whether the grid has it is the caller's check).
    Raises ValueError naming the unknown entry.
    """
    from fragility_tui.harness.config_axes import config_id_problem

    if not text:
        return list(CONFIG_IDS)
    chosen: set[str] = set()
    for raw in text.split(","):
        token = raw.strip()
        if not token:
            continue
        head, plus, modifiers = token.partition("+")
        group = None if token in CONFIG_BY_ID else _group(head)
        ids = [token] if group is None else [f"{c}{plus}{modifiers}" for c in group]
        for config_id in ids:
            chosen.add(config_id)
            try:
                get_config(config_id)
                continue
            except KeyError as exc:
                problem = exc.args[0] if runner_parts(config_id) else None
            if problem is None and any_id and config_id_problem(config_id) is None:
                continue  # an imported or free-form id of a grid
            order = " (modifiers go in this order: +bos|+nobos, +raw|+chat, +kN)" if plus else ""
            raise ValueError(f"unknown config {token!r}: {problem}" if problem else
                             f"unknown config {token!r}{order}; use {GROUPS_HELP}")
    return canonical_order(chosen)


IDENTITY = tuple(range(N_OPTIONS))
_NON_IDENTITY = tuple(p for p in itertools.permutations(range(N_OPTIONS)) if p != IDENTITY)


@lru_cache(maxsize=65536)
def item_shuffles(seed: int, item_uid: str) -> tuple[tuple[int, ...], ...]:
    """The six orders of an item: index 0 is the identity, 1..5 five distinct shuffles.

    The 23 non-identity permutations are ranked by sha256(seed, item_uid, perm) and the
    first five taken: reproducible from (seed, item_uid) alone, independent of numpy or
    Python versions, and distinct by construction.
    A permutation p lists native option indices in display order: position j shows
    choices[p[j]].
    """
    def key(p: tuple[int, ...]) -> bytes:
        return hashlib.sha256(f"{seed}\x1f{item_uid}\x1f{''.join(map(str, p))}".encode()).digest()

    return (IDENTITY,) + tuple(sorted(_NON_IDENTITY, key=key)[:5])


def permutation_for(seed: int, item_uid: str, config_id: str) -> tuple[int, ...]:
    return item_shuffles(seed, item_uid)[get_config(config_id).shuffle_index]


def perm_to_str(perm: tuple[int, ...]) -> str:
    return "".join(map(str, perm))


def perm_from_str(text: str) -> tuple[int, ...]:
    return tuple(int(ch) for ch in text)
