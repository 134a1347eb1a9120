"""Named sources: resolution to hub files (download replaced by local Parquet), ids, offline."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fragility_tui.errors import InputError
from fragility_tui.items import sources
from fragility_tui.items.item import Item
from fragility_tui.items.loaders import load_items, load_many


def _write(path: Path, columns: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)
    return path


def _arc_rows(prefix: str) -> dict:
    return {"id": [f"{prefix}_1", f"{prefix}_2"],
            "question": ["Which toy rolls?", "Which toy floats?"],
            "choices": [{"text": ["a cube", "a ball", "a brick", "a book"], "label": list("ABCD")},
                        {"text": ["a stone", "a coin", "a cork"], "label": ["1", "2", "3"]}],
            "answerKey": ["B", "3"]}


def _hub(tmp_path: Path) -> dict[str, list[Path]]:
    """Tiny stand-ins for the hub files, in each dataset's own Parquet layout."""
    mmlu_rows = {"question": ["Toy algebra?", "Toy anatomy?", "More toy algebra?"],
                 "subject": ["abstract_algebra", "anatomy", "abstract_algebra"],
                 "choices": [["1", "2", "3", "4"], ["bone", "skin", "hair", "nail"], list("wxyz")],
                 "answer": [3, 0, 1]}
    return {
        "ARC-Challenge/test-*.parquet": [_write(tmp_path / "hub_arc/test-00000-of-00001.parquet",
                                               _arc_rows("ToyC"))],
        "ARC-Easy/validation-*.parquet": [_write(tmp_path / "hub_arce/validation-00000-of-00001.parquet",
                                                 _arc_rows("ToyE"))],
        "data/validation-*.parquet": [_write(
            tmp_path / "hub_hs/validation-00000-of-00001.parquet",
            {"ind": [4, 11], "activity_label": ["Juggling", "Baking"],
             "ctx_a": ["A man holds three balls.", "She mixes flour."], "ctx_b": ["he", ""],
             "ctx": ["A man holds three balls. he", "She mixes flour."],
             "endings": [["eats them.", "throws them up in turn.", "paints them.", "sits."],
                         ["It rains.", "She adds eggs.", "A car passes.", "He sleeps."]],
             "source_id": ["toy~1", "toy~2"], "split": ["val", "val"],
             "split_type": ["indomain", "zeroshot"], "label": ["1", "1"]})],
        "all/test-*.parquet": [_write(tmp_path / "hub_mmlu/test-00000-of-00001.parquet", mmlu_rows)],
        # the same rows in two shards: ids must continue across them
        "all/dev-*.parquet": [
            _write(tmp_path / "hub_mmlu/dev-00000-of-00002.parquet",
                   {k: v[:2] for k, v in mmlu_rows.items()}),
            _write(tmp_path / "hub_mmlu/dev-00001-of-00002.parquet",
                   {k: v[2:] for k, v in mmlu_rows.items()})],
        "multiple_choice/validation-*.parquet": [_write(
            tmp_path / "hub_tqa/validation-00000-of-00001.parquet",
            {"question": ["Do toys dream?", "Is the moon cheese?"],
             "mc1_targets": [{"choices": ["No.", "Yes.", "Only teddies.", "Every night.", "Sometimes."],
                              "labels": [1, 0, 0, 0, 0]},
                             {"choices": ["No.", "Yes."], "labels": [1, 0]}],
             "mc2_targets": [{"choices": ["No."], "labels": [1]}, {"choices": ["No."], "labels": [1]}]})],
    }


@pytest.fixture
def hub(tmp_path, monkeypatch):
    """Replaces the download with the local files; records the calls made."""
    files = _hub(tmp_path)
    calls = []

    def fake_download(repo_id: str, pattern: str) -> list[Path]:
        calls.append((repo_id, pattern))
        return files[pattern]

    monkeypatch.setattr(sources, "download_dataset_files", fake_download)
    monkeypatch.chdir(tmp_path)  # so no local path shadows a source name
    return calls


def test_arc_challenge_resolves_to_ai2_arc_test(hub):
    items, report = load_items("arc_challenge")
    assert hub == [("allenai/ai2_arc", "ARC-Challenge/test-*.parquet")]
    assert items == [Item("arc_challenge/ToyC_1", "arc_challenge", None, "Which toy rolls?",
                          ("a cube", "a ball", "a brick", "a book"), 1)]
    assert dict(report.excluded) == {"fewer than 4 choices": 1}
    assert report.source.startswith("arc_challenge:test (hf://datasets/allenai/ai2_arc/")


def test_split_suffix_and_alias(hub):
    items, _ = load_items("arc_easy:val")
    assert hub == [("allenai/ai2_arc", "ARC-Easy/validation-*.parquet")]
    assert [it.item_uid for it in items] == ["arc_easy/ToyE_1"]


