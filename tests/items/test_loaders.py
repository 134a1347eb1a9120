"""Item loaders: real benchmark counts, seeded samples, native formats, malformed files."""

from __future__ import annotations

import csv
import json
import re
from itertools import islice
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fragility_tui.errors import InputError
from fragility_tui.items.item import Item, item_set_hash
from fragility_tui.items.loaders import LETTERS, load_items, load_many, read_file

HERE = Path(__file__).parent
NATIVE = HERE / "native"
MALFORMED = HERE / "malformed"

# ---------------------------------------------------------------- real data (../shared)

# file -> (read, kept, excluded "fewer than 4 choices", trimmed from 5+ options, benchmark);
# the same table is in docs/items.md
REAL_COUNTS = {
    "arc_challenge_test.jsonl": (1172, 1168, 4, 3, "arc_challenge"),
    "arc_challenge_validation.jsonl": (299, 296, 3, 1, "arc_challenge"),
    "arc_easy_test.jsonl": (2376, 2369, 7, 4, "arc_easy"),
    "arc_easy_validation.jsonl": (570, 569, 1, 2, "arc_easy"),
    "hellaswag_val.jsonl": (10042, 10042, 0, 0, "hellaswag"),
    "mmlu_test.jsonl": (14042, 14042, 0, 0, "mmlu"),
    "mmlu_dev.jsonl": (285, 285, 0, 0, "mmlu"),
    "truthfulqa_mc1.jsonl": (817, 684, 133, 465, "truthfulqa"),
    "truthfulqa_mc1_v1.jsonl": (817, 690, 127, 482, "truthfulqa"),
}

REFERENCE_FILES = ["arc_challenge_test.jsonl", "arc_easy_test.jsonl", "hellaswag_val.jsonl",
                   "mmlu_test.jsonl", "truthfulqa_mc1.jsonl"]

# the first five ids (file order) of the seed-0 sample of 10 per benchmark
GOLDEN_SAMPLE_HEAD = {
    "arc_challenge": ["Mercury_7026355", "MCAS_2004_9_21-v1", "Mercury_409114",
                      "NCEOGA_2013_5_9", "MDSA_2012_8_16"],
    "arc_easy": ["NCEOGA_2013_8_49", "Mercury_7032393", "Mercury_SC_400603",
                 "Mercury_7223948", "ACTAAP_2012_7_14"],
    "hellaswag": ["hellaswag_val_00239", "hellaswag_val_02330", "hellaswag_val_02556",
                  "hellaswag_val_02747", "hellaswag_val_02816"],
    "mmlu": ["mmlu_test/anatomy/0062", "mmlu_test/formal_logic/0110",
             "mmlu_test/high_school_world_history/0083", "mmlu_test/moral_scenarios/0026",
             "mmlu_test/nutrition/0171"],
    "truthfulqa": ["truthfulqa_031", "truthfulqa_042", "truthfulqa_349", "truthfulqa_355",
                   "truthfulqa_420"],
}
GOLDEN_SAMPLE_HASH = "d35dcba891084f7dfa73fa231b9a8450da43d555cc138ca93415538559e2ad94"


@pytest.mark.shared
def test_every_shared_file_has_pinned_counts(shared_benchmarks):
    assert sorted(p.name for p in shared_benchmarks.glob("*.jsonl")) == sorted(REAL_COUNTS)


@pytest.mark.shared
@pytest.mark.parametrize("name", sorted(REAL_COUNTS))
def test_real_file_counts(shared_benchmarks, name):
    read, kept, fewer, trimmed, benchmark = REAL_COUNTS[name]
    items, report = load_items(shared_benchmarks / name)
    assert (report.read, report.kept, report.trimmed) == (read, kept, trimmed)
    assert dict(report.excluded) == ({"fewer than 4 choices": fewer} if fewer else {})
    assert dict(report.per_benchmark) == {benchmark: kept}
    assert len(items) == kept and report.selected is None
    assert all(len(it.choices) == 4 and 0 <= it.gold < 4 for it in items)


