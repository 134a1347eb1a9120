"""import-log on real HELM (crfm-helm 0.5.16) run directories (tests/fixtures/logs/helm, the
commands in its README): MMLU's scenario over 40 of our starter items, the joint method
(5 shots, lettered options, the generated letter) and separate_original (0 shots, each
option's log-probability per token) on 20 of them. Every instance is matched by content
(HELM's `idN` counters never name an item), the axes are read from the run spec, HELM's
own exact_match is reproduced; train trials are epochs; bad run directories are one error
naming the file and nothing is written."""

from __future__ import annotations

import json
import shutil

import pytest

from helpers import REPO, STARTER_ITEMS, import_logs as _import, run_cli

LOGS = REPO / "tests" / "fixtures" / "logs" / "helm"
SUITE = LOGS / "runs" / "fragility"
JOINT = SUITE / ("mmlu:subject=fragility_starter,method=multiple_choice_joint,"
                 "model=huggingface_smollm2-135m-instruct")
SEPARATE = SUITE / ("mmlu:subject=fragility_starter,method=multiple_choice_separate_original,"
                    "model=huggingface_smollm2-135m-instruct,"
                    "model_deployment=local_smollm2-135m-instruct-nochat,max_train_instances=0")
JOINT_ID = "helm:mmlu[subject=fragility_starter,method=multiple_choice_joint]:exact_match+k5"
SEPARATE_ID = ("helm:mmlu[subject=fragility_starter,method=multiple_choice_separate_original]"
               ":exact_match+k0")


def _gold():
    out = {}
    for line in STARTER_ITEMS.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        out[f"{item['benchmark']}/{item['id']}"] = item["gold"]
    return out


def _cells(db, grid="g"):
    from fragility_tui.store.store import Store

    with Store(db).connect() as con:
        return con.execute("SELECT config_id, item_uid, correct, pred, permutation, "
                           "raw_output, prompt FROM cells WHERE grid = ? ORDER BY ALL",
                           [grid]).fetchall()


