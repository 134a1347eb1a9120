"""Issue 24 (7): the Bands chart and the Axes per-model chart keep an int8 and an int4 build
of one model apart (both were cut to `smollm2-135m-instruct+in`)."""

from __future__ import annotations

from fragility_tui.analysis.classify import Band
from fragility_tui.tui.panes.axes import AxesPane
from fragility_tui.tui.panes.bands import BandsPane

MODELS = ["smollm2-135m-instruct+int8", "smollm2-135m-instruct+int4",
          "smollm2-135m-instruct", "gemma3-270m"]


def labels(text, skip: int) -> list[str]:
    lines = text.plain.splitlines()[skip:]
    return [line.split("  ")[0].split(" ")[0] for line in lines if line.strip()]


def test_bands_chart_keeps_quantised_builds_apart():
    bands = [Band(model=m, reference=0.4, min=0.2, min_config="o1.paren", max=0.6,
                  max_config="cloze_qa", spread=0.4, mean=0.4, robust_accuracy=0.1,
                  fragile_share_of_reference_correct=0.5, robust_correct=1, robust_wrong=1,
                  fragile=2, incomplete=0, reference_correct=2) for m in MODELS]
    shown = labels(BandsPane().chart(bands), skip=1)
    assert len(shown) == 4 and len(set(shown)) == 4, shown
    assert shown[0].endswith("int8") and shown[1].endswith("int4")


def test_axes_per_model_chart_keeps_quantised_builds_apart():
    per_model = {m: {"all": 0.1} for m in MODELS}
    text = AxesPane.chart(per_model, {"all": 0.1}).plain
    after = text.split("all axes, per model\n", 1)[1]
    shown = [line.split(" ")[0] for line in after.splitlines() if line.strip()]
    assert len(shown) == 4 and len(set(shown)) == 4, shown