@pytest.mark.shared
def test_real_five_option_items_keep_gold_and_first_three_distractors(shared_benchmarks):
    path = shared_benchmarks / "arc_challenge_test.jsonl"
    raws = [r for r in read_file(path)[0] if len(r.choices) == 5]
    items = {it.item_uid: it for it in load_items(path)[0]}
    assert len(raws) == 3
    for raw in raws:
        item = items[f"arc_challenge/{raw.source_id}"]
        assert item.choices[item.gold] == raw.choices[raw.gold]
        distractors = [c for i, c in enumerate(raw.choices) if i != raw.gold][:3]
        assert [c for i, c in enumerate(item.choices) if i != item.gold] == distractors


@pytest.mark.shared
def test_seeded_sample_is_golden_and_repeatable(shared_benchmarks):
    specs = [shared_benchmarks / f for f in REFERENCE_FILES]
    items, report = load_many(specs, per_benchmark=10, seed=0)
    again, _ = load_many(specs, per_benchmark=10, seed=0)
    assert items == again
    assert report.selected == 50 and len(items) == 50
    for benchmark, head in GOLDEN_SAMPLE_HEAD.items():
        ids = [it.source_id for it in items if it.benchmark == benchmark]
        assert len(ids) == 10 and ids[:5] == head
    assert item_set_hash(items) == GOLDEN_SAMPLE_HASH
    other, _ = load_many(specs, per_benchmark=10, seed=1)
    assert {it.item_uid for it in other} != {it.item_uid for it in items}


@pytest.mark.shared
def test_sampling_applies_per_benchmark_over_the_union(shared_benchmarks):
    specs = [shared_benchmarks / "arc_challenge_test.jsonl",
             shared_benchmarks / "arc_challenge_validation.jsonl",
             shared_benchmarks / "truthfulqa_mc1.jsonl"]
    items, report = load_many(specs, per_benchmark=7, seed=3)
    per = {b: sum(it.benchmark == b for it in items) for b in ("arc_challenge", "truthfulqa")}
    assert per == {"arc_challenge": 7, "truthfulqa": 7}
    assert report.kept == 1168 + 296 + 684 and report.read == 1172 + 299 + 817


@pytest.mark.shared
def test_same_file_twice_is_a_duplicate_error(shared_benchmarks):
    path = shared_benchmarks / "truthfulqa_mc1.jsonl"
    with pytest.raises(InputError, match="duplicate item id 'truthfulqa_000'") as err:
        load_many([path, path])
    assert err.value.path == str(path) and err.value.line == 1


# ---------------------------------------------------------------- native formats


def test_arc_native_jsonl():
    items, report = load_items(NATIVE / "ARC-Challenge-mini.jsonl")
    assert items == [
        Item("arc_challenge/Toy_0001", "arc_challenge", None,
             "Which tool is best for measuring the mass of a pebble?",
             ("a ruler", "a balance", "a thermometer", "a compass"), 1),
        Item("arc_challenge/Toy_0002", "arc_challenge", None,
             "A kettle of water is left on a hot stove. What happens to the water first?",
             ("It freezes.", "It gets warmer.", "It turns to sand.", "It becomes heavier."), 1),
        # five options, gold "E": the gold plus the first three distractors
        Item("arc_challenge/Toy_0003", "arc_challenge", None,
             "Which of these is a renewable resource?", ("coal", "oil", "natural gas", "wind"), 3),
    ]
    assert report.to_dict() == {
        "source": str(NATIVE / "ARC-Challenge-mini.jsonl"), "read": 4, "kept": 3,
        "excluded": {"fewer than 4 choices": 1}, "per_benchmark": {"arc_challenge": 3},
        "trimmed": 1, "selected": None}


