"""A validation saved as one self-contained HTML file (tables, a Hugging Face export's
generation check step by step, and plots as inline SVG) and as CSV (one row per trial and
output): something to attach to a bug report or a review.

Qt-free: it reads the typed validation (onnx_studio.engine.protocol.Validation) and the plot file it
wrote (onnx_studio.engine.validation.metrics.load_plots).
"""

from __future__ import annotations

import csv
import html
import io
import math
from pathlib import Path
from typing import Any

from onnx_studio.engine.file_set import write_file
from onnx_studio.engine.protocol import Generation, TrialOutput, Validation, known

__all__ = ["CSV_FIELDS", "to_csv", "to_html", "write_report"]

CSV_FIELDS = ("trial", "kind", "sizes", "trial_ok", "output", "passed", "max_abs_diff",
              "max_rel_diff", "mean_abs_diff", "cosine_similarity", "mismatched", "elements",
              "shape", "onnx_shape", "dtype", "onnx_dtype", "message")


def _rows(validation: Validation) -> list[dict[str, Any]]:
    """One row per trial and output (a trial without outputs: one row, its fields empty)."""
    rows = []
    for i, trial in enumerate(validation.trials):
        sizes = " ".join(f"{k}={v}" for k, v in (trial.sizes or {}).items())
        outputs: list[TrialOutput | None] = list(trial.outputs or []) or [None]
        for output in outputs:
            rows.append({"trial": i + 1, "kind": trial.kind, "sizes": sizes,
                         "trial_ok": trial.ok, "output": output.name if output else "",
                         **{k: getattr(output, k, None) for k in CSV_FIELDS[5:-1]},
                         "message": (output.message if output else "") or trial.message or ""})
    return rows


