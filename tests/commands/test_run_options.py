"""`run`'s option table (fragility_tui/commands/run_options.toml) and its loader."""

import argparse

import pytest

from fragility_tui.commands.run_options import TABLE, OptionTableError, add_run_options
from fragility_tui.items.item import DEFAULT_PER_BENCHMARK
from fragility_tui.tomlfile import tomllib


def _parser(path=TABLE) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="run")
    add_run_options(parser, path)
    return parser


def test_every_option_of_the_table_parses_with_its_type_and_default():
    args = _parser().parse_args(["--model", "a", "--model", "b", "--seed", "3", "--ray",
                                 "--gpus-per-task", "0.5", "--no-overlap"])
    assert args.model == ["a", "b"] and args.seed == 3 and args.ray == ""
    assert args.gpus_per_task == 0.5 and args.no_overlap is True and args.add_items is False
    assert args.per_benchmark == DEFAULT_PER_BENCHMARK  # the code's default, not the table's
    assert args.backend == "transformers" and args.concurrency == 4 and args.shards == 1
    with pytest.raises(SystemExit):
        _parser().parse_args(["--dtype", "int3"])


def test_help_lists_each_group_and_fills_in_the_code_default(capsys):
    with pytest.raises(SystemExit):
        _parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    groups = [group["title"] for group in tomllib.loads(TABLE.read_text())["group"]]
    assert len(groups) == 5
    for title in groups:
        assert f"{title}:" in text
    assert f"(default {DEFAULT_PER_BENCHMARK}; 0 = all)" in text


@pytest.mark.parametrize("line, words", [
    ('helps = "typo"', ["--seed", "unknown key(s) helps"]),
    ('type = "str"', ["--seed", "type must be one of int, float"]),
    ('action = "count"', ["--seed", "action must be one of"]),
])
def test_a_bad_key_names_the_file_and_the_option(tmp_path, line, words):
    table = tmp_path / "options.toml"
    table.write_text(f'[[group]]\ntitle = "t"\n[[group.option]]\nflag = "--seed"\n{line}\n')
    with pytest.raises(OptionTableError) as error:
        _parser(table)
    assert str(table) in str(error.value)
    for word in words:
        assert word in str(error.value)