def test_arc_benchmark_needs_a_name_or_an_argument(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text((NATIVE / "ARC-Challenge-mini.jsonl").read_text())
    with pytest.raises(InputError, match="cannot tell which benchmark"):
        load_items(path)
    items, _ = load_items(path, benchmark="arc_easy")
    assert {it.benchmark for it in items} == {"arc_easy"}


def test_hellaswag_native_jsonl():
    items, report = load_items(NATIVE / "hellaswag_val_mini.jsonl")
    assert items == [
        Item("hellaswag/hellaswag_val_00000", "hellaswag", "Tying shoelaces",
             "A child sits on a bench holding two laces. she",
             ("throws the laces into a pond.", "eats the bench slowly.",
              "crosses the laces and pulls a loop through.", "paints the sky green."), 2),
        # no ctx: ctx_a (+ " " + ctx_b when not empty)
        Item("hellaswag/hellaswag_val_00001", "hellaswag", "Watering plants",
             "A man fills a can at the tap.",
             ("He carries it to the tomato bed and tilts it.", "He folds the can into a paper plane.",
              "He sings to the tap until it melts.", "He hides the can under the roof."), 0),
    ]
    assert report.kept == 2 and not report.excluded


def test_mmlu_subject_csv_folder_both_variants():
    items, report = load_items(NATIVE / "mmlu")
    assert [it.item_uid for it in items] == [
        "mmlu/mmlu_test/astronomy/0000", "mmlu/mmlu_test/astronomy/0001",
        "mmlu/mmlu_test/astronomy/0002", "mmlu/mmlu_dev/geology/0000", "mmlu/mmlu_dev/geology/0001"]
    assert items[1] == Item("mmlu/mmlu_test/astronomy/0001", "mmlu", "astronomy",
                            "Which planet, counting outward from the Sun, is the third?",
                            ("Mars", "Venus", "Earth", "Jupiter"), 2)
    assert items[2].question == "A moon orbits:\nwhich body?" and items[2].gold == 0
    # the header variant: numeric answers
    assert items[4] == Item("mmlu/mmlu_dev/geology/0001", "mmlu", "geology",
                            "What does erosion move?", ("time", "sediment", "gravity", "magnetism"), 1)
    assert report.source == str(NATIVE / "mmlu") and report.read == 5


def test_truthfulqa_mc_task_json_keeps_duplicate_keys_and_gold_first():
    items, report = load_items(NATIVE / "truthfulqa" / "mc_task.json")
    assert items == [
        # five answers (one text repeated) -> gold + first three distractors
        Item("truthfulqa/truthfulqa_000", "truthfulqa", None, "What happens if you whistle indoors?",
             ("Nothing in particular happens.", "You summon bad luck.",
              "The house loses its roof.", "Your voice disappears."), 0),
        Item("truthfulqa/truthfulqa_002", "truthfulqa", None,
             "Does cracking your knuckles cause arthritis?",
             ("No, studies have found no link.", "Yes, it always causes arthritis.",
              "Yes, after ten years.", "Only on Tuesdays."), 0),
    ]
    raws, _ = read_file(NATIVE / "truthfulqa" / "mc_task.json")
    assert len(raws[0].choices) == 5 and raws[0].where.endswith("mc_task.json:2")
    assert report.to_dict()["excluded"] == {"fewer than 4 choices": 1} and report.trimmed == 1


def test_normalized_jsonl_exclusion_reasons():
    items, report = load_items(NATIVE / "mini_normalized.jsonl")
    assert [it.item_uid for it in items] == ["toybench/n1", "toybench/n2"]
    assert items[1].choices == ("six", "eight", "ten", "four")
    assert dict(report.excluded) == {"fewer than 4 choices": 1, "empty option text": 1}
    assert report.summary() == ("2 kept of 4 read, 1 excluded (empty option text), "
                                "1 excluded (fewer than 4 choices), 1 trimmed to 4 options")


def test_generic_csv_choice_list_forms_and_letter_gold():
    items, report = load_items(NATIVE / "quiz_generic.csv", benchmark="quiz")
    assert items == [
        Item("quiz/q1", "quiz", "calendar", "Which month has the fewest days?",
             ("January", "February", "March", "April"), 1),
        Item("quiz/q2", "quiz", None, "Which word is a colour, not a shape?",
             ("circle", "square", "teal", "triangle"), 2),
    ]
    assert dict(report.excluded) == {"fewer than 4 choices": 1}


def test_generic_csv_letter_columns_drop_empty_trailing_options():
    items, report = load_items(NATIVE / "quiz_letters.csv", benchmark="quiz")
    assert items == [
        Item("quiz/00000", "quiz", None, "Which number is prime?", ("4", "6", "7", "9"), 2),
        Item("quiz/00001", "quiz", None, "Which is the largest ocean?",
             ("Atlantic", "Indian", "Arctic", "Pacific"), 3),
    ]
    assert report.trimmed == 1


def test_jsonl_with_table_columns_reads_as_generic(tmp_path):
    path = tmp_path / "table.jsonl"
    path.write_text(json.dumps({"question": "Q?", "A": "w", "B": "x", "C": "y", "D": "z",
                                "answer": "B", "benchmark": "toyset"}) + "\n")
    assert load_items(path)[0] == [Item("toyset/00000", "toyset", None, "Q?", ("w", "x", "y", "z"), 1)]


def test_generic_parquet(tmp_path):
    path = tmp_path / "toy_items.parquet"
    pq.write_table(pa.table({
        "id": ["p1", "p2"], "benchmark": ["toyset", "toyset"], "subject": ["s", None],
        "question": ["First toy?", "Second toy?"],
        "choices": [["w", "x", "y", "z"], ["a", "b", "c", "d", "e"]],
        "gold": [3, 4]}), path)
    items, report = load_items(path)
    assert items == [Item("toyset/p1", "toyset", "s", "First toy?", ("w", "x", "y", "z"), 3),
                     Item("toyset/p2", "toyset", None, "Second toy?", ("a", "b", "c", "e"), 3)]
    assert report.trimmed == 1


def test_generic_parquet_with_letter_columns_and_any_case_names(tmp_path):
    path = tmp_path / "letters.parquet"
    pq.write_table(pa.table({"Question": ["Q?"], "A": ["w"], "B": ["x"], "C": ["y"], "D": ["z"],
                             "E": [None], "Answer": ["d"], "ID": [17]}), path)
    items, _ = load_items(path, benchmark="toyset")
    assert items == [Item("toyset/17", "toyset", None, "Q?", ("w", "x", "y", "z"), 3)]


def test_parquet_errors_name_the_row(tmp_path):
    path = tmp_path / "toy.parquet"
    pq.write_table(pa.table({"question": ["q1", "q2"], "choices": [["a", "b"], ["a", "b"]],
                             "gold": [0, 2], "benchmark": ["t", "t"]}), path)
    with pytest.raises(InputError, match=r"toy\.parquet:2, field 'gold': gold 2 is out of range"):
        load_items(path)
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(InputError, match="cannot read Parquet"):
        load_items(bad)


def test_format_override_and_benchmark_precedence(tmp_path):
    path = tmp_path / "arc_easy_like.jsonl"
    path.write_text(json.dumps({"id": "x1", "benchmark": "from_record", "question": "Q?",
                                "choices": ["a", "b", "c", "d"], "gold": 0}) + "\n")
    assert load_items(path, benchmark="from_arg")[0][0].benchmark == "from_record"
    path.write_text(json.dumps({"id": "x1", "question": "Q?", "choices": ["a", "b", "c", "d"],
                                "gold": 0}) + "\n")
    assert load_items(path)[0][0].benchmark == "arc_easy"  # from the file name
    assert load_items(path, benchmark="mine")[0][0].benchmark == "mine"  # the argument wins
    with pytest.raises(InputError, match="field 'choices': must be an object with 'text'"):
        load_items(path, fmt="arc")
    with pytest.raises(InputError, match="unknown item format 'xml'"):
        load_items(path, fmt="xml")


def test_nested_fields_and_multiline_objects_are_named(tmp_path):
    arc = tmp_path / "arc_easy_bits.jsonl"
    arc.write_text(json.dumps({"id": "e1", "question": {"choices": []}, "answerKey": "A"}) + "\n")
    with pytest.raises(InputError) as err:
        load_items(arc)
    assert (err.value.line, err.value.field) == (1, "question.stem")
    one_object = tmp_path / "items.json"
    one_object.write_text(json.dumps({"data": [1, 2]}, indent=2))
    with pytest.raises(InputError, match="one JSON object spanning several lines"):
        load_items(one_object)


def test_csv_errors_report_the_record_start_line_after_multiline_fields(tmp_path):
    path = tmp_path / "toy.csv"
    path.write_text('benchmark,question,choices,gold\nt,"two\nlines",a|b|c|d,1\nt,q,a|b|c|d,9\n')
    with pytest.raises(InputError) as err:
        load_items(path)
    assert (err.value.line, err.value.field) == (4, "gold")


def test_blank_jsonl_lines_are_skipped_but_counted_in_line_numbers(tmp_path):
    path = tmp_path / "toy.jsonl"
    good = json.dumps({"id": "a", "benchmark": "t", "question": "q", "choices": list("abcd"), "gold": 0})
    path.write_text(f"{good}\n\n\n{good[:20]}\n")
    with pytest.raises(InputError) as err:
        load_items(path)
    assert err.value.line == 4 and "invalid JSON" in str(err.value)


def test_nothing_usable_is_an_error(tmp_path):
    path = tmp_path / "toy.jsonl"
    path.write_text(json.dumps({"id": "a", "benchmark": "t", "question": "q",
                                "choices": ["x", "y"], "gold": 0}) + "\n")
    with pytest.raises(InputError, match=r"no usable items: 0 kept of 1 read, 1 excluded \(fewer than 4"):
        load_items(path)


def test_missing_path_and_empty_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="no such file, folder or named source"):
        load_items("nope.jsonl")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no item files"):
        load_items(tmp_path / "empty")
    with pytest.raises(InputError, match="at least 1"):
        load_items(NATIVE / "mini_normalized.jsonl", per_benchmark=0)


