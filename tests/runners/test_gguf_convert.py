"""GGUF conversion: built on the meta device (one copy of the weights in host RAM), saved
in the compute dtype, and under a file lock, so two processes converting the same file at
once both succeed with one conversion (two real processes on a tiny GGUF)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

from tiny_gguf import write_tiny_gguf  # noqa: E402

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

# Each process counts its conversions in `log`, then waits at a barrier (both processes
# ready) so the two ask for the folder at the same moment.
CONVERT = r"""
import os, sys, time
from pathlib import Path
import torch
from runners.models import load as models

gguf, sha, log, ready = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
original = models._convert_gguf
def counted(*args):
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    time.sleep(1.0)  # a conversion that takes a while: the other process must wait for it
    return original(*args)
models._convert_gguf = counted
(ready / str(os.getpid())).touch()
deadline = time.monotonic() + 120
while len(list(ready.iterdir())) < 2 and time.monotonic() < deadline:
    time.sleep(0.05)
print(models.converted_gguf_folder(gguf, sha, torch.bfloat16))
"""


@pytest.fixture
def tiny_gguf(tmp_path, monkeypatch):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    monkeypatch.setenv("FRAGILITY_CACHE_DIR", str(tmp_path / "cache"))
    return path


def _saved_dtypes(folder: Path) -> set[str]:
    from safetensors import safe_open

    dtypes = set()
    for file in folder.glob("*.safetensors"):
        with safe_open(file, "pt") as fh:
            dtypes |= {str(fh.get_slice(k).get_dtype()) for k in fh.keys()}
    return dtypes


def test_two_processes_converting_at_once_both_succeed_with_one_conversion(tiny_gguf, tmp_path):
    from fragility_tui.hashing import sha256_file

    sha = sha256_file(tiny_gguf)
    log, ready = tmp_path / "conversions.log", tmp_path / "ready"
    ready.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]),
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, "-c", CONVERT, str(tiny_gguf), sha, str(log),
                               str(ready)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for proc, (out, err) in zip(procs, outs):
        assert proc.returncode == 0, err[-2000:]
    folders = {out.strip().splitlines()[-1] for out, _ in outs}
    assert len(folders) == 1  # both read the same converted folder
    assert len(log.read_text().split()) == 1  # one conversion: the other waited on the lock
    folder = Path(folders.pop())
    assert folder.name.endswith("-bf16")
    assert json.loads((folder / "CONVERTED").read_text())["dtype"] == "bfloat16"
    assert _saved_dtypes(folder) == {"BF16"}  # saved in the compute dtype, not fp32
    assert not list(folder.parent.glob(".convert-*"))  # no temporary folder left behind


def test_the_converted_model_equals_the_gguf_model_in_each_dtype(tiny_gguf):
    from transformers import AutoModelForCausalLM

    from fragility_tui.hashing import sha256_file
    from runners.models.load import converted_gguf_folder

    sha = sha256_file(tiny_gguf)
    ids = torch.tensor([[5, 17, 40, 3, 88]])
    for dtype, saved in ((torch.float32, "F32"), (torch.bfloat16, "BF16")):
        folder = converted_gguf_folder(tiny_gguf, sha, dtype)
        assert _saved_dtypes(folder) == {saved}
        direct = AutoModelForCausalLM.from_pretrained(tiny_gguf.parent, gguf_file=tiny_gguf.name,
                                                      dtype=dtype)
        converted = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype)
        with torch.no_grad():
            assert torch.equal(direct(input_ids=ids).logits, converted(input_ids=ids).logits)
    assert converted_gguf_folder(tiny_gguf, sha, torch.float32).name.endswith("-fp32")


def test_a_first_load_parses_the_gguf_file_once(tiny_gguf, monkeypatch):
    """transformers parses the whole GGUF file for each thing it reads (config, tokenizer,
    weights; six parses, ~14 of SmolLM2's ~22 CPU-seconds of a first load):
    runners/models/gguf_parse.py shares one parse inside a block, so a first load_spec
    (prepare, convert, load) parses the file once, and a second, from the converted folder
    with the file type cached, not at all. The same model either way."""
    import gguf

    from runners.models.gguf_parse import gguf_parsed_once
    from runners.models.prepare import load_spec

    original, parses = gguf.GGUFReader, []

    class Counted(original):
        def __init__(self, path, *args, **kwargs):
            parses.append(str(path))
            super().__init__(path, *args, **kwargs)

    monkeypatch.setattr(gguf, "GGUFReader", Counted)
    # torch's own kernel in both loads: whether oneDNN's is packed is timed at each load,
    # and on a busy machine the two loads decided differently (logits equal to 1e-7 only)
    monkeypatch.setenv("FRAGILITY_CPU_LINEAR", "default")
    first = load_spec(str(tiny_gguf), dtype="fp32", device="cpu")
    assert parses == [str(tiny_gguf)]
    again = load_spec(str(tiny_gguf), dtype="fp32", device="cpu")
    assert len(parses) == 1
    ids = torch.tensor([[5, 17, 40, 3, 88]])
    with torch.no_grad():
        assert torch.equal(first.model(input_ids=ids).logits, again.model(input_ids=ids).logits)
    assert gguf.GGUFReader is Counted  # put back after each block
    assert gguf.get_tensor_name_map is gguf.tensor_mapping.get_tensor_name_map
    with gguf_parsed_once():
        with gguf_parsed_once():  # nested: the outer block's readers
            assert gguf.GGUFReader(tiny_gguf) is gguf.GGUFReader(str(tiny_gguf))
    assert gguf.GGUFReader(tiny_gguf) is not gguf.GGUFReader(tiny_gguf)
