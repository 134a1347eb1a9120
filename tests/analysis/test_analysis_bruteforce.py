"""The vectorised engine against a plain-Python reading of SPEC §4–7 (and scipy's tau-b),
on random small grids with missing cells and config subsets."""

from __future__ import annotations

import math

from hypothesis import given
from scipy.stats import kendalltau
from test_analysis_properties import SETTINGS, cubes

from fragility_tui.analysis.report import build_report
from fragility_tui.harness.configs import CONFIG_BY_ID

FAST = dict(n_boot=20, k=3, n_random=5)


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def accuracy(cube, m, c):
    cells = [bool(cube.bits[m, i, c]) for i in range(len(cube.items)) if cube.present[m, i, c]]
    return sum(cells) / len(cells) if cells else None


def plain_margins(cube, c, defined, champs):
    """SPEC §6/§11: each champion's margin over the runner-up (best non-champion by
    accuracy), counted on the items both have; the smallest over tied runners-up."""
    rivals = {m: a for m, a in defined.items() if m not in champs}
    if not rivals:
        return {m: 0 for m in champs}
    runners = [m for m, a in rivals.items() if a == max(rivals.values())]
    out = {}
    for m in champs:
        per_runner = []
        for r in runners:
            paired = [i for i in range(len(cube.items))
                      if cube.present[m, i, c] and cube.present[r, i, c]]
            per_runner.append(sum(int(cube.bits[m, i, c]) - int(cube.bits[r, i, c])
                                  for i in paired))
        out[m] = min(per_runner)
    return out


def row_class(cube, m, i):
    if not cube.present[m, i].all():
        return "incomplete"
    if cube.bits[m, i].all():
        return "rc"
    return "rw" if not cube.bits[m, i].any() else "fragile"


