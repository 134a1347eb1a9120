"""The offline install's decisions, with no network: what a target's freeze makes the
wheelhouse carry (tools/offline_deps.py) and the range check `make install-offline` runs
first (tools/install_offline.py). The downloads themselves are checked by hand
(docs/runner.md, "Offline install on an air-gapped box")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata

import pytest

from helpers import REPO

sys.path.insert(0, str(REPO / "tools"))

import offline_deps as deps  # noqa: E402
import wheelhouse  # noqa: E402

ENV312 = deps.target_environment("3.12", "manylinux_2_28_x86_64")


def reqs(*lines: str) -> list:
    return [deps.Requirement(line) for line in lines]


def test_freeze_lines_give_versions_and_skip_options():
    present = deps.parse_freeze(
        "# comment\n-e git+https://x/y#egg=z\nTorch==2.11.0+cu130\nhuggingface_hub==0.36.0\n"
        "safetensors @ file:///wheels/safetensors-0.7.0-cp38-abi3-manylinux_2_17_x86_64.whl\n"
        "pandas @ file:///src/pandas\nnumpy\n--extra-index-url https://example.invalid\n")
    assert present == {"torch": "2.11.0+cu130", "huggingface-hub": "0.36.0",
                       "safetensors": "0.7.0", "pandas": None, "numpy": None}
    with pytest.raises(ValueError, match="not a freeze line"):
        deps.parse_freeze("torch >= 2\n")


def test_the_ranges_are_pyprojects_and_the_readme_states_them():
    ranges = deps.supported_ranges()
    assert "2.11.0" in ranges["torch"] and "2.10.2" not in ranges["torch"]
    assert "2.13.0+cpu" in ranges["torch"] and "3.0.0" not in ranges["torch"]
    assert "5.17.0" in ranges["transformers"] and "5.16.1" not in ranges["transformers"]
    readme = (REPO / "README.md").read_text()
    for name, spec in ranges.items():
        stated = re.findall(rf"`{name}([<>=!~][^`]*)`", readme)
        assert any(deps.SpecifierSet(s) == spec for s in stated), (name, str(spec), stated)


def test_the_range_check_is_one_line_naming_both_versions_and_ranges():
    ranges = deps.supported_ranges()
    assert deps.range_error({"torch": "2.11.0+cu130", "transformers": "5.17.0"}, ranges) is None
    line = deps.range_error({"torch": "2.10.0", "transformers": "5.17.0"}, ranges)
    assert "\n" not in line
    assert "torch 2.10.0 and transformers 5.17.0 found" in line
    assert "supports torch>=2.11,<3 and transformers>=5.17,<6" in line
    assert line.endswith("torch outside the range")
    line = deps.range_error({"torch": "2.12.0", "transformers": None}, ranges)
    assert "transformers (not installed)" in line and line.endswith("transformers outside the range")


def test_install_offline_refuses_a_torch_below_the_range(tmp_path):
    site = wheelhouse.stub_site(tmp_path / "site", {"torch": "2.10.0", "transformers": "5.17.0"})
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run([sys.executable, str(REPO / "tools" / "install_offline.py"),
                           "--wheels", str(tmp_path / "none"), "--venv", str(tmp_path / "v")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "torch 2.10.0 and transformers 5.17.0 found" in lines[0]
    assert not (tmp_path / "v").exists()  # refused before anything was made


def test_stub_records_read_as_installed(tmp_path):
    site = wheelhouse.stub_site(tmp_path, {"huggingface-hub": "0.36.0"})
    dist = next(metadata.distributions(path=[str(site)]))
    assert (dist.metadata["Name"], dist.version) == ("huggingface-hub", "0.36.0")


def test_what_the_target_has_is_reused_and_not_walked():
    """torch is on the box: neither it nor its CUDA libraries are carried; duckdb is not."""
    present = {"torch": "2.11.0", "transformers": "5.17.0", "numpy": "2.3.0", "setuptools": "80.0"}
    resolved = {
        "duckdb": ("2.0.1", []),
        "textual": ("8.2.8", ["rich>=13", 'pywin32; sys_platform == "win32"',
                              'tree-sitter; extra == "syntax"']),
        "rich": ("14.0.0", []),
        "optimum-quanto": ("0.2.7", ["torch>=2.6.0", "ninja", 'pytest; extra == "dev"']),
        "ninja": ("1.13.0", []),
        "setuptools": ("81.0.0", []),
    }
    roots = reqs("textual==8.2.8", "duckdb>=1.1", "numpy>=1.26", "torch>=2.11,<3",
                 "optimum-quanto>=0.2.6", 'tomli>=2; python_version < "3.11"')
    download, reused, problems, with_extras = deps.plan_downloads(
        roots, present, resolved, ENV312, reqs("setuptools>=68"))
    assert problems == [] and with_extras == set()
    assert download == {"textual": "8.2.8", "rich": "14.0.0", "duckdb": "2.0.1",
                        "optimum-quanto": "0.2.7", "ninja": "1.13.0", "setuptools": "81.0.0"}
    assert reused == {"numpy": "2.3.0", "torch": "2.11.0"}


def test_a_package_the_target_has_too_old_is_carried_but_torch_is_refused():
    present = {"torch": "2.11.0", "numpy": "1.24.0"}
    resolved = {"numpy": ("2.4.6", []), "quanto-next": ("1.0", ["torch>=2.12"])}
    download, _, problems, _ = deps.plan_downloads(reqs("numpy>=1.26", "quanto-next"), present,
                                                resolved, ENV312)
    assert download == {"numpy": "2.4.6", "quanto-next": "1.0"}
    assert problems == ["torch 2.11.0 on the target; quanto-next 1.0 needs torch>=2.12"]


def test_a_package_the_target_has_asked_for_with_extras_is_resolved_again():
    """textual wants markdown-it-py[linkify]: the box's markdown-it-py lacks linkify-it-py."""
    present = {"markdown-it-py": "4.3.0", "mdurl": "0.1.2"}
    resolved = {"textual": ("8.2.8", ["markdown-it-py[linkify]>=2.1.0"])}
    roots = reqs("textual==8.2.8")
    download, _, _, with_extras = deps.plan_downloads(roots, present, resolved, ENV312)
    assert download == {"textual": "8.2.8"} and with_extras == {"markdown-it-py"}
    resolved["markdown-it-py"] = ("4.3.0", ["mdurl~=0.1", 'linkify-it-py<3,>=1; extra == "linkify"'])
    resolved["linkify-it-py"] = ("2.1.0", ["uc-micro-py"])
    resolved["uc-micro-py"] = ("2.0.0", [])
    download, _, problems, with_extras = deps.plan_downloads(roots, present, resolved, ENV312)
    assert problems == [] and with_extras == set()
    assert download == {"textual": "8.2.8", "markdown-it-py": "4.3.0",
                        "linkify-it-py": "2.1.0", "uc-micro-py": "2.0.0"}


