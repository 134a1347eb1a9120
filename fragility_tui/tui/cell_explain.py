"""What a cell was: the item as shown, the exact prompt a model saw, its raw output and how
it was parsed, or its option log-likelihoods — as markup-free Text (no widgets here)."""

from __future__ import annotations


import numpy as np
from rich.text import Text

from fragility_tui.tui.sanitize import block, clean
from fragility_tui.tui.widgets import mark_text




def bit_mark(correct: bool, present: bool) -> Text:
    """One character: ✓ correct, ✗ wrong, · no cell."""
    return mark_text("·" if not present else "✓" if correct else "✗")


ITEM_TEXT_LIMIT = 4_000  # characters of one question/choice/output shown in the drill-down


def item_text(item) -> Text:
    if item is None:
        return Text("(item text not in the store)", style="dim")
    text = Text()
    text.append("Question\n", style="bold")
    text.append_text(block(item.question, limit=ITEM_TEXT_LIMIT))
    text.append("\n\nChoices (native order, gold marked)\n", style="bold")
    for j, choice in enumerate(item.choices):
        mark = "★" if j == item.gold else " "
        text.append(f"{mark} {j}: ", style="bold green" if j == item.gold else "")
        text.append_text(block(choice, limit=ITEM_TEXT_LIMIT))
        text.append("\n")
    return text


def truth_text(truth: dict | None, item_uid: str, models) -> Text | None:
    """A synthetic grid's true parameters for one item and the models in view (what the
    generator drew, fragility_tui.grid.simulate), or None when the grid has none."""
    if not truth or item_uid not in (truth.get("item_uids") or ()):
        return None
    k = truth["item_uids"].index(item_uid)
    b, a = truth["difficulty"][k], truth["discrimination"][k]
    text = Text()
    text.append(f"True parameters (SYNTHETIC generator v{truth.get('generator_version', '?')})\n",
                style="bold")
    text.append(f"item: 2PL difficulty b {b:+.2f} · discrimination a {a:.2f} · harness "
                f"sensitivity s {truth['sensitivity'][k]:.2f} · closest distractor D "
                f"{truth['closest_distractor'][k]:+.2f} (the gold's is 0)\n")
    text.append("true rank  ability θ  likelihood λ  gold advantage a(θ−b)  model\n",
                style="dim")
    known = truth.get("models") or {}
    for model in sorted(models, key=lambda m: (known.get(m) or {}).get("true_rank", 1 << 30)):
        t = known.get(model)
        if t is None:
            continue
        text.append(f"{t['true_rank']:>9}  {t['ability']:+9.2f}  {t['likelihood_ability']:+12.2f}"
                    f"  {a * (t['ability'] - b):+21.2f}  ")
        text.append(clean(model, one_line=True, limit=200) + "\n")
    return text


def is_runner_config(config_id: str) -> bool:
    from fragility_tui.harness.config_axes import is_runner_config as runner

    return runner(config_id)