@SETTINGS
@given(cubes())
def test_bands_pairs_configs_axes_match_plain_python(cube):
    r = build_report(cube, **FAST)
    models, n_items, configs = cube.models, len(cube.items), cube.configs
    ref = configs.index(cube.reference)
    acc = {(m, c): accuracy(cube, m, c) for m in range(len(models)) for c in range(len(configs))}
    cls = {(m, i): row_class(cube, m, i) for m in range(len(models)) for i in range(n_items)}

    # §5 bands
    for band in r["bands"]:
        m = models.index(band["model"])
        defined = [(acc[m, c], c) for c in range(len(configs)) if acc[m, c] is not None]
        assert close(band["reference"], acc[m, ref])
        if defined:
            lo = min(defined, key=lambda x: (x[0], x[1]))
            hi = max(defined, key=lambda x: (x[0], -x[1]))
            assert (band["min_config"], band["max_config"]) == (configs[lo[1]], configs[hi[1]])
            assert close(band["mean"], sum(a for a, _ in defined) / len(defined))
        else:
            assert band["min"] is band["max"] is band["mean"] is band["min_config"] is None
        complete = [i for i in range(n_items) if cls[m, i] != "incomplete"]
        rc = sum(cls[m, i] == "rc" for i in complete)
        assert close(band["robust_accuracy"], rc / len(complete) if complete else None)
        ref_ok = [i for i in complete if cube.bits[m, i, ref]]
        frag = sum(cls[m, i] == "fragile" for i in ref_ok)
        assert close(band["fragile_share_of_reference_correct"],
                     frag / len(ref_ok) if ref_ok else None)

    # §6 ranking and pairs
    ranked = sorted(range(len(models)), key=lambda m: (acc[m, ref] is None, -(acc[m, ref] or 0),
                                                       models[m]))
    assert r["grid"]["models"] == [models[m] for m in ranked]
    with_ref = [m for m in ranked if acc[m, ref] is not None]
    adjacent = [p for p in r["pairs"] if p["adjacent"]]
    assert [(p["a"], p["b"]) for p in adjacent] == [
        (models[a], models[b]) for a, b in zip(with_ref, with_ref[1:])]
    for p in adjacent:
        a, b = models.index(p["a"]), models.index(p["b"])
        paired = [i for i in range(n_items) if cube.present[a, i, ref] and cube.present[b, i, ref]]
        gap = sum(int(cube.bits[a, i, ref]) - int(cube.bits[b, i, ref]) for i in paired)
        robust = [i for i in range(n_items)
                  if cls[a, i] in ("rc", "rw") and cls[b, i] in ("rc", "rw")]
        a_only = sum(cls[a, i] == "rc" and cls[b, i] == "rw" for i in robust)
        b_only = sum(cls[a, i] == "rw" and cls[b, i] == "rc" for i in robust)
        assert (p["gap"], p["stable_items"], p["a_only_stable"], p["b_only_stable"]) == (
            gap, len(robust), a_only, b_only)
        # SPEC v3 §6: the part of Δ on paired items where either row is incomplete, and
        # the fragile gap counted on complete rows only, each by its own definition
        partial = [i for i in paired if "incomplete" in (cls[a, i], cls[b, i])]
        incomplete_gap = sum(int(cube.bits[a, i, ref]) - int(cube.bits[b, i, ref])
                             for i in partial)
        fragile_rows = [i for i in paired if i not in partial and i not in robust]
        fragile_gap = sum(int(cube.bits[a, i, ref]) - int(cube.bits[b, i, ref])
                          for i in fragile_rows)
        stable_gap = a_only - b_only
        assert (p["incomplete_gap"], p["fragile_gap"], p["stable_gap"]) == (
            incomplete_gap, fragile_gap, stable_gap)
        assert close(p["fragile_share"], fragile_gap / gap if gap else None)
        n = a_only + b_only
        assert p["detail"] == (f"too few stable disagreements to order (n = {n})"
                               if 2 * 0.5 ** n >= 0.05 else None)
        sign = lambda x: (x > 0) - (x < 0)  # noqa: E731
        ref_sign = sign(acc[a, ref] - acc[b, ref])
        rev = sum(1 for c in range(len(configs))
                  if acc[a, c] is not None and acc[b, c] is not None and ref_sign != 0
                  and sign(acc[a, c] - acc[b, c]) == -ref_sign)
        assert p["reversals"] == rev

    # §6 per config
    for entry in r["configs"]:
        c = configs.index(entry["config"])
        defined = {m: acc[m, c] for m in range(len(models)) if acc[m, c] is not None}
        best = max(defined.values()) if defined else None
        champs = sorted((m for m, a in defined.items() if a == best), key=ranked.index)
        assert entry["champions"] == [models[m] for m in champs]
        margins = plain_margins(cube, c, defined, champs)
        assert entry["margins"] == {models[m]: v for m, v in margins.items()}
        assert entry["margin_items"] == (min(margins.values()) if margins else None)
        both = [m for m in range(len(models)) if acc[m, c] is not None and acc[m, ref] is not None]
        x, y = [acc[m, ref] for m in both], [acc[m, c] for m in both]
        tau = kendalltau(x, y).statistic if len(both) >= 2 else float("nan")
        assert close(entry["kendall_tau"], None if math.isnan(tau) else float(tau))

    # §7 axes
    for model, axes in r["axes"]["per_model"].items():
        m = models.index(model)
        base = [i for i in range(n_items) if cls[m, i] != "incomplete" and cube.bits[m, i, ref]]
        # always order, format, scoring and all; any other axis where it holds a config
        # besides the reference (here only stem: the paper set's cloze stems)
        optional = [x for x in ("stem",) if sum(_in_axis(x, cid, cube.reference)
                                                for cid in configs) > 1]
        assert list(axes) == ["order", "format", "scoring", "all", *optional]
        for axis, value in axes.items():
            hood = [c for c, cid in enumerate(configs) if _in_axis(axis, cid, cube.reference)]
            if len(hood) <= 1 or not base:
                assert value is None
                continue
            kept = sum(all(cube.bits[m, i, c] for c in hood) for i in base)
            assert close(value, kept / len(base))


def _paper_axes(cid):
    """SPEC v5 §2b's axes of a paper-set config: a generation config's order, format and
    scoring; a cloze config's scoring and stem (no order, no format)."""
    cfg = CONFIG_BY_ID[cid]
    if cfg.order is None:
        return {"scoring": "likelihood", "stem": cfg.format.removeprefix("cloze_")}
    return {"order": cfg.order, "format": cfg.format, "scoring": "generate"}