def test_hellaswag_ids_and_text(hub):
    items, _ = load_items("hellaswag")
    assert hub == [("Rowan/hellaswag", "data/validation-*.parquet")]
    assert items == [
        Item("hellaswag/hellaswag_val_00000", "hellaswag", "Juggling", "A man holds three balls. he",
             ("eats them.", "throws them up in turn.", "paints them.", "sits."), 1),
        Item("hellaswag/hellaswag_val_00001", "hellaswag", "Baking", "She mixes flour.",
             ("It rains.", "She adds eggs.", "A car passes.", "He sleeps."), 1)]


def test_mmlu_ids_count_rows_within_each_subject(hub):
    items, _ = load_items("mmlu")
    assert hub == [("cais/mmlu", "all/test-*.parquet")]
    assert [it.item_uid for it in items] == [
        "mmlu/mmlu_test/abstract_algebra/0000", "mmlu/mmlu_test/anatomy/0000",
        "mmlu/mmlu_test/abstract_algebra/0001"]
    assert items[0] == Item("mmlu/mmlu_test/abstract_algebra/0000", "mmlu", "abstract_algebra",
                            "Toy algebra?", ("1", "2", "3", "4"), 3)


def test_shards_of_one_split_continue_ids(hub):
    items, report = load_items("mmlu:dev")
    assert [it.item_uid for it in items] == [
        "mmlu/mmlu_dev/abstract_algebra/0000", "mmlu/mmlu_dev/anatomy/0000",
        "mmlu/mmlu_dev/abstract_algebra/0001"]
    assert report.read == 3


def test_truthfulqa_mc1_keeps_gold_first(hub):
    items, report = load_items("truthfulqa")
    assert hub == [("truthfulqa/truthful_qa", "multiple_choice/validation-*.parquet")]
    assert items == [Item("truthfulqa/truthfulqa_000", "truthfulqa", None, "Do toys dream?",
                          ("No.", "Yes.", "Only teddies.", "Every night."), 0)]
    assert report.trimmed == 1 and dict(report.excluded) == {"fewer than 4 choices": 1}


def test_named_sources_mix_with_files_and_sample_per_benchmark(hub, tmp_path):
    local = tmp_path / "toy.jsonl"
    local.write_text('{"id": "t1", "benchmark": "toy", "question": "q", '
                     '"choices": ["a", "b", "c", "d"], "gold": 2}\n')
    items, report = load_many(["mmlu", local], per_benchmark=2, seed=0)
    assert sum(it.benchmark == "mmlu" for it in items) == 2
    assert [it.item_uid for it in items if it.benchmark == "toy"] == ["toy/t1"]
    assert report.selected == 3


def test_offline_names_the_local_alternative(monkeypatch, tmp_path):
    def offline(repo_id, pattern):
        raise OSError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(sources, "download_dataset_files", offline)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as err:
        load_items("arc_challenge")
    message = str(err.value)
    assert message.startswith("cannot download allenai/ai2_arc (offline?)")
    assert "--items path/to/arc_challenge_test.jsonl" in message and "\n" not in message


def test_hub_without_matching_files_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.setattr(sources, "download_dataset_files", lambda repo_id, pattern: [])
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match=r"cais/mmlu has no files matching 'all/test-\*\.parquet'"):
        load_items("mmlu")


def test_download_wrapper_asks_for_the_dataset_files_only(monkeypatch, tmp_path):
    import huggingface_hub

    snapshot = tmp_path / "snapshot"
    for rel in ("ARC-Challenge/test-00000-of-00001.parquet", "ARC-Challenge/train-00000-of-00001.parquet",
                "ARC-Easy/test-00000-of-00001.parquet"):
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        (snapshot / rel).write_bytes(b"")
    seen = {}

    def fake_snapshot_download(**kwargs):
        seen.update(kwargs)
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    files = sources.download_dataset_files("allenai/ai2_arc", "ARC-Challenge/test-*.parquet")
    assert files == [snapshot / "ARC-Challenge/test-00000-of-00001.parquet"]
    assert seen == {"repo_id": "allenai/ai2_arc", "repo_type": "dataset",
                    "allow_patterns": ["ARC-Challenge/test-*.parquet"]}


@pytest.mark.parametrize("spec, split", [("mmlu", "test"), ("mmlu:dev", "dev"),
                                         ("hellaswag:val", "validation"),
                                         ("truthfulqa", "validation"), ("arc_easy:TRAIN", "train")])
def test_parse_source_spec(spec, split):
    source, parsed = sources.parse_source_spec(spec)
    assert source.name == spec.split(":")[0] and parsed == split


def test_bad_splits_are_clear():
    with pytest.raises(InputError, match="has no labels"):
        sources.parse_source_spec("hellaswag:test")
    with pytest.raises(InputError, match=r"mmlu has no split 'bogus'; splits: test, validation, dev"):
        sources.parse_source_spec("mmlu:bogus")


def test_an_existing_path_wins_over_a_source_name(monkeypatch, tmp_path):
    monkeypatch.setattr(sources, "download_dataset_files",
                        lambda *a: pytest.fail("must not download when a path exists"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mmlu").mkdir()
    (tmp_path / "mmlu" / "toy_test.csv").write_text("Q?,a,b,c,d,D\n")
    items, _ = load_items("mmlu")
    assert [it.item_uid for it in items] == ["mmlu/mmlu_test/toy/0000"]
