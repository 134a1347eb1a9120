"""Every export format is read back and equals its source."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from helpers import run_cli
from fragility_tui.services.documents import md_escape
from fragility_tui.store.store import Store

HOSTILE = "B | not C\nsecond line \\ [bold]x[/]"


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("exports") / "s.duckdb"
    run_cli("simulate", "--models", "3", "--items", "30", "--seed", "2", "--grid", "sim",
            db=path, check=True)
    grid = path.parent / "g.csv"
    sha = "ab" * 32  # a cell's prompt token hash travels with it
    grid.write_text("model,item,config,correct,pred,raw_output,scores,tokens,ms,prompt_sha\n"
                    f'm,toy/q1,o0.letter,true,1,"{HOSTILE.replace(chr(34), chr(34) * 2)}",,7,12.5,{sha}\n'
                    'm,toy/q1,cloze_qa,false,2,,"[-1.5, -2.25, -0.125, -3.0]",9,3.0,\n'
                    "n,toy/q1,o0.letter,false,-1,,,,,\n")
    run_cli("import", str(grid), "--grid", "detail", db=path, check=True)
    return path


def _export(db, tmp_path, grid, what, fmt):
    out = tmp_path / f"{grid}.{what}.{fmt}"
    run_cli("export", "--grid", grid, "--what", what, "--format", fmt, "--out", str(out),
            db=db, check=True)
    return out


@pytest.mark.parametrize("grid", ["sim", "detail"])
def test_cells_json_and_parquet_equal_the_store(db, tmp_path, grid):
    source = Store(db).export_cells(grid).to_pylist()
    assert json.loads(_export(db, tmp_path, grid, "cells", "json").read_text()) == source
    assert pq.read_table(_export(db, tmp_path, grid, "cells", "parquet")).to_pylist() == source


@pytest.mark.parametrize("grid", ["sim", "detail"])
def test_cells_csv_reimports_to_the_same_cells(db, tmp_path, grid):
    out = _export(db, tmp_path, grid, "cells", "csv")
    other = tmp_path / "other.duckdb"
    run_cli("import", str(out), "--grid", grid, db=other, check=True)
    assert Store(other).export_cells(grid).to_pylist() == Store(db).export_cells(grid).to_pylist()


def test_cells_markdown_reads_back_row_by_row(db, tmp_path):
    source = Store(db).export_cells("detail")
    lines = _export(db, tmp_path, "detail", "cells", "markdown").read_text().splitlines()
    header = lines[2].strip("| ").split(" | ")
    assert header == source.column_names
    body = [line for line in lines[4:] if line.startswith("| ")]
    expected = ["| " + " | ".join(md_escape(row[n]) for n in header) + " |"
                for row in source.to_pylist()]
    assert body == expected
    assert len(body) == source.num_rows and "\\|" in "\n".join(body)  # the pipe stayed in its cell


def test_report_json_equals_build_report(db, tmp_path):
    """The export is `report`'s own report, cost section included (one builder)."""
    from dataclasses import replace

    from fragility_tui.analysis.report import report_of
    from fragility_tui.analysis.report_text import render_markdown

    store = Store(db)
    cube = store.load_cube("sim")
    report = report_of(cube, name="sim", costs=store.model_costs("sim"),
                       near_tie=store.near_tie_mask("sim", cube))
    # the store's flag: a simulated grid is labelled SYNTHETIC in every export (issue 44)
    report = replace(report, grid=replace(report.grid, synthetic=True))
    assert report.costs is not None
    assert json.loads(_export(db, tmp_path, "sim", "report", "json").read_text()) == report.to_json()
    assert _export(db, tmp_path, "sim", "report", "markdown").read_text() == render_markdown(report) + "\n"


def test_provenance_round_trips(db, tmp_path):
    from fragility_tui.services.provenance_export import provenance_document

    doc = json.loads(json.dumps(provenance_document(Store(db), "detail"), default=str))
    assert json.loads(_export(db, tmp_path, "detail", "provenance", "json").read_text()) == doc
    text = _export(db, tmp_path, "detail", "provenance", "markdown").read_text()
    for model in doc["models"]:
        assert f"| {model['model']} | {md_escape(model['source'])} |" in text


@pytest.mark.parametrize("what, fmt", [("report", "csv"), ("provenance", "parquet")])
def test_documents_refuse_tabular_formats(db, tmp_path, what, fmt):
    proc = run_cli("export", "--grid", "sim", "--what", what, "--format", fmt, "--out",
                   str(tmp_path / "x"), db=db)
    assert proc.returncode == 2 and "exports as json, markdown" in proc.stderr