def test_markers_are_the_targets():
    assert not deps.applies(deps.Requirement('tomli; python_version < "3.11"'), ENV312)
    env310 = deps.target_environment("3.10", "manylinux_2_28_x86_64")
    assert deps.applies(deps.Requirement('tomli; python_version < "3.11"'), env310)
    assert ENV312["platform_machine"] == "x86_64" and ENV312["sys_platform"] == "linux"
    arm = deps.target_environment("3.12", "manylinux2014_aarch64")
    assert arm["platform_machine"] == "aarch64"


def test_a_manylinux_2_28_box_takes_older_manylinux_wheels():
    tags = wheelhouse.platform_tags("manylinux_2_28_x86_64")
    assert tags[0] == "manylinux_2_28_x86_64" and "manylinux_2_27_x86_64" in tags
    assert {"manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert wheelhouse.platform_tags("macosx_11_0_arm64") == ["macosx_11_0_arm64"]


def test_the_reference_box_names_every_version_inside_the_ranges():
    present = deps.parse_freeze(deps.REFERENCE_BOX.read_text())
    assert all(present.values()), [n for n, v in present.items() if not v]
    assert (present["torch"], present["transformers"]) == ("2.11.0", "5.17.0")
    assert deps.range_error(present, deps.supported_ranges()) is None


def test_a_freeze_without_versions_is_refused_before_any_download(tmp_path):
    with pytest.raises(ValueError, match="no version for numpy"):
        wheelhouse.resolve([], [], {"numpy": None}, "3.12", "manylinux_2_28_x86_64")


def test_a_requirement_without_a_wheel_is_named():
    """What `make wheelhouse EXTRAS=runner,llama-server` printed (llama-cpp-python is source
    only), from pip's own last line."""
    stderr = ("ERROR: Could not find a version that satisfies the requirement "
              "llama-cpp-python==0.3.36 (from versions: none)\n"
              "ERROR: No matching distribution found for llama-cpp-python==0.3.36\n")
    line = wheelhouse.no_wheel_error(stderr, "3.12", "manylinux_2_28_x86_64")
    assert line.startswith("no wheel of llama-cpp-python==0.3.36 for Python 3.12 on "
                           "manylinux_2_28_x86_64")


def test_a_source_only_pure_python_dependency_is_built_here_and_a_job_of_its_own_needs_also(
        tmp_path):
    """lm-evaluation-harness needs sqlitedict and word2number, published only as source: pip
    names them with where they came from, the wheelhouse builds each here into a
    py3-none-any wheel (it installs on any target) and resolves again; `--without-project`
    (the lm-eval job's wheels) needs `--also`."""
    stderr = "ERROR: No matching distribution found for sqlitedict (from lm-eval)\n"
    assert wheelhouse.missing_wheel(stderr) == "sqlitedict (from lm-eval)"
    assert wheelhouse.missing_wheel("ERROR: something else\n") is None
    source = tmp_path / "tinypure"
    (source / "tinypure").mkdir(parents=True)
    (source / "tinypure" / "__init__.py").write_text("VALUE = 1\n")
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "tinypure"\nversion = "1.0"\n')
    local = tmp_path / "built"
    local.mkdir()
    assert wheelhouse.build_pure_wheel(str(source), local)
    assert [w.name for w in local.glob("*.whl")] == ["tinypure-1.0-py3-none-any.whl"]
    assert not wheelhouse.build_pure_wheel(str(tmp_path / "nothing-here"), local)
    with pytest.raises(SystemExit):
        wheelhouse.parse_args(["--out", str(tmp_path), "--without-project"])
    args = wheelhouse.parse_args(["--out", str(tmp_path), "--without-project", "--also",
                                  "lm_eval==0.4.13"])
    assert args.also == ["lm_eval==0.4.13"] and args.without_project


def test_a_venv_made_from_a_venvs_python_sees_that_venvs_packages(tmp_path):
    """The reference box's python3 is itself a venv (/opt/torch/.venv): --system-site-packages
    alone reaches the base Python, not the torch beside that python3. The test runs inside
    .venv, a venv too; what it holds must be importable from the new one."""
    import site

    import install_offline

    assert sys.prefix != sys.base_prefix, "the tests run in the project's venv"
    venv = tmp_path / "box-venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True)
    assert install_offline.link_parent_venv(venv) is not None
    seen = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sys, duckdb; print(sys.path)"],
                          capture_output=True, text=True, check=True).stdout
    assert site.getsitepackages()[0] in seen


