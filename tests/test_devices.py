"""fragility_tui/devices.py: nvidia-smi output shapes as real drivers print them, bad output
(a clear error naming the line, or a "no GPU info" note), the CPU row, --device names."""

from __future__ import annotations

import os
import stat

import pytest

from fragility_tui.devices import (DeviceQueryError, cpu_device, normalise_device,
                                   parse_nvidia_smi, query_devices, query_gpus)

# What `nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu
# --format=csv,noheader,nounits` prints: a data-centre GPU, a consumer board that reports
# no utilisation, and a name with a comma.
TWO_GPUS = "0, NVIDIA H200, 12034, 143771, 45\n1, NVIDIA H200, 0, 143771, 0\n"
NA_UTIL = "0, NVIDIA GeForce GTX 1650, 351, 4096, [N/A]\n"
COMMA_NAME = "0, Tesla K80, rev B, 100, 11441, 3\n"


def test_parses_real_output_shapes():
    gpus = parse_nvidia_smi(TWO_GPUS)
    assert [g.name for g in gpus] == ["cuda:0", "cuda:1"]
    assert gpus[0].label == "NVIDIA H200"
    assert (gpus[0].memory_used_mib, gpus[0].memory_total_mib, gpus[0].utilization_pct) == \
        (12034.0, 143771.0, 45.0)
    assert gpus[0].summary() == "cuda:0 NVIDIA H200 11.8/140.4 GiB 45%"
    na = parse_nvidia_smi(NA_UTIL)[0]
    assert na.utilization_pct is None and na.memory_total_mib == 4096.0
    assert "%" not in na.summary()
    assert parse_nvidia_smi(COMMA_NAME)[0].label == "Tesla K80, rev B"
    assert parse_nvidia_smi("\n") == []


@pytest.mark.parametrize("text, message", [
    ("0, NVIDIA H200, 12034\n", "line 1: expected 5 fields"),
    ("0, A, 1, 2, 3\nx, NVIDIA H200, 1, 2, 3\n", "line 2: index is 'x'"),
    ("0, NVIDIA H200, lots, 143771, 45\n", "line 1: memory.used is 'lots'"),
])
def test_bad_output_names_the_line(text, message):
    with pytest.raises(DeviceQueryError, match=message):
        parse_nvidia_smi(text)


def _fake_smi(folder, body: str):
    path = folder / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return folder


def test_query_uses_nvidia_smi_on_path_and_degrades_to_a_note(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)  # NVML not installed
    good = tmp_path / "good"
    good.mkdir()
    _fake_smi(good, f"printf '{TWO_GPUS}'\n")
    monkeypatch.setenv("PATH", f"{good}{os.pathsep}{os.environ['PATH']}")
    gpus, note = query_gpus()
    assert [g.name for g in gpus] == ["cuda:0", "cuda:1"] and note is None
    report = query_devices()
    assert [d.name for d in report.devices] == ["cpu", "cuda:0", "cuda:1"]

    bad = tmp_path / "bad"
    bad.mkdir()
    _fake_smi(bad, "echo 'NVIDIA-SMI has failed: could not communicate' >&2\nexit 9\n")
    monkeypatch.setenv("PATH", f"{bad}{os.pathsep}{os.environ['PATH']}")
    gpus, note = query_gpus()
    assert gpus == [] and note.startswith("no GPU info: nvidia-smi exited 9")
    assert "communicate" in note

    garbled = tmp_path / "garbled"
    garbled.mkdir()
    _fake_smi(garbled, "echo 'Unknown option'\n")
    monkeypatch.setenv("PATH", f"{garbled}{os.pathsep}{os.environ['PATH']}")
    gpus, note = query_gpus()
    assert gpus == [] and "line 1: expected 5 fields" in note

    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    gpus, note = query_gpus()
    assert gpus == [] and note.startswith("no GPU info (no nvidia-smi on PATH")


def test_cpu_row_has_memory():
    cpu = cpu_device()
    assert cpu.name == "cpu" and "cores" in cpu.label
    if os.path.exists("/proc/meminfo"):
        assert 0 < cpu.memory_used_mib < cpu.memory_total_mib


def test_device_names():
    assert [normalise_device(d) for d in ("auto", "CPU", "cuda", "cuda:01", "any")] == \
        ["auto", "cpu", "cuda:0", "cuda:1", "any"]
    with pytest.raises(ValueError, match="unknown device 'gpu0'; use auto, cpu, cuda:N"):
        normalise_device("gpu0")
