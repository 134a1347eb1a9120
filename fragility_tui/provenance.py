"""The harness disclosure card of a run (SPEC §10): what `runs show`, the app's run detail
and `export --what provenance` print, scoring first."""

from __future__ import annotations

from typing import Mapping

from fragility_tui.schemas.fields import SchemaError
from fragility_tui.schemas.provenance import Batching, ModelProvenance, RecordedRun, Session
from fragility_tui.text import clean


def _one_line(text) -> str:
    return clean(text, limit=200, one_line=True)


def _known(value, missing: str = "not recorded") -> str:
    """A recorded value, or what its absence means (a served model has no weights file or
    dtype of ours): the card never prints Python's None."""
    return missing if value is None else str(value)


def provenance_card(row) -> str:
    """The harness disclosure card of a run (SPEC §10), scoring first: a RunRecord (store/runs.py,
    a layer above this one) or its `to_dict()` as exports and the runs JSON carry it."""
    row = row if isinstance(row, Mapping) else row.to_dict()
    run, unreadable = _recorded(row)
    unreadable = "; ".join(filter(None, (row.get("unreadable"), unreadable)))
    p = run.provenance
    lines = [f"Run {run.run_id}  status {run.status}  grid {_one_line(run.grid)}"]
    if run.error:
        lines.append(f"  error: {_one_line(run.error)}")
    if unreadable:
        lines.append(f"  unreadable record: {_one_line(unreadable)}")
    lines += ["", "Scoring", *_scoring_lines(run), "", "Items", *_item_lines(run)]
    for name, m in p.models.items():
        lines += ["", f"Model {_one_line(name)}", *_model_lines(m)]
    lines += ["", "Runtime", *_runtime_lines(run)]
    lines += _session_lines(p.sessions)
    # every line through the one sanitiser: a record from the store or a merged parts
    # folder is untrusted text (no field of it reaches a terminal raw)
    return "\n".join(clean(line, limit=4000, one_line=True) for line in lines)


def _recorded(row: Mapping) -> tuple[RecordedRun, str | None]:
    """The run typed, or, when a field of its spec or provenance has the wrong JSON type,
    the run without them and the error naming that field: the card (in `runs show`, the
    app, an export) says so instead of failing."""
    try:
        return RecordedRun.from_row(row), None
    except SchemaError as exc:
        return RecordedRun.from_row({**row, "spec": None, "provenance": None}), str(exc)


def _scoring_lines(run: RecordedRun) -> list[str]:
    p = run.provenance
    configs = p.configs or run.spec.configs
    max_new_tokens = run.spec.max_new_tokens if p.max_new_tokens is None else p.max_new_tokens
    lines = [f"  configs          {len(configs)}: {', '.join(configs)}",
             f"  config axes      {_one_line(_known(p.config_axes))}",
             f"  generation       {_known(p.decoding, 'greedy')}; max_new_tokens "
             f"{_known(max_new_tokens)}; parser {_known(p.parser_version, '?')}; prompts "
             f"{_known(p.prompt_version, '?')}",
             f"  likelihood       {_known(p.likelihood, '?')}"]
    for name, m in p.models.items():
        lines.append(f"  {_one_line(name):<16} {_known(m.prompt_mode)}; BOS "
                     f"{'added' if m.add_bos else 'not added'}; EOS ids {_known(m.eos_ids)}")
    lines.append(f"  spec version     {_known(p.spec_version, '?')}")
    return lines


def _item_lines(run: RecordedRun) -> list[str]:
    p = run.provenance
    sources = p.item_sources or run.spec.items
    lines = [f"  {_known(p.items, '?')} items from {', '.join(map(_one_line, sources))}"]
    if p.load_report.files:  # a folder: which files, and what split each name says
        lines.append("  files            " + clean(", ".join(map(str, p.load_report.files)),
                                                 limit=2000, one_line=True))
    lines += [f"  warning: {clean(w, limit=2000, one_line=True)}" for w in p.load_report.warnings]
    lines.append(f"  per benchmark {_known(p.per_benchmark, 'all')}, seed "
                 f"{_known(p.seed)}, item-set sha256 {_known(p.item_set_hash)}")
    return lines


