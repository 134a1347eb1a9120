"""The run provenance schema (fragility_tui/schemas/provenance.py): old records without the
newer fields, records from a newer runner, and fields of the wrong JSON type."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from helpers import REPO

from fragility_tui.provenance import provenance_card
from fragility_tui.schemas.fields import SchemaError
from fragility_tui.schemas.provenance import (PROVENANCE_SCHEMA, RecordedRun, RunProvenance)

SHIPPED = REPO / "sample_grids" / "starter-real.provenance.json"


def _shipped_runs() -> list[dict]:
    return json.loads(SHIPPED.read_text())["runs"]


def test_every_shipped_run_reads_with_nothing_unknown_in_its_models():
    runs = _shipped_runs()
    assert runs
    for row in runs:
        run = RecordedRun.from_row(row)
        p = run.provenance
        assert p.schema == 1  # recorded before the field existed
        assert p.configs and p.models and p.items == 265
        for m in p.models.values():
            assert m.weights_sha256 and m.gguf.file.endswith(".gguf")
            assert m.extra == {}, m.extra  # the schema declares every field the runner wrote


def test_an_old_record_lacks_the_newer_fields_and_the_card_says_so():
    p = RunProvenance.from_json({"items": 4, "models": {"m": {"source": "gguf:m.gguf"}}})
    m = p.models["m"]
    assert (p.sessions, p.batching, p.fragility_tui, p.load_report.files) == ((), {}, None, ())
    assert m.backend is None and m.gguf is None and m.refused_configs == {}
    card = provenance_card({"run_id": "r", "status": "finished",
                            "provenance": {"models": {"m": {"source": "gguf:m.gguf"}}}})
    block = card.split("Model m")[1].split("Runtime")[0]
    assert "weights sha256   not recorded" in block and "None" not in block
    assert "backend" not in block and "fragility-tui" not in card and "Session" not in card


def test_an_empty_or_null_provenance_reads_as_nothing_recorded():
    for value in (None, {}):
        p = RunProvenance.from_json(value)
        assert p == RunProvenance()
    run = RecordedRun.from_row({"run_id": "r", "provenance": None, "spec": None})
    assert run.provenance == RunProvenance() and run.spec.configs == ()


def test_a_newer_record_keeps_unknown_fields_and_still_gives_a_card():
    row = {"run_id": "r", "status": "finished", "future_column": 1, "provenance": {
        "schema": PROVENANCE_SCHEMA + 1, "items": 2, "tomorrow": {"x": 1},
        "models": {"m": {"source": "hub:a/b", "new_thing": [1]}},
        "sessions": [{"status": "finished", "power_w": 300}]}}
    run = RecordedRun.from_row(row)
    assert run.extra == {"future_column": 1}
    assert run.provenance.schema == PROVENANCE_SCHEMA + 1
    assert run.provenance.extra == {"tomorrow": {"x": 1}}
    assert run.provenance.models["m"].extra == {"new_thing": [1]}
    assert run.provenance.sessions[0].extra == {"power_w": 300}
    card = provenance_card(row)
    assert "2 items from" in card and "source           hub:a/b" in card


@pytest.mark.parametrize("provenance, where", [
    ({"models": ["m"]}, "provenance.models"),
    ({"models": {"m": {"gguf": "file.gguf"}}}, "provenance.models.m.gguf"),
    ({"models": {"m": {"quantization": ["int4"]}}}, "provenance.models.m.quantization"),
    ({"sessions": {"started_at": "t"}}, "provenance.sessions"),
    ({"sessions": [{"gpu": "H200"}]}, "provenance.sessions[0].gpu"),
    ({"batching": {"m": {"items_per_batch": [1, 2]}}}, "provenance.batching.m.items_per_batch"),
    ({"configs": "o0.letter"}, "provenance.configs"),
    ({"load_report": {"warnings": "mixed splits"}}, "provenance.load_report.warnings"),
    ({"schema": "2"}, "provenance.schema"),
    ({"schema": 0}, "provenance.schema"),
])
def test_a_field_of_the_wrong_type_is_an_error_naming_it(provenance, where):
    with pytest.raises(SchemaError) as caught:
        RecordedRun.from_row({"run_id": "r", "provenance": provenance})
    assert caught.value.where == f"run.{where}"
    assert str(caught.value).startswith(f"run.{where}: expected")


def test_the_card_of_a_record_of_the_wrong_type_names_the_field_instead_of_failing():
    card = provenance_card({"run_id": "r", "status": "finished", "grid": "g", "seconds": 2.0,
                            "provenance": {"items": 4, "models": ["m"]}})
    assert card.startswith("Run r  status finished  grid g\n")
    assert "unreadable record: run.provenance.models: expected an object, got list" in card
    assert "seconds 2.0" in card and "4 items" not in card  # the row's columns still show


def test_a_model_backend_that_is_not_an_object_is_read_as_none():
    # documented tolerance: such runs show no backend line, as before the field existed
    p = RunProvenance.from_json({"models": {"m": {"backend": "transformers"}}})
    assert p.models["m"].backend is None


def test_every_field_the_runner_writes_is_declared():
    """A field the runner starts writing is declared here too (else it lands in `extra`)."""
    from fragility_tui.items.item import LoadReport
    from runners.models.provenance import new_session, run_provenance
    from runners.plan.budget import TokenBudget

    spec = SimpleNamespace(max_new_tokens=16, seed=0, per_benchmark=None, items=["x.jsonl"],
                           configs=["o0.letter"], batch_size=None, batch_tokens=None,
                           threads=1, prefix_reuse=True, overlap=False, prompt_mode=None,
                           backend="transformers")
    load = LoadReport("x.jsonl", read=3, kept=2, files=["a (test)"], warnings=["w"])
    load.exclude("too few choices")
    doc = run_provenance(spec, [1, 2], "h", load, {}, {"padding": "p", "decoding": "d",
                                                        "likelihood": "l"})
    batching = dict(TokenBudget(4096, "measured").record(), layout="tree", tokens={})
    doc.update(cuda_allocator=None, device="cpu", tokens=1, seconds=1.0, ended_at="t",
               batching={"m": batching}, sessions=[new_session(False)])
    p = RunProvenance.from_json(doc)
    assert p.extra == {} and p.load_report.extra == {} and p.batching["m"].extra == {}
    assert p.sessions[0].extra == {} and p.fragility_tui.extra == {}
    assert p.load_report.excluded == {"too few choices": 1}


def test_the_run_card_says_which_axes_its_configs_vary():
    """Issue 56 (5): the card lists the configs' axes, each level with its count."""
    from fragility_tui.harness.config_axes import axes_summary
    from fragility_tui.harness.configs import parse_config_list
    from fragility_tui.provenance import provenance_card

    configs = parse_config_list("o0.letter,o0.letter+nobos,o0.letter.lik")
    summary = axes_summary(configs)
    assert summary == "scoring: generate 2, letter_lik 1; bos: default 2, off 1"
    assert axes_summary(["o0.letter"]) == "one setting"
    card = provenance_card({"run_id": "r", "spec": {"configs": configs},
                            "provenance": {"configs": configs, "config_axes": summary}})
    assert f"config axes      {summary}" in card