def _grid_names(db):
    return [g["name"] for g in json.loads(run_cli("grids", "--json", db=db,
                                                   check=True).stdout)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    db = tmp_path_factory.mktemp("helm") / "s.duckdb"
    return db, {r["config"]: r for r in _import(db, LOGS)}


def test_every_instance_matched_and_helms_accuracy_reproduced(imported):
    _, runs = imported
    assert sorted(runs) == [JOINT_ID, SEPARATE_ID]
    for config, n, accuracy in ((JOINT_ID, 40, 0.325), (SEPARATE_ID, 20, 0.4)):
        r = runs[config]
        assert (r["matched"], r["unmatched"], r["ambiguous"], r["cells"]) == (n, 0, 0, n)
        assert r["log_accuracy"] == accuracy and r["reproduces_log_accuracy"], r
        assert r["model"] == "smollm2-135m-instruct"  # adapter_spec.model's basename


def test_the_axes_come_from_the_run_spec(imported):
    _, runs = imported
    joint, separate = runs[JOINT_ID]["axes"], runs[SEPARATE_ID]["axes"]
    assert joint["scoring"] == "generate" and joint["method"] == "multiple_choice_joint"
    assert separate["scoring"] == "likelihood"
    assert separate["method"] == "multiple_choice_separate_original"
    # the joint run does not record whether the client applied the chat template; the
    # separate run's echoed prompts show it did not
    assert joint["chat"] == "unknown" and separate["chat"] == "off"
    assert joint["template"] != separate["template"] and "perturbation" not in joint


def test_cells_keep_helms_prediction_prompt_and_answer(imported):
    db, _ = imported
    gold = _gold()
    cells = _cells(db)
    assert len(cells) == 60
    for config, uid, correct, pred, perm, raw, prompt in cells:
        assert correct == (pred == gold[uid]), (config, uid)  # no ties in these runs
        assert perm is None  # HELM showed the references in their own order
        if config == JOINT_ID:
            assert raw in ("A", "B", "C", "D")
            assert prompt.startswith("The following are multiple choice questions")
            assert prompt.endswith("Answer:") and prompt.count("\nAnswer: ") == 5
        else:
            assert raw is None and prompt.count("\n\n") == 3  # one prompt per option
    acad_001 = {c: (pred, raw) for c, uid, _, pred, _, raw, _ in cells
                if uid == "starter_academic/acad_001"}
    assert acad_001[JOINT_ID] == (0, "A")  # "A" mapped back through output_mapping


def test_the_text_summary_one_run_directory_and_the_alias(tmp_path):
    out = run_cli("import-log", str(JOINT / "per_instance_stats.json"), "--grid", "g",
                  "--items", str(STARTER_ITEMS), "--format", "crfm-helm",
                  db=tmp_path / "s.duckdb", check=True).stdout
    assert f"{JOINT_ID}: 40 cells; 40 matched, 0 unmatched, 0 ambiguous" in out
    assert "reproduces the log's accuracy 0.325" in out and SEPARATE_ID not in out


def _copy(tmp_path, run=JOINT, name="run"):
    folder = tmp_path / name
    shutil.copytree(run, folder)
    return folder


def _edit(path, fn):
    data = json.loads(path.read_text(encoding="utf-8"))
    data = fn(data) or data
    path.write_text(json.dumps(data), encoding="utf-8")


def test_train_trials_are_epochs_and_instance_ids_never_name_items(tmp_path):
    """A second train trial (HELM's replicate with other in-context examples) becomes +e2;
    an item whose own id is `id5` is not taken for HELM's instance id5."""
    run = _copy(tmp_path)

    def second_trial(entries):
        for e in [dict(e) for e in entries]:
            entries.append({**e, "train_trial_index": 1})

    def second_states(state):
        state["request_states"] += [{**rs, "train_trial_index": 1}
                                    for rs in state["request_states"]]

    _edit(run / "per_instance_stats.json", second_trial)
    _edit(run / "scenario_state.json", second_states)
    items = tmp_path / "items.jsonl"
    decoy = {"id": "id5", "benchmark": "starter_academic", "subject": None,
             "question": "Which planet is largest?",
             "choices": ["Mars", "Jupiter", "Venus", "Mercury"], "gold": 1}
    items.write_text(STARTER_ITEMS.read_text(encoding="utf-8") + json.dumps(decoy) + "\n",
                     encoding="utf-8")
    db = tmp_path / "s.duckdb"
    proc = run_cli("import-log", str(run), "--grid", "g", "--items", str(items), "--json",
                   db=db)
    assert proc.returncode == 0, proc.stderr
    runs = {r["config"]: r for r in json.loads(proc.stdout)["runs"]}
    assert sorted(runs) == [f"{JOINT_ID}+e1", f"{JOINT_ID}+e2"]
    # the copied trial has the first one's outcomes: each epoch gives HELM's 0.325
    assert all(r["matched"] == 40 and r["accuracy"] == 0.325 and r["reproduces_log_accuracy"]
               for r in runs.values())
    assert "starter_academic/id5" not in {uid for _, uid, *_ in _cells(db)}


def test_references_shown_in_another_order_are_matched_and_recorded(tmp_path):
    """HELM lists an instance's references in its own order under output_mapping's letters:
    an instance whose references were shuffled (a perturbation, a scenario that shuffles)
    is matched by option text and the order shown is the cell's permutation."""
    run = _copy(tmp_path)

    def reverse(state):
        for rs in state["request_states"]:
            if rs["instance"]["input"]["text"] == "What is 15% of 80?":  # acad_001
                refs = rs["instance"]["references"][::-1]  # 12, 20, 15, 8
                rs["instance"]["references"] = refs
                rs["output_mapping"] = {k: r["output"]["text"] for k, r in zip("ABCD", refs)}
                rs["result"]["completions"][0]["text"] = "D"  # "8", as before

    _edit(run / "scenario_state.json", reverse)
    db = tmp_path / "s.duckdb"
    (r,) = _import(db, run)
    assert r["matched"] == 40 and r["reproduces_log_accuracy"]
    cell = next(c for c in _cells(db) if c[1] == "starter_academic/acad_001")
    assert cell[4] == "3210" and cell[3] == 0 and cell[5] == "D"  # pred in native order


def test_without_items_the_instance_ids_do_not_become_items(tmp_path):
    proc = run_cli("import-log", str(JOINT), "--grid", "g", db=tmp_path / "s.duckdb")
    assert proc.returncode == 2 and "pass --items" in proc.stderr


@pytest.mark.parametrize("case", ["no_stats", "no_state", "orphan", "bad_json", "no_metric"])
def test_bad_run_directories_are_one_error_naming_the_file(tmp_path, case):
    from fragility_tui.errors import InputError
    from fragility_tui.imports import helm_log

    run = _copy(tmp_path)
    stats, state = run / "per_instance_stats.json", run / "scenario_state.json"
    if case == "no_stats":
        stats.unlink()
        where, says = str(stats), "no per_instance_stats.json in the HELM run directory"
    elif case == "no_state":
        state.unlink()
        where, says = str(state), "no scenario_state.json in the HELM run directory"
    elif case == "orphan":
        _edit(state, lambda s: s.update(request_states=[
            rs for rs in s["request_states"] if rs["instance"]["id"] != "id17"]))
        where, says = f"{stats}#id17", "instance id17 (train trial 0) has stats but no request"
    elif case == "bad_json":
        stats.write_bytes(stats.read_bytes()[:5000])
        where, says = str(stats), "invalid JSON"
    else:
        _edit(stats, lambda entries: entries[3].update(stats=[
            s for s in entries[3]["stats"] if s["name"]["name"] != "exact_match"]))
        where, says = f"{stats}#id8", "has no exact_match stat"
    assert helm_log.sniff(run)
    with pytest.raises(InputError) as err:
        helm_log.read(run)
    assert where in str(err.value) and says in str(err.value), str(err.value)


def test_a_bad_run_beside_good_ones_writes_nothing(tmp_path):
    folder = tmp_path / "runs"
    _copy(folder, SEPARATE, "good")
    bad = _copy(folder, JOINT, "bad")
    (bad / "per_instance_stats.json").unlink()
    db = tmp_path / "s.duckdb"
    proc = _import(db, folder, check=False)
    assert proc.returncode == 2 and str(bad / "per_instance_stats.json") in proc.stderr
    assert not db.exists() or _grid_names(db) == []


def test_perturbed_instances_are_a_config_of_their_own(tmp_path):
    """HELM's data augmentation scores perturbed copies of instances under the same ids:
    each perturbation is its own config (task arg and axis), the originals keep theirs."""
    from fragility_tui.imports import helm_log

    run = _copy(tmp_path)
    space = {"name": "extra_space", "robustness": True, "fairness": False,
             "computed_on": "perturbed", "num_spaces": 2}
    _edit(run / "scenario_state.json", lambda s: s["request_states"].extend(
        [{**rs, "instance": {**rs["instance"], "perturbation": space}}
         for rs in s["request_states"][:10]]))
    _edit(run / "per_instance_stats.json", lambda entries: entries.extend(
        [{**e, "perturbation": space} for e in entries[:10]]))
    original, spaced = helm_log.read(run)
    assert original.task == "mmlu[subject=fragility_starter,method=multiple_choice_joint]"
    assert len(original.samples) == 40 and original.reported_accuracy == 0.325
    assert "perturbation" not in original.axes
    assert spaced.task == original.task[:-1] + ",perturbation=extra_space]"
    assert spaced.axes["perturbation"] == "extra_space" and len(spaced.samples) == 10


def test_a_chat_template_in_the_echo_is_its_own_config(tmp_path):
    """HELM's Hugging Face client wraps prompts in the tokenizer's chat template unless the
    deployment says otherwise; the separate methods' echo shows it (README: a run with it
    echoed `<|im_start|>system … <|im_start|>user\\n<prompt><|im_end|>\\n…assistant\\n`)."""
    from fragility_tui.imports import helm_log

    run = _copy(tmp_path, SEPARATE)
    head = "<|im_start|>system\nYou are a helpful AI assistant<|im_end|>\n<|im_start|>user\n"
    tail = "<|im_end|>\n<|im_start|>assistant\n"

    def wrap(state):
        for rs in state["request_states"]:
            completion = rs["result"]["completions"][0]
            completion["text"] = head + completion["text"] + tail

    _edit(run / "scenario_state.json", wrap)
    (wrapped,) = helm_log.read(run)
    (plain,) = helm_log.read(SEPARATE)
    assert wrapped.chat and not plain.chat and plain.axes["chat"] == "off"
    assert wrapped.axes["chat"] not in ("off", "unknown")
    assert wrapped.task == plain.task and len(wrapped.samples) == 20