def cell_detail(item, model: str, config_id: str, cell: dict | None, seed: int,
                chat=None, items=None) -> Text:
    """Everything that explains one correctness bit, all untrusted text sanitised. chat: the
    model's harness.chat.ChatTemplate (None: nothing recorded, e.g. an imported grid);
    items: the grid's items by uid (a +kN cell's recorded examples are looked up there)."""
    text = Text()
    text.append(f"\n{clean(model, one_line=True, limit=200)} × {config_id}\n", style="bold underline")
    if cell is None:
        text.append("no cell recorded for this model and config\n", style="dim")
        return text
    text.append("correct\n" if cell["correct"] else "wrong\n",
                style="bold green" if cell["correct"] else "bold red")
    perm = _perm(cell.get("permutation"))
    prompt = None
    if not is_runner_config(config_id):  # another harness's: its prompt is the log's
        text.append("imported from another harness's log: the prompt and answer are the "
                    "log's own\n", style="dim")
        if cell.get("prompt"):
            text.append("prompt (as the log shows it)\n", style="bold")
            text.append_text(block(cell["prompt"], limit=ITEM_TEXT_LIMIT, style="on grey11"))
            text.append("\n")
    elif item is not None and not item.choices:  # a grid imported from cells alone
        text.append("no item text in this grid (imported from cells alone): `fragility-tui "
                    "import FILE --items ITEMS` with the item file shows the prompt\n",
                    style="dim")
    elif item is not None:
        try:
            from fragility_tui.harness.render import render

            prompt = render(item, config_id, seed, permutation=perm,
                            examples=_examples(cell, items))
        except (ValueError, KeyError) as exc:
            text.append(f"cannot re-render the prompt: {clean(exc, limit=300)}\n", style="red")
    if cell.get("permutation"):
        text.append(f"permutation {clean(cell['permutation'], one_line=True, limit=20)} "
                    "(display position j shows native choice p[j])\n")
    if prompt is not None:
        _append_modifiers(text, config_id)
        _append_prompt(text, prompt, _template_of(config_id, chat))
    _append_output(text, cell, prompt)
    scores = cell.get("scores")
    if scores:
        from fragility_tui.harness.render import LabelPrompt

        if isinstance(prompt, LabelPrompt):
            _append_label_scores(text, scores, cell.get("pred"))
        else:
            _append_scores(text, scores, item)
    if cell.get("near_tie"):
        text.append(f"near-tie: margin {cell['margin']:.3g} is inside the run's rounding "
                    "tolerance; a flip here is rounding, not the harness\n", style="bold yellow")
    shown = {"margin": lambda v: f"margin {v:.3g}",
             "tokens": lambda v: f"tokens {int(v):,}", "ms": lambda v: f"{round(v):,} ms",
             "run_id": lambda v: f"run {v}",
             "prompt_sha": lambda v: f"prompt tokens sha256 {v[:16]}…"}
    extras = [show(cell[k]) for k, show in shown.items() if cell.get(k) is not None]
    if extras:
        text.append(clean(" · ".join(extras), one_line=True, limit=300) + "\n", style="dim")
    return text


def _examples(cell: dict, items) -> tuple:
    """The solved examples a +kN cell recorded, as items (KeyError names a missing one)."""
    uids = cell.get("examples") or ()
    found = tuple((items or {}).get(uid) for uid in uids)
    missing = [uid for uid, it in zip(uids, found) if it is None]
    if missing:
        raise KeyError(f"its example {missing[0]!r} is not among the grid's items")
    return found


def _append_modifiers(text: Text, config_id: str) -> None:
    """What the config's modifiers (SPEC v5 §2) did to the prompt's tokens."""
    from fragility_tui.harness.configs import get_config

    config = get_config(config_id)
    notes = {"on": "a BOS token forced on (+bos)", "off": "the BOS token forced off (+nobos)",
             None: None}[config.bos]
    template = {"raw": "no chat template (+raw)", "chat": "the chat template (+chat)",
                None: None}[config.template]
    shots = f"{config.shots} solved examples of the benchmark first (+k{config.shots})" \
        if config.shots else None
    shown = [n for n in (notes, template, shots) if n]
    if shown:
        text.append("modifiers: " + "; ".join(shown) + "\n", style="dim")


def _template_of(config_id: str, chat):
    """The model's recorded chat template as this config used it: +raw reads the raw text
    whatever the model's mode, +chat the template's rendering."""
    from dataclasses import replace

    from fragility_tui.harness.configs import get_config

    wanted = get_config(config_id).template
    if wanted is None or chat is None:
        return chat
    return replace(chat, mode=wanted)


def _append_prompt(text: Text, prompt, chat=None) -> None:
    from fragility_tui.harness.render import ClozePrompt, LabelPrompt

    if isinstance(prompt, LabelPrompt):
        shown, note = _as_seen(prompt, chat) if prompt.messages else (prompt.context, "")
        text.append("context (letter likelihood: " + (
            f"the chat template's assistant turn; {note})\n" if prompt.messages else
            "the raw generation prompt)\n"), style="bold")
        body = shown if shown is not None else prompt.messages[-1]["content"]
        text.append_text(block(body, limit=3 * ITEM_TEXT_LIMIT, style="on grey11"))
        text.append("\nlabels scored after it (display order)\n", style="bold")
        for j, cont in enumerate(prompt.continuations):
            text.append(f"  {j}: {cont!r} → native choice {prompt.permutation[j]}\n")
        return
    if isinstance(prompt, ClozePrompt):
        text.append("context (likelihood scoring)\n", style="bold")
        text.append_text(block(prompt.context, limit=ITEM_TEXT_LIMIT, style="on grey11"))
        text.append("\ncontinuations\n", style="bold")
        for j, cont in enumerate(prompt.continuations):
            text.append(f"  {j}: ")
            text.append_text(block(cont, limit=ITEM_TEXT_LIMIT))
            text.append("\n")
        return
    shown, note = _as_seen(prompt, chat)
    text.append("prompt as the model saw it" if shown is not None else "prompt", style="bold")
    text.append(f" ({note})\n", style="dim")
    body = shown if shown is not None else prompt.text if chat is None else \
        prompt.messages[-1]["content"]
    text.append_text(block(body, limit=3 * ITEM_TEXT_LIMIT, style="on grey11"))
    text.append("\n")


