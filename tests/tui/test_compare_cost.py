"""The Compare pane's cost line shows Store.model_costs, the figures `report` prints."""

from __future__ import annotations

from fragility_tui.tui.panes.compare import cost_text


def test_cost_line_formats_the_store_figures_and_says_when_there_are_none():
    costs = {"a": {"seconds_per_item": 10.587, "tokens_per_item": 2415.6},
             "synthetic": {"seconds_per_item": None, "tokens_per_item": None}}
    assert cost_text(costs, "a") == "10.59 s/item · 2,416 tokens/item"
    assert cost_text(costs, "synthetic").startswith("no run recorded")
    assert cost_text(costs, "absent").startswith("no run recorded")


def test_the_shipped_real_grid_has_a_cost_for_every_model(samples_db):
    from fragility_tui.store.store import Store

    costs = Store(samples_db).model_costs("starter-real")
    assert len(costs) == 4
    for model, cost in costs.items():
        assert "s/item" in cost_text(costs, model), model
