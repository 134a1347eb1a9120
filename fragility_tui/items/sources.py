"""Named item sources: `arc_challenge`, `arc_easy`, `hellaswag`, `mmlu`, `truthfulqa`
(optionally `name:split`, e.g. `mmlu:dev`).

On a machine with internet they resolve to the public Hugging Face dataset files (Parquet),
downloaded with huggingface_hub into its usual cache and read with DuckDB by the same
converters as local files, so the ids equal those of our normalised JSONL files
(ARC ids, hellaswag_val_NNNNN, mmlu_test/<subject>/NNNN, truthfulqa_NNN). Offline, any
download failure becomes an InputError that names the local-file alternative.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path

from fragility_tui.errors import InputError
from fragility_tui.items.formats import read_shards
from fragility_tui.items.item import LoadReport, RawItem


@dataclass(frozen=True)
class NamedSource:
    name: str  # also the benchmark name of its items
    repo_id: str  # Hugging Face dataset repository
    fmt: str  # item_rows.FORMATS entry that reads its Parquet rows
    files: dict[str, str]  # split -> glob of its Parquet file(s) in the repository
    default_split: str
    local_example: str  # what to pass instead when offline

    def pattern(self, split: str) -> str:
        return self.files[split]


def _arc(name: str, folder: str) -> NamedSource:
    return NamedSource(name, "allenai/ai2_arc", "arc",
                       {s: f"{folder}/{s}-*.parquet" for s in ("test", "validation", "train")},
                       "test", f"path/to/{name}_test.jsonl (or ARC's {folder}-Test.jsonl)")


SOURCES: dict[str, NamedSource] = {
    "arc_challenge": _arc("arc_challenge", "ARC-Challenge"),
    "arc_easy": _arc("arc_easy", "ARC-Easy"),
    # the test split has no labels, so it is not offered
    "hellaswag": NamedSource("hellaswag", "Rowan/hellaswag", "hellaswag",
                             {s: f"data/{s}-*.parquet" for s in ("validation", "train")},
                             "validation", "path/to/hellaswag_val.jsonl"),
    "mmlu": NamedSource("mmlu", "cais/mmlu", "mmlu",
                        {s: f"all/{s}-*.parquet" for s in ("test", "validation", "dev")},
                        "test", "path/to/mmlu_test.jsonl (or a folder of <subject>_test.csv)"),
    "truthfulqa": NamedSource("truthfulqa", "truthfulqa/truthful_qa", "truthfulqa",
                              {"validation": "multiple_choice/validation-*.parquet"},
                              "validation", "path/to/truthfulqa_mc1.jsonl (or TruthfulQA's mc_task.json)"),
}
SOURCE_NAMES = tuple(SOURCES)
SPLIT_ALIASES = {"val": "validation", "valid": "validation", "eval": "validation"}
# how a split appears inside item ids (our normalised files say "val" for validation)
ID_SPLIT = {"validation": "val"}


def is_named_source(spec: str) -> bool:
    return spec.split(":", 1)[0] in SOURCES


def parse_source_spec(spec: str) -> tuple[NamedSource, str]:
    """`name` or `name:split` -> (source, split); a clear error for unknown names/splits."""
    name, _, split = spec.partition(":")
    if name not in SOURCES:
        raise InputError(f"unknown named source {name!r}; known: {', '.join(SOURCE_NAMES)}")
    source = SOURCES[name]
    split = SPLIT_ALIASES.get(split.strip().lower(), split.strip().lower()) or source.default_split
    if split not in source.files:
        extra = " (HellaSwag's test split has no labels)" if name == "hellaswag" and split == "test" else ""
        raise InputError(f"{name} has no split {split!r}{extra}; splits: "
                         f"{', '.join(source.files)}")
    return source, split


def download_dataset_files(repo_id: str, pattern: str) -> list[Path]:
    """The dataset files matching `pattern`, downloaded into the Hugging Face cache (or found
    there). The only network call of this module; tests replace it."""
    from huggingface_hub import snapshot_download  # heavy import, only when a source is used

    folder = Path(snapshot_download(repo_id=repo_id, repo_type="dataset",
                                    allow_patterns=[pattern]))
    return sorted(p for p in folder.rglob("*")
                  if p.is_file() and fnmatch.fnmatch(p.relative_to(folder).as_posix(), pattern))


def fetch(source: NamedSource, split: str) -> list[Path]:
    pattern = source.pattern(split)
    try:
        files = download_dataset_files(source.repo_id, pattern)
    except Exception as exc:  # noqa: BLE001 - network, auth, cache: all mean "use a local file"
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot download {source.repo_id} (offline?): {reason[:200]}; pass a "
                         f"local file instead, e.g. --items {source.local_example}") from None
    if not files:
        raise InputError(f"{source.repo_id} has no files matching {pattern!r} (has the dataset "
                         f"layout changed?); pass a local file instead, e.g. --items "
                         f"{source.local_example}")
    return files


def read_source(spec: str) -> tuple[list[RawItem], LoadReport]:
    """Raw items of a named source, read with the loader of its format."""
    source, split = parse_source_spec(spec)
    raws, _ = read_shards(fetch(source, split), fmt=source.fmt, benchmark=source.name,
                                  split=ID_SPLIT.get(split, split))
    return raws, LoadReport(f"{source.name}:{split} (hf://datasets/{source.repo_id}/"
                            f"{source.pattern(split)})", read=len(raws))
