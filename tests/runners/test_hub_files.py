"""Hub downloads fetch only what a run reads (config, tokenizer, generation config and the
safetensors weights; .bin only without safetensors), and the size estimate counts only
those files. The hub is mocked: its listing is a dict, snapshot_download records its call."""

from __future__ import annotations

import pytest

from fragility_tui.errors import InputError

GiB = 1 << 30

LLAMA_LISTING = {  # a Llama 3 repository as the hub lists it, with file sizes
    ".gitattributes": 1_519, "README.md": 41_000, "LICENSE": 7_801,
    "config.json": 826, "generation_config.json": 185, "tokenizer.json": 9_085_657,
    "tokenizer_config.json": 50_977, "special_tokens_map.json": 73,
    "model-00001-of-00004.safetensors": 4_976_698_672,
    "model-00002-of-00004.safetensors": 4_999_802_720,
    "model-00003-of-00004.safetensors": 4_915_916_176,
    "model-00004-of-00004.safetensors": 1_168_138_808,
    "model.safetensors.index.json": 23_950,
    "pytorch_model.bin": 16_060_617_592,  # a .bin copy of the same weights
    "original/consolidated.00.pth": 16_060_617_592,  # Meta's own checkpoint
    "original/tokenizer.model": 2_183_982, "original/params.json": 199,
}


def test_only_config_tokenizer_and_safetensors_are_chosen():
    from runners.models.load import hub_download_bytes, hub_files

    chosen = hub_files(LLAMA_LISTING)
    assert chosen == sorted([
        "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "model-00001-of-00004.safetensors",
        "model-00002-of-00004.safetensors", "model-00003-of-00004.safetensors",
        "model-00004-of-00004.safetensors", "model.safetensors.index.json"])
    weights = sum(v for k, v in LLAMA_LISTING.items() if k.startswith("model-"))
    assert hub_download_bytes(LLAMA_LISTING) == weights + 826 + 185 + 9_085_657 + 50_977 + 73 \
        + 23_950
    # a third of everything the repository holds (no .bin copy, no original/ checkpoint)
    assert hub_download_bytes(LLAMA_LISTING) < 0.34 * sum(LLAMA_LISTING.values())


def test_bin_weights_only_when_the_repository_has_no_safetensors():
    from runners.models.load import hub_files

    old = {"config.json": 1, "pytorch_model-00001-of-00002.bin": 5, "training_args.bin": 1,
           "pytorch_model-00002-of-00002.bin": 5, "pytorch_model.bin.index.json": 1,
           "tokenizer.model": 1, "flax_model.msgpack": 9}
    assert hub_files(old) == ["config.json", "pytorch_model-00001-of-00002.bin",
                              "pytorch_model-00002-of-00002.bin",
                              "pytorch_model.bin.index.json", "tokenizer.model"]


def _mock_hub(monkeypatch, tmp_path, listing):
    import huggingface_hub
    from huggingface_hub.hf_api import RepoSibling

    calls = []

    class Info:
        siblings = [RepoSibling(rfilename=name, size=size) for name, size in listing.items()]

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info",
                        lambda self, repo, revision=None, files_metadata=False: Info())

    def snapshot_download(repo, revision=None, allow_patterns=None, **kwargs):
        calls.append((repo, revision, allow_patterns))
        folder = tmp_path / "snapshots" / ("a" * 40)
        folder.mkdir(parents=True, exist_ok=True)
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    return calls


def test_the_download_asks_for_the_chosen_files_and_records_their_size(monkeypatch, tmp_path):
    from runners.models import load as models

    calls = _mock_hub(monkeypatch, tmp_path, LLAMA_LISTING)
    monkeypatch.setattr(models.shutil, "disk_usage", lambda path: type("U", (), {"free": 64 * GiB})())
    resolved = models.resolve_spec("meta-llama/Llama-3.1-8B@main")
    assert calls == [("meta-llama/Llama-3.1-8B", "main", models.hub_files(LLAMA_LISTING))]
    assert resolved.download_bytes == models.hub_download_bytes(LLAMA_LISTING)
    assert resolved.revision == "a" * 40


def test_a_download_the_disk_cannot_hold_is_refused_before_it_starts(monkeypatch, tmp_path):
    from runners.models import load as models

    calls = _mock_hub(monkeypatch, tmp_path, LLAMA_LISTING)
    # 20 GiB free: enough for the 15 GiB of safetensors, not for every file of the repo
    monkeypatch.setattr(models.shutil, "disk_usage", lambda path: type("U", (), {"free": 20 * GiB})())
    models.resolve_spec("meta-llama/Llama-3.1-8B")
    monkeypatch.setattr(models.shutil, "disk_usage", lambda path: type("U", (), {"free": 10 * GiB})())
    with pytest.raises(InputError, match=r"--model.*needs 15\.0 GiB of downloads"):
        models.resolve_spec("meta-llama/Llama-3.1-8B")
    assert len(calls) == 1  # nothing downloaded for the refused one


def test_the_placement_estimate_ignores_a_bin_copy_beside_safetensors(tmp_path):
    torch = pytest.importorskip("torch")
    from runners.models.load import _weights_bytes

    (tmp_path / "config.json").write_text('{"torch_dtype": "bfloat16"}')
    for name, size in (("model.safetensors", 1000), ("pytorch_model.bin", 1000)):
        with open(tmp_path / name, "wb") as fh:
            fh.truncate(size)
    assert _weights_bytes(tmp_path, torch.bfloat16) == 1000
    (tmp_path / "model.safetensors").unlink()
    assert _weights_bytes(tmp_path, torch.float32) == 2000  # .bin alone, bf16 -> fp32