def _as_seen(prompt, chat) -> tuple[str | None, str]:
    """(the exact text the model was given, or None when it cannot be rebuilt; why)."""
    if chat is None:
        return None, ("rendered as a raw prompt: this grid records no prompt mode for the "
                      "model (an imported or synthetic grid)")
    if chat.mode != "chat":
        return prompt.text, "raw prompt: this model read the text, no chat template"
    sha = (chat.sha256 or "?")[:16]
    if chat.template is None:
        return None, (f"the run recorded only its chat template's hash ({sha}…), not its "
                      "text: below is the user message the template wrapped, without "
                      "the template's own tokens")
    if not chat.verified:
        return None, (f"the recorded chat template does not match its hash ({sha}…): below "
                      "is the user message it wrapped")
    from fragility_tui.harness.chat import render_chat

    try:
        rendered = render_chat(chat, prompt.messages)
    except Exception as exc:  # a template this sandbox cannot run: say so, show the body
        return None, f"the chat template could not be rendered here ({clean(exc, limit=200)})"
    return rendered, (f"the chat template's rendering, template sha256 {sha}…; the question "
                      "and options are one user message, the template adds the rest")


def _append_output(text: Text, cell: dict, prompt) -> None:
    raw = cell.get("raw_output")
    if raw is None and cell.get("scores") is None:
        text.append("no raw output stored (imported or synthetic cell)\n", style="dim")
    if raw is not None:
        text.append("raw output\n", style="bold")
        text.append_text(block(raw, limit=ITEM_TEXT_LIMIT, style="on grey11"))
        text.append("\n")
        if prompt is not None and hasattr(prompt, "labels"):
            from fragility_tui.harness.parser import explain

            text.append("parse: ", style="bold")
            text.append(clean(explain(raw, prompt.labels, prompt.options), limit=2000) + "\n")
    pred = cell.get("pred")
    if pred is not None:
        label = "unparsed (counted wrong)" if pred == -1 else f"native choice {pred}"
        text.append(f"prediction: {label}\n")


def _append_scores(text: Text, scores: list, item) -> None:
    """Raw log-likelihoods and lm-eval's acc_norm (per character of the option text)."""
    text.append("option scores (raw log-likelihood · per character = acc_norm)\n", style="bold")
    lengths = [len(c.strip()) for c in item.choices] if item is not None else [0] * len(scores)
    norm = [s / n if n else float("nan") for s, n in zip(scores, lengths)]
    best = int(np.nanargmax(norm)) if any(n == n for n in norm) else -1
    for j, (s, v) in enumerate(zip(scores, norm)):
        mark = "→" if j == best else " "
        text.append(f" {mark} {j}: {s:10.4f} · {v:8.4f}\n")


def _append_label_scores(text: Text, scores: list, pred) -> None:
    """A letter-likelihood cell's label log-likelihoods, native order; the highest (the
    first shown on ties) is the prediction, with no length normalisation."""
    text.append("label scores (raw log-likelihood, native order; → the prediction, the "
                "highest)\n", style="bold")
    for j, s in enumerate(scores):
        text.append(f" {'→' if j == pred else ' '} {j}: {s:10.4f}\n")


def _perm(value) -> tuple[int, ...] | None:
    if not value:
        return None
    try:
        return tuple(int(ch) for ch in str(value))
    except ValueError:
        return None


def fmt_number(x) -> str:
    return "—" if x is None or x != x else f"{x:.2f}"
