"""The harness disclosure card of a run (SPEC §10): what `runs show`, the app's run detail
and `export --what provenance` print, scoring first."""

from __future__ import annotations

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
    if not isinstance(row, dict):
        row = row.to_dict()
    p = row.get("provenance") or {}
    spec = row.get("spec") or {}
    models = p.get("models") or {}
    lines = [f"Run {row['run_id']}  status {row['status']}  grid {_one_line(row.get('grid'))}"]
    if row.get("error"):
        lines.append(f"  error: {_one_line(row['error'])}")
    lines += ["", "Scoring"]
    configs = p.get("configs") or spec.get("configs") or []
    lines.append(f"  configs          {len(configs)}: {', '.join(configs)}")
    lines.append(f"  generation       {p.get('decoding', 'greedy')}; max_new_tokens "
                 f"{_known(p.get('max_new_tokens', spec.get('max_new_tokens')))}; parser "
                 f"{p.get('parser_version', '?')}; prompts {p.get('prompt_version', '?')}")
    lines.append(f"  likelihood       {p.get('likelihood', '?')}")
    for name, m in models.items():
        lines.append(f"  {_one_line(name):<16} {_known(m.get('prompt_mode'))}; BOS "
                     f"{'added' if m.get('add_bos') else 'not added'}; EOS ids "
                     f"{_known(m.get('eos_ids'))}")
    lines.append(f"  spec version     {p.get('spec_version', '?')}")
    lines += ["", "Items"]
    lines.append(f"  {p.get('items', '?')} items from {', '.join(map(_one_line, p.get('item_sources') or spec.get('items') or []))}")
    load = p.get("load_report") or {}
    if load.get("files"):  # a folder: which files, and what split each name says
        lines.append("  files            " + clean(", ".join(map(str, load["files"])),
                                                 limit=2000, one_line=True))
    lines += [f"  warning: {clean(w, limit=2000, one_line=True)}"
              for w in load.get("warnings") or []]
    per_benchmark = p.get("per_benchmark")  # None: every item of each benchmark
    lines.append(f"  per benchmark {_known(per_benchmark, 'all')}, seed "
                 f"{_known(p.get('seed'))}, item-set sha256 {_known(p.get('item_set_hash'))}")
    for name, m in models.items():
        quant = m.get("quantization")
        lines += ["", f"Model {_one_line(name)}"]
        lines.append(f"  source           {_one_line(m.get('source'))}")
        if m.get("revision"):
            lines.append(f"  revision         {m['revision']}")
        lines.append(f"  weights sha256   {_known(m.get('weights_sha256'))}")
        gguf = m.get("gguf")
        if gguf:
            lines.append(f"  GGUF             {_one_line(gguf.get('file'))}, quant type "
                         f"{gguf.get('quant_type') or 'unknown'}; {_one_line(gguf.get('compute'))}")
        lines.append(f"  dtype            {_known(m.get('dtype'))}")
        lines.append("  quantisation     " + (f"{quant['weights']} weights, {quant['library']} "
                                              f"{quant['version']} (base: {m.get('base_model')})"
                                              if quant else "none"))
        if quant and quant.get("execution"):
            lines.append(f"  executed as      {quant['execution']}")
        lines.append(f"  tokenizer sha256 {_known(m.get('tokenizer_sha256'))}")
        lines.append(f"  chat template    {m.get('chat_template_sha256') or 'none'}"
                     + (f"; arguments {_one_line(m['template_args'])}"
                        if m.get("template_args") else ""))
        backend = m.get("backend")
        if isinstance(backend, dict):  # runs before this field was recorded have none
            lines.append(f"  backend          {_one_line(backend.get('name'))} "
                         f"{_one_line(backend.get('version') or '(version unknown)')}"
                         + (f" ({_one_line(backend['status'])})" if backend.get("status") else "")
                         + (f"; engine {_one_line(backend['engine'])}"
                            if backend.get("engine") else ""))
        if m.get("served_model"):  # --backend openai: what served it, what was refused
            lines.append(f"  served           {_one_line(m['served_model'])} at "
                         f"{_one_line(m.get('endpoint_host'))}, /v1/{m.get('endpoint')}; "
                         f"prompts: {_one_line(m.get('template'))}")
            for config, reason in sorted((m.get("refused_configs") or {}).items()):
                lines.append(f"  refused          {config}: {_one_line(reason)}")
        if m.get("attn_implementation"):
            lines.append(f"  attention        {m['attn_implementation']}"
                         + (", sharded across GPUs" if m.get("device_map") else ""))
    libs = p.get("libraries") or {}
    lines += ["", "Runtime"]
    lines.append(f"  device {p.get('device', '?')}, threads {_known(p.get('threads'))}, batch "
                 f"size {_known(p.get('batch_size'))}, token budget {p.get('batch_tokens', 'auto')}, "
                 f"prefix reuse {_known(p.get('prefix_reuse'))}, "
                 f"host overlap {'on' if p.get('overlap') else 'off'}")
    lines.append(f"  padding          {_known(p.get('padding'))}")
    for name, b in (p.get("batching") or {}).items():
        items = b.get("items_per_batch") or {}
        lines.append(f"  batches {_one_line(name)}: {b.get('batches')} of {items.get('min')}–"
                     f"{items.get('max')} items, budgets {b.get('budgets_used')} tokens "
                     f"({b.get('source')}), {b.get('oom_retries')} out-of-memory retries")
    lines.append("  libraries        " + ", ".join(f"{k} {v}" for k, v in libs.items() if v))
    lines.append(f"  host {_one_line(p.get('host'))}, python {p.get('python')}")
    code = p.get("fragility_tui") or {}
    if code:  # runs before this field was recorded have none
        lines.append(f"  fragility-tui    {code.get('version')}, commit {code.get('git') or 'unknown'}")
    lines.append(f"  started {row.get('started_at')}, ended {row.get('ended_at')}")
    lines.append(f"  cells {row.get('cells_done')}/{row.get('cells_total')}, tokens "
                 f"{row.get('tokens')}, seconds {row.get('seconds') or 0:.1f}")
    lines.append(f"  events           {row.get('events_path')}")
    lines += _session_lines(p.get("sessions") or [])
    return "\n".join(lines)