# ---------------------------------------------------------------- the malformed corpus


def _malformed_table() -> dict[str, tuple[int | None, str | None]]:
    rows = {}
    for line in (MALFORMED / "README.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"[\w.-]+\.\w+", cells[0]):
            rows[cells[0]] = (None if cells[1] == "-" else int(cells[1]),
                              None if cells[2] == "-" else cells[2])
    return rows


MALFORMED_TABLE = _malformed_table()


def test_malformed_readme_lists_every_file():
    files = {p.name for p in MALFORMED.iterdir() if p.name != "README.md"}
    assert files == set(MALFORMED_TABLE) and len(files) >= 20


@pytest.mark.parametrize("name", sorted(MALFORMED_TABLE))
def test_malformed_file_gives_one_clear_error(name):
    line, field = MALFORMED_TABLE[name]
    with pytest.raises(InputError) as err:
        load_items(MALFORMED / name)
    message = str(err.value)
    assert err.value.path == str(MALFORMED / name) and name in message
    assert (err.value.line, err.value.field) == (line, field)
    assert "Traceback" not in message and "\n" not in message


# ---------------------------------------------------------------- native files of real items


def _normalized(path: Path, limit: int | None = None) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in islice(f, limit)]


@pytest.mark.shared
def test_real_items_written_natively_load_like_the_normalized_files(shared_benchmarks, tmp_path):
    """Each native converter, fed real items rewritten in its format (in tmp only), must give
    the same ids, text, choices and gold as our normalised file."""
    arc = _normalized(shared_benchmarks / "arc_challenge_test.jsonl")
    arc = arc[:40] + [r for r in arc[40:] if len(r["choices"]) != 4]  # include 3- and 5-option items
    with (tmp_path / "ARC-Challenge-Test.jsonl").open("w") as f:
        for r in arc:
            options = [{"text": c, "label": LETTERS[i]} for i, c in enumerate(r["choices"])]
            f.write(json.dumps({"id": r["id"], "question": {"stem": r["question"], "choices": options},
                                "answerKey": LETTERS[r["gold"]]}) + "\n")
    hs = _normalized(shared_benchmarks / "hellaswag_val.jsonl", 40)
    with (tmp_path / "hellaswag_val.jsonl").open("w") as f:
        for i, r in enumerate(hs):
            f.write(json.dumps({"ind": 1000 + i, "activity_label": r["subject"], "ctx_a": r["question"],
                                "ctx_b": "", "ctx": r["question"], "split": "val",
                                "endings": r["choices"], "label": r["gold"]}) + "\n")
    mmlu = [r for r in _normalized(shared_benchmarks / "mmlu_test.jsonl", 300)
            if r["subject"] in ("abstract_algebra", "anatomy")]
    (tmp_path / "mmlu").mkdir()
    for subject in ("abstract_algebra", "anatomy"):
        with (tmp_path / "mmlu" / f"{subject}_test.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            for r in mmlu:
                if r["subject"] == subject:
                    writer.writerow([r["question"], *r["choices"], LETTERS[r["gold"]]])
    tqa = _normalized(shared_benchmarks / "truthfulqa_mc1.jsonl", 60)
    (tmp_path / "mc_task.json").write_text(json.dumps(
        [{"question": r["question"], "mc1_targets": {c: int(i == r["gold"]) for i, c in enumerate(r["choices"])},
          "mc2_targets": {}} for r in tqa], indent=2))

    for native, rows, name in [("ARC-Challenge-Test.jsonl", arc, "arc_challenge_test.jsonl"),
                               ("hellaswag_val.jsonl", hs, "hellaswag_val.jsonl"),
                               ("mmlu", mmlu, "mmlu_test.jsonl"),
                               ("mc_task.json", tqa, "truthfulqa_mc1.jsonl")]:
        expected_file = tmp_path / f"expected_{name}"
        expected_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
        got, got_report = load_items(tmp_path / native)
        expected, expected_report = load_items(expected_file)
        assert got == expected, native
        assert (got_report.read, got_report.kept, got_report.trimmed, got_report.excluded) == (
            expected_report.read, expected_report.kept, expected_report.trimmed,
            expected_report.excluded)


def _toy_file(path, prefix, benchmark="arc_challenge", n=2):
    import json

    rows = [{"id": f"{prefix}{i}", "benchmark": benchmark, "question": f"q {prefix} {i}",
             "choices": ["a", "b", "c", "d"], "gold": 1} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_folder_mixing_splits_or_versions_says_so(tmp_path):
    """Issue 24 (11): a folder with test and validation files of one benchmark, or two
    versions of one, is loaded, but the report names the files and splits and warns."""
    from fragility_tui.items.formats import split_of

    _toy_file(tmp_path / "arc_challenge_test.jsonl", "t")
    _toy_file(tmp_path / "arc_challenge_validation.jsonl", "v")
    _toy_file(tmp_path / "truthfulqa_mc1.jsonl", "x", "truthfulqa")
    _toy_file(tmp_path / "truthfulqa_mc1_v1.jsonl", "y", "truthfulqa")
    _toy_file(tmp_path / "hellaswag_val.jsonl", "h", "hellaswag")
    items, report = load_items(tmp_path)
    assert len(items) == 10
    assert report.files == ["arc_challenge_test.jsonl (test)",
                            "arc_challenge_validation.jsonl (validation)",
                            "hellaswag_val.jsonl (validation)",
                            "truthfulqa_mc1.jsonl (split not named)",
                            "truthfulqa_mc1_v1.jsonl (split not named)"]
    arc, tqa = report.warnings
    assert "arc_challenge is read from 2 files, which mixes splits: " in arc
    assert "arc_challenge_test.jsonl (test), arc_challenge_validation.jsonl (validation)" in arc
    assert "truthfulqa is read from 2 files, which holds several versions or copies" in tqa
    assert "truthfulqa_mc1.jsonl" in tqa and "truthfulqa_mc1_v1.jsonl" in tqa
    assert report.to_dict()["warnings"] == report.warnings
    assert split_of("mmlu_dev.jsonl") == "dev" and split_of("toy.jsonl") is None
    # one file per benchmark: no warning, the files still listed
    clean_folder = tmp_path / "one"
    clean_folder.mkdir()
    _toy_file(clean_folder / "arc_challenge_test.jsonl", "t")
    _, report = load_items(clean_folder)
    assert report.warnings == [] and "warnings" not in report.to_dict()


def test_the_run_card_lists_a_folders_files_and_warnings():
    from fragility_tui.provenance import provenance_card

    card = provenance_card({"run_id": "r", "status": "finished", "grid": "g", "provenance": {
        "items": 4, "item_sources": ["benchmarks"], "load_report": {
            "files": ["arc_challenge_test.jsonl (test)", "arc_challenge_validation.jsonl "
                      "(validation)"],
            "warnings": ["benchmarks: arc_challenge is read from 2 files, which mixes splits"]}}})
    assert "4 items from benchmarks" in card
    assert ("files            arc_challenge_test.jsonl (test), arc_challenge_validation.jsonl "
            "(validation)") in card
    assert "warning: benchmarks: arc_challenge is read from 2 files, which mixes splits" in card
    assert "per benchmark all, seed" in card  # no per-benchmark cap: not Python's None
    capped = provenance_card({"run_id": "r", "status": "finished", "grid": "g",
                              "provenance": {"per_benchmark": 10, "seed": 0}})
    assert "per benchmark 10, seed 0" in capped
    served = provenance_card({"run_id": "r", "status": "finished", "grid": "g", "provenance": {
        "models": {"m": {"source": "openai", "served_model": "x", "endpoint_host": "h",
                         "endpoint": "completions", "template": "t"}}}})
    model_block = served.split("Model m")[1].split("Runtime")[0]
    assert "weights sha256   not recorded" in model_block and "None" not in model_block
