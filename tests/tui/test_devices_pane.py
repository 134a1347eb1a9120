"""Devices in the app at 80×24 (issue 22): with a fake `nvidia-smi` on PATH reporting two
GPUs, the Runs pane's strip and the run form's device choice list both with their memory;
a queued run's row says what it waits for and each row shows its device."""

from __future__ import annotations

import os
import stat
import sys

import pytest
from textual.widgets import Select

from fragility_tui.tui.app import FragilityApp
from fragility_tui.tui.panes.run_form import run_argv

from .conftest import open_pane, screen_text, wait_ready

pytestmark = pytest.mark.anyio
GPUS = ("0, NVIDIA A100-SXM4-40GB, 1024, 40960, 7\n"
        "1, NVIDIA A100-SXM4-40GB, 30720, 40960, 93\n")


@pytest.fixture
def two_fake_gpus(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\nprintf '{GPUS}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setitem(sys.modules, "pynvml", None)  # NVML (if installed) would win


def flat(app) -> str:
    return " ".join(screen_text(app).split())  # a wrapped strip reads as one line


async def until(pilot, predicate, what, timeout=30.0):
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {flat(pilot.app)}")
        await pilot.pause(0.1)


async def test_two_gpus_listed_with_memory_in_strip_and_form(synthetic_store, two_fake_gpus):
    app = FragilityApp(str(synthetic_store.path))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(app, pilot)
        await open_pane(app, pilot, "7")
        await until(pilot, lambda: "cuda:1" in flat(app), "the devices strip")
        shown = flat(app)
        assert "cuda:0 NVIDIA A100-SXM4-40GB 1.0/40.0 GiB 7%" in shown
        assert "cuda:1 NVIDIA A100-SXM4-40GB 30.0/40.0 GiB 93%" in shown
        assert "cpu " in shown
        choice = app.pane("runs").query_one("#run-device", Select)
        choice.focus()
        await pilot.press("enter")  # open the choice: every device with its memory
        await pilot.pause()
        shown = flat(app)
        for option in ("auto", "any free GPU", "cuda:0 1.0/40 GiB", "cuda:1 30.0/40 GiB"):
            assert option in shown, option
        await pilot.press("end", "enter")  # the last choice: cuda:1
        await pilot.pause()
        assert choice.value == "cuda:1"


def test_the_form_passes_its_device():
    form = {"model": "m", "grid": "g", "device": "cuda:1"}
    assert run_argv(form, None)[-2:] == ["--device", "cuda:1"]
    assert "--device" not in run_argv({**form, "device": "auto"}, None)