def to_csv(validation: Validation) -> str:
    """One row per trial and output, with the numbers as the worker computed them."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for row in _rows(validation):
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buffer.getvalue()


def _number(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return html.escape("" if value is None else str(value))


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_number(v)}</td>" for v in row) + "</tr>"
                   for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _svg_scatter(reference: Any, candidate: Any, size: int = 260) -> str:
    """ONNX Runtime against PyTorch, one dot per sampled element, the diagonal for equal."""
    pairs = [(float(r), float(c)) for r, c in zip(reference[:2000], candidate[:2000],
                                                   strict=False)
             if math.isfinite(float(r)) and math.isfinite(float(c))]
    if not pairs:
        return "<p>(no finite values to plot)</p>"
    lo = min(min(p) for p in pairs)
    hi = max(max(p) for p in pairs)
    span = (hi - lo) or 1.0

    def at(v: float) -> float:
        return 10 + (v - lo) / span * (size - 20)

    dots = "".join(f"<circle cx='{at(r):.1f}' cy='{size - at(c):.1f}' r='1.5'/>"
                   for r, c in pairs)
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{size}' height='{size}'>"
            f"<rect width='{size}' height='{size}' fill='white' stroke='#999'/>"
            f"<line x1='10' y1='{size - 10}' x2='{size - 10}' y2='10' stroke='#bbb'/>"
            f"<g fill='#3574f0'>{dots}</g></svg>")


def _svg_histogram(counts: Any, edges: Any, width: int = 320, height: int = 160) -> str:
    """How the errors (ONNX Runtime minus PyTorch) are spread."""
    values = [int(c) for c in counts]
    if not values:
        return "<p>(no errors to plot)</p>"
    top = max(values) or 1
    bar = (width - 20) / len(values)
    bars = "".join(
        f"<rect x='{10 + i * bar:.1f}' y='{height - 20 - c / top * (height - 30):.1f}' "
        f"width='{max(bar - 1, 1):.1f}' height='{c / top * (height - 30):.1f}'/>"
        for i, c in enumerate(values))
    return (f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}'>"
            f"<rect width='{width}' height='{height}' fill='white' stroke='#999'/>"
            f"<g fill='#e8912d'>{bars}</g><text x='10' y='{height - 5}' font-size='10'>"
            f"{float(edges[0]):.3g}</text><text x='{width - 60}' y='{height - 5}' "
            f"font-size='10'>{float(edges[-1]):.3g}</text></svg>")


def _generation(generation: Generation) -> str:
    """The generation check: its line, the prompt and continuation, what constant greedy tokens
    prove, and one row per step (the teacher-forced steps, then the greedy view's tokens)."""
    steps = generation.continuation
    parts = ["<h2>Generation</h2>",
             f"<p class='{'' if generation.passed is not False else 'bad'}'>"
             f"{html.escape(generation.summary())}</p>"]
    if generation.message:
        parts.append(f"<p class='bad'>{html.escape(generation.message)}</p>")
    if generation.note:
        parts.append(f"<p>{html.escape(generation.note)}</p>")
    facts = []
    if generation.prompt_tokens:
        facts.append("<b>Prompt</b> " + ", ".join(map(str, generation.prompt_tokens)))
    if steps is not None:
        facts.append(f"<b>Continuation</b> (seed {steps.seed}) "
                     + ", ".join(map(str, steps.tokens)))
    if facts:
        parts.append("<p>" + "<br>".join(facts) + "</p>")
    rows = []
    greedy = max(len(generation.onnx_tokens), len(generation.torch_tokens))
    for index in range(max(len(steps.steps) if steps else 0, greedy)):
        step = steps.steps[index] if steps is not None and index < len(steps.steps) else None
        rows.append([index + 1, None if step is None else step.passed,
                     None if step is None else step.past,
                     None if step is None else step.max_abs_diff,
                     None if step is None else step.max_rel_diff,
                     None if step is None else step.onnx_top1,
                     None if step is None else step.torch_top1,
                     _at(generation.onnx_tokens, index), _at(generation.torch_tokens, index)])
    parts.append(_table(["step", "passed", "cache", "max abs diff", "max rel diff",
                         "top-1 ONNX", "top-1 PyTorch", "greedy ONNX", "greedy PyTorch"], rows))
    parts.append("<p class='note'>The steps: the prompt then a fixed random continuation fed "
                 "to the ONNX files step by step (the cache they return fed back), each step's "
                 "logits against one PyTorch forward over the whole sequence, |diff| &le; atol "
                 "+ rtol&middot;|ref|; they decide. The greedy tokens: ONNX Runtime's argmax "
                 "against transformers' generate, both fed generate's tokens.</p>")
    return "".join(parts)


def _at(tokens: list[int], index: int) -> int | None:
    return tokens[index] if index < len(tokens) else None


def to_html(validation: Validation, onnx: str | None, recipe: str,
            plots: dict[str, dict[str, Any]] | None = None) -> str:
    """The whole validation as one HTML page that needs no other file."""
    verdict = {"passed": "passed", "failed": "FAILED",
               "inconclusive": "inconclusive"}[validation.verdict]
    parts = [f"<h1>Validation {verdict}</h1>",
             f"<p><b>File</b> {html.escape(onnx or '?')}<br><b>Recipe</b> {html.escape(recipe)}"
             f"<br><b>Tolerance</b> rtol {validation.rtol}, atol {validation.atol}</p>"]
    if validation.message:
        parts.append(f"<p class='bad'>{html.escape(validation.message)}</p>")
    parts.append("<h2>Outputs (worst trial)</h2>" + _table(
        ["output", "passed", "max abs diff", "max rel diff", "mismatched", "message"],
        [[o.name, o.passed, o.max_abs_diff, o.max_rel_diff, known(o.mismatched), o.message]
         for o in validation.outputs]))
    rows = _rows(validation)
    parts.append("<h2>Trials</h2>" + _table(
        ["trial", "kind", "sizes", "output", "passed", "max abs diff", "shape", "onnx shape",
         "dtype", "onnx dtype", "message"],
        [[r["trial"], r["kind"], r["sizes"], r["output"], r["passed"], r["max_abs_diff"],
          r["shape"], r["onnx_shape"], r["dtype"], r["onnx_dtype"], r["message"]]
         for r in rows]))
    if validation.generation is not None:
        parts.append(_generation(validation.generation))
    for name, data in (plots or {}).items():
        parts.append(f"<h2>{html.escape(name)} ({html.escape(str(data['trial']))})</h2>"
                     "<div class='plots'>"
                     + _svg_scatter(data["reference"], data["candidate"])
                     + _svg_histogram(data["hist_counts"], data["hist_edges"]) + "</div>"
                     "<p class='note'>Left: ONNX Runtime (up) against PyTorch (right), the "
                     "diagonal where they agree. Right: how the errors are spread.</p>")
    style = ("body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
             "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}"
             ".bad{color:#b3261e}.plots{display:flex;gap:16px}.note{color:#666;font-size:12px}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>Validation {verdict}"
            f"</title><style>{style}</style></head><body>{''.join(parts)}</body></html>\n")


def write_report(path: Path, validation: Validation, onnx: str | None, recipe: str,
                 plot_file: Path | None) -> tuple[Path, Path]:
    """Write `path` (.html) and the .csv beside it; both paths."""
    plots = None
    if plot_file is not None and plot_file.is_file():
        from onnx_studio.engine.validation.metrics import load_plots

        plots = load_plots(plot_file)
    html_path = path.with_suffix(".html")
    csv_path = path.with_suffix(".csv")
    write_file(html_path, to_html(validation, onnx, recipe, plots).encode("utf-8"),
               what="The report")
    write_file(csv_path, to_csv(validation).encode("utf-8"), what="The report")
    return html_path, csv_path