def _in_axis(axis, cid, reference="o0.letter"):
    """SPEC §7 read literally: the reference, or a config that agrees with it on every axis
    but `axis` (equal levels, or either lacks the axis); a reference without an order or a
    format counts as o0 and letter."""
    if axis == "all" or cid == reference:
        return True
    ref, cfg = {"order": "o0", "format": "letter", **_paper_axes(reference)}, _paper_axes(cid)
    return all(ref[a] == cfg[a] for a in set(ref) & set(cfg) - {axis})


def test_margins_are_paired_with_the_runner_up_not_over_items_every_model_has():
    """A partial grid where the two readings differ: counted over the items all three
    models have (item 1 only) the champion's margin would be 0; SPEC §11 pairs the
    champion with the runner-up (m2, by accuracy) on the items both have (items 1-2): 1.
    A tied pair of champions checks the per-champion pairing too."""
    from analysis_grids import make_cube

    cube = make_cube({"m1": ["1", "1", "1", "0"],   # 3/4, champion
                      "m2": ["1", "0", ".", "."],   # 1/2, runner-up
                      "m3": ["0", ".", "0", "0"]},  # 0/3
                     ["b1"] * 4, configs=("o0.letter",))
    entry = build_report(cube, **FAST)["configs"][0]
    assert entry["champions"] == ["m1"] and entry["margins"] == {"m1": 1}
    assert plain_margins(cube, 0, {0: 0.75, 1: 0.5, 2: 0.0}, [0]) == {0: 1}

    # tied champions a and b (2/3 each) are each paired with the runner-up c (1/3):
    # a and c share items 1 and 3 (1 - 1 = 0), b and c share items 3 and 4 (1 - 0 = 1)
    tied = make_cube({"a": ["1", "1", "0", "."],
                      "b": [".", "1", "1", "0"],
                      "c": ["1", ".", "0", "0"]},
                     ["b1"] * 4, configs=("o0.letter",))
    entry = build_report(tied, **FAST)["configs"][0]
    assert entry["champions"] == ["a", "b"]
    assert entry["margins"] == {"a": 0, "b": 1} and entry["margin_items"] == 0
    assert plain_margins(tied, 0, {0: 2 / 3, 1: 2 / 3, 2: 1 / 3}, [0, 1]) == {0: 0, 1: 1}


def test_with_a_cloze_reference_the_stems_are_the_stem_axis_not_format():
    """SPEC §7 with reference cloze_qa (the example hypothesis found the old reading of
    the axes wrong on): scoring = {cloze_qa, o0.letter}, stem = {cloze_qa, cloze_bare},
    and no order or format neighbourhood (null)."""
    import numpy as np

    from fragility_tui.analysis.basis import Cube

    F, T = False, True
    bits = np.array([[[F, F, F, F, F, F], [F, F, F, F, T, F], [T, F, F, T, F, T]],
                     [[F, T, F, F, T, T], [F, T, T, F, T, F], [T, F, F, T, F, F]]])
    configs = ("o0.letter", "o0.paren", "o0.digit", "o0.instruct", "cloze_qa", "cloze_bare")
    cube = Cube(models=("m0", "m1"), items=("b1/i0", "b1/i1", "b1/i2"), configs=configs,
                bits=bits, present=np.ones_like(bits), reference="cloze_qa",
                benchmarks=np.array(["b1"] * 3, dtype=object))
    assert [c for c in configs if _in_axis("stem", c, "cloze_qa")] == ["cloze_qa", "cloze_bare"]
    assert [c for c in configs if _in_axis("scoring", c, "cloze_qa")] == ["o0.letter",
                                                                          "cloze_qa"]
    per_model = build_report(cube, **FAST)["axes"]["per_model"]
    # m1 is right under cloze_qa on items 0 and 1; cloze_bare keeps item 0, o0.letter neither
    assert per_model["m1"] == {"order": None, "format": None, "scoring": 0.0, "all": 0.0,
                               "stem": 0.5}
