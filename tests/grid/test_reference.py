"""One owner for the reference: its choice (`choose_reference`) and the check that it is in
view (`check_reference`), which the cube, the app's selection and the CLI all call."""

from __future__ import annotations

import pytest

from fragility_tui.errors import InputError
from fragility_tui.grid.reference import ReferenceNotInView, check_reference, choose_reference
from fragility_tui.grid.simulate import simulate_cube

MESSAGE = "the reference config o0.letter must be in view"


def test_every_caller_says_the_same_thing():
    from fragility_tui.tui.selection import Selection

    cube = simulate_cube(3, 10, seed=0)
    without = cube.select(configs=["o1.letter", "cloze_qa"])
    with pytest.raises(ReferenceNotInView, match=MESSAGE):
        without.reference_index  # noqa: B018
    with pytest.raises(ReferenceNotInView, match=MESSAGE):
        Selection(configs=("o1.letter",)).apply(cube)
    with pytest.raises(InputError, match="field '--configs': " + MESSAGE + r".*\(--reference"):
        check_reference("o0.letter", ("o1.letter",), field="--configs",
                        hint="--reference picks another")
    # analysis callers catch ValueError, the CLI InputError: it is both
    assert issubclass(ReferenceNotInView, ValueError) and issubclass(ReferenceNotInView, InputError)
    check_reference("o0.letter", cube.configs)  # in view: nothing raised


def test_choose_reference_defaults_and_refuses():
    cube = simulate_cube(3, 10, seed=0)
    assert choose_reference(cube).reference == "o0.letter"
    cloze = cube.select(configs=["cloze_qa", "cloze_bare"])
    assert choose_reference(cloze).reference == "cloze_qa"  # the first in canonical order
    assert choose_reference(cube, "o2.paren").reference == "o2.paren"
    with pytest.raises(InputError, match="field '--reference': unknown config 'o9'"):
        choose_reference(cube, "o9")
    with pytest.raises(InputError, match="the grid has no cells for o0.letter"):
        choose_reference(cloze, "o0.letter")