def _failing_install(tmp_path, *where: str):
    """install_offline with torch and transformers in range (stub records) and a wheelhouse
    whose one wheel is broken: the install starts, then fails."""
    site, wheels = tmp_path / "site", tmp_path / "wheels"
    if not site.exists():
        wheelhouse.stub_site(site, {"torch": "2.13.0", "transformers": "5.24.0"})
        wheels.mkdir()
        (wheels / "broken-0.1-py3-none-any.whl").write_bytes(b"not a zip")
    return subprocess.run([sys.executable, str(REPO / "tools" / "install_offline.py"),
                           "--wheels", str(wheels), *where], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=300)


def test_a_failed_install_leaves_no_venv(tmp_path):
    """Issue 57 item 4: a failed install left a venv without the project or its stamp."""
    proc = _failing_install(tmp_path, "--venv", str(tmp_path / "v"))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert not (tmp_path / "v").exists() and "removed again" in proc.stderr


def test_a_target_install_is_all_or_nothing(tmp_path):
    """--target: a used folder is refused unless an earlier install of ours filled it, and
    a failure leaves it as it was (pip only warned and kept the old code)."""
    target = tmp_path / "t"
    target.mkdir()
    (target / "mine.txt").write_text("keep")
    proc = _failing_install(tmp_path, "--target", str(target))
    assert proc.returncode == 2 and "not empty and no install of ours" in proc.stderr
    (target / ".fragility-offline-install").write_text("")
    proc = _failing_install(tmp_path, "--target", str(target))
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert sorted(p.name for p in target.iterdir()) == [".fragility-offline-install",
                                                        "mine.txt"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".t-")] == []