def _session_lines(sessions: list[dict]) -> list[str]:
    """One block per process that worked on the run (a resume appends one)."""
    lines = []
    for k, s in enumerate(sessions, 1):
        code = s.get("fragility_tui") or {}
        libs = s.get("libraries") or {}
        lines += ["", f"Session {k}{' (resumed)' if s.get('resumed') else ''}"]
        lines.append(f"  {s.get('started_at')} → {s.get('ended_at') or 'running'}, "
                     f"{s.get('status')}, {s.get('cells_written')} cells written")
        lines.append(f"  host {_one_line(s.get('host'))}, device {s.get('device')}, python "
                     f"{s.get('python')}, commit {code.get('git') or 'unknown'}")
        lines.append("  libraries " + ", ".join(f"{k} {v}" for k, v in libs.items() if v))
        gpu = s.get("gpu")
        if gpu:
            lines.append(f"  GPU {_one_line(gpu.get('name'))} ×{gpu.get('count')}, capability "
                         f"{gpu.get('capability')}, CUDA {gpu.get('cuda')}, driver "
                         f"{gpu.get('driver') or 'unknown'}")
        for name, attn in (s.get("attn_implementation") or {}).items():
            b = (s.get("batching") or {}).get(name) or {}
            items = b.get("items_per_batch") or {}
            lines.append(f"  {_one_line(name)}: attention {attn}, token budget "
                         f"{b.get('token_budget')}, {b.get('batches')} batches of "
                         f"{items.get('min')}–{items.get('max')} items")
    return lines