def _model_lines(m: ModelProvenance) -> list[str]:
    quant = m.quantization
    lines = [f"  source           {_one_line(m.source)}"]
    if m.revision:
        lines.append(f"  revision         {m.revision}")
    lines.append(f"  weights sha256   {_known(m.weights_sha256)}")
    if m.gguf:
        lines.append(f"  GGUF             {_one_line(m.gguf.file)}, quant type "
                     f"{m.gguf.quant_type or 'unknown'}; {_one_line(m.gguf.compute)}")
    lines.append(f"  dtype            {_known(m.dtype)}")
    lines.append("  quantisation     " + (f"{quant.weights} weights, {quant.library} "
                                          f"{quant.version} (base: {m.base_model})"
                                          if quant else "none"))
    if quant and quant.execution:
        lines.append(f"  executed as      {quant.execution}")
    lines.append(f"  tokenizer sha256 {_known(m.tokenizer_sha256)}")
    lines.append(f"  chat template    {m.chat_template_sha256 or 'none'}"
                 + (f"; arguments {_one_line(m.template_args)}" if m.template_args else ""))
    if m.backend:  # runs before this field was recorded have none
        b = m.backend
        lines.append(f"  backend          {_one_line(b.name)} "
                     f"{_one_line(b.version or '(version unknown)')}"
                     + (f" ({_one_line(b.status)})" if b.status else "")
                     + (f"; engine {_one_line(b.engine)}" if b.engine else ""))
    if m.served_model:  # --backend openai: what served it, what was refused
        lines.append(f"  served           {_one_line(m.served_model)} at "
                     f"{_one_line(m.endpoint_host)}, /v1/{m.endpoint}; "
                     f"prompts: {_one_line(m.template)}")
        for config, reason in sorted(m.refused_configs.items()):
            lines.append(f"  refused          {config}: {_one_line(reason)}")
    if m.attn_implementation:
        lines.append(f"  attention        {m.attn_implementation}"
                     + (", sharded across GPUs" if m.device_map else ""))
    return lines


def _runtime_lines(run: RecordedRun) -> list[str]:
    p = run.provenance
    lines = [f"  device {_known(p.device, '?')}, threads {_known(p.threads)}, batch size "
             f"{_known(p.batch_size)}, token budget {_known(p.batch_tokens, 'auto')}, "
             f"prefix reuse {_known(p.prefix_reuse)}, "
             f"host overlap {'on' if p.overlap else 'off'}",
             f"  padding          {_known(p.padding)}"]
    for name, b in p.batching.items():
        lines.append(f"  batches {_one_line(name)}: {b.batches} of {b.items_per_batch.min}–"
                     f"{b.items_per_batch.max} items, budgets {b.budgets_used} tokens "
                     f"({b.source}), {b.oom_retries} out-of-memory retries")
    lines.append("  libraries        " + _libraries(p.libraries))
    lines.append(f"  host {_one_line(p.host)}, python {p.python}")
    if p.fragility_tui:  # runs before this field was recorded have none
        lines.append(f"  fragility-tui    {p.fragility_tui.version}, commit "
                     f"{p.fragility_tui.git or 'unknown'}")
    lines.append(f"  started {run.started_at}, ended {run.ended_at}")
    lines.append(f"  cells {run.cells_done}/{run.cells_total}, tokens "
                 f"{run.tokens}, seconds {run.seconds or 0:.1f}")
    lines.append(f"  events           {run.events_path}")
    return lines


def _libraries(libraries: dict) -> str:
    return ", ".join(f"{name} {version}" for name, version in libraries.items() if version)


def _session_lines(sessions: tuple[Session, ...]) -> list[str]:
    """One block per process that worked on the run (a resume appends one)."""
    lines = []
    for k, s in enumerate(sessions, 1):
        lines += ["", f"Session {k}{' (resumed)' if s.resumed else ''}"]
        lines.append(f"  {s.started_at} → {s.ended_at or 'running'}, "
                     f"{s.status}, {s.cells_written} cells written")
        lines.append(f"  host {_one_line(s.host)}, device {s.device}, python "
                     f"{s.python}, commit {(s.fragility_tui and s.fragility_tui.git) or 'unknown'}")
        lines.append("  libraries " + _libraries(s.libraries))
        if s.gpu:
            lines.append(f"  GPU {_one_line(s.gpu.name)} ×{s.gpu.count}, capability "
                         f"{s.gpu.capability}, CUDA {s.gpu.cuda}, driver "
                         f"{s.gpu.driver or 'unknown'}")
        for name, attn in s.attn_implementation.items():
            b = s.batching.get(name) or Batching()
            lines.append(f"  {_one_line(name)}: attention {attn}, token budget "
                         f"{b.token_budget}, {b.batches} batches of "
                         f"{b.items_per_batch.min}–{b.items_per_batch.max} items")
    return lines