def test_shipped_files_hold_no_machine_path():
    """Shipped provenance names files and their hashes, never where a machine kept them."""
    import json as _json

    from fragility_tui.services.provenance_export import strip_local_paths
    from fragility_tui.store.sample_grids import SAMPLE_GRIDS_DIR

    for path in SAMPLE_GRIDS_DIR.glob("*.json"):
        doc = _json.loads(path.read_text())
        assert strip_local_paths(doc) == doc, path.name
    doc = _json.loads((SAMPLE_GRIDS_DIR / "starter-real.provenance.json").read_text())
    quant = {m["model"]: (m["provenance"].get("gguf") or {}).get("quant_type")
             for m in doc["models"]}
    assert quant["smollm2-135m-instruct"] == "Q4_1" and quant["gemma3-270m"] == "Q4_K_M"


@pytest.mark.parametrize("fmt", ["csv", "parquet", "json"])
def test_out_is_written_through_links_and_pipes_never_replaced(db, tmp_path, fmt):
    """--out naming a symlink, a FIFO or `-` (standard output): the export goes through it;
    it replaced a symlink (or /dev/stdout, run as root) with a plain file, and a FIFO's
    reader got nothing. A folder is one line, exit 2, and leaves nothing behind."""
    import os
    import threading

    direct = _export(db, tmp_path, "sim", "cells", fmt).read_bytes()
    target = tmp_path / "target"
    target.write_bytes(b"old")
    (tmp_path / "link").symlink_to(target)
    run_cli("export", "--grid", "sim", "--what", "cells", "--format", fmt, "--out",
            str(tmp_path / "link"), db=db, check=True)
    assert (tmp_path / "link").is_symlink() and target.read_bytes() == direct

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    run_cli("export", "--grid", "sim", "--what", "cells", "--format", fmt, "--out", str(fifo),
            db=db, check=True)
    reader.join(30)
    assert got == [direct] and fifo.is_fifo()

    if fmt != "parquet":  # binary on a terminal is the user's choice; text is checked here
        piped = run_cli("export", "--grid", "sim", "--what", "cells", "--format", fmt,
                        "--out", "-", db=db, check=True)
        assert piped.stdout == direct.decode() and not (tmp_path / "-").exists()

    folder = run_cli("export", "--grid", "sim", "--what", "cells", "--format", fmt, "--out",
                     str(tmp_path), db=db)
    assert folder.returncode == 2 and "is a folder" in folder.stderr
    assert not list(tmp_path.parent.glob("*.partial")) and not list(tmp_path.glob(".*.tmp"))


def test_an_export_reimports_with_prompts_margins_examples_and_axes(tmp_path):
    """Every column a cell records comes back from its export: an imported config's prompt
    and stated axes, a run's margins, near-ties and solved examples, an empty answer (in
    Parquet; CSV writes "" and a missing answer alike). The README's "import of the export
    gives back every cell" lost all of these."""
    import pyarrow as pa

    source = tmp_path / "g.parquet"
    pq.write_table(pa.table({
        "model": ["m", "m", "n"], "item": ["toy/q1"] * 3,
        "config": ["lm-eval:toy:acc+k0", "o0.letter+k2", "lm-eval:toy:acc+k0"],
        "correct": [True, False, True], "pred": [1, 2, 1], "raw_output": [None, "", "B"],
        "prompt": ["Q: x\nA:", None, "Q: x\nA:"], "margin": [None, 0.03, None],
        "near_tie": [None, True, None], "examples": [None, ["toy/q2", "toy/q3"], None],
        "axis_harness": ["lm-eval", None, "lm-eval"], "axis_metric": ["acc", None, "acc"]}),
        source)
    db = tmp_path / "s.duckdb"
    run_cli("import", str(source), "--grid", "g", db=db, check=True)
    original = Store(db).export_cells("g")
    assert {"prompt", "axis_harness", "axis_metric"} <= set(original.column_names)
    for fmt in ("parquet", "csv"):
        out = _export(db, tmp_path, "g", "cells", fmt)
        other = tmp_path / f"{fmt}.duckdb"
        run_cli("import", str(out), "--grid", "g", db=other, check=True)
        back = Store(other).export_cells("g").to_pylist()
        expected = original.to_pylist()
        if fmt == "csv":
            expected = [{**row, "raw_output": row["raw_output"] or None} for row in expected]
        assert back == expected, fmt
        with Store(other).connect() as con:
            assert con.execute("SELECT config_id, axes FROM grid_configs").fetchall() == [
                ("lm-eval:toy:acc+k0", '{"harness": "lm-eval", "metric": "acc"}')]
