"""REPORT_DIR/report.html: the batch as one self-contained page people read (no network,
nothing fetched; a few lines of plain JavaScript sort and filter it).

- The counts by verdict: passed, inconclusive, failed by error kind, and the rows an earlier
  run recorded (--resume).
- A row per item: its verdict (and a Hugging Face generation check in one line), the exporter
  that ran (and the one it fell back from), the opset, the graph's nodes, the size of what it
  wrote, its worst output (largest difference and its ratio to the tolerance that judged it),
  the seconds of each stage, its warnings, and for a failure its kind, cause and hint; links
  to its files.
- The failures grouped by cause, each group with its hint and its items.
"""

from __future__ import annotations

import html
import os
import urllib.parse
from collections import Counter
from pathlib import Path

from onnx_studio.engine.batch.records import REPORT
from onnx_studio.engine.file_set import write_file
from onnx_studio.engine.protocol import BatchRecord, BatchSummary, ExportReport
from onnx_studio.engine.protocol.batch import report_verdict

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.5em; }
.counts span { margin-right: 1.2em; } .counts b { font-size: 1.2em; }
.passed { color: #176f2c; } .inconclusive { color: #8a5a00; } .failed { color: #b3261e; }
.filters { margin: 0.8em 0; } .filters input { width: 24em; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; white-space: nowrap; }
td.verdict { font-weight: 600; } small { color: #666; }
.error { color: #b3261e; } details { margin: 0.4em 0; }
"""

# click a header: sort by it (numbers as numbers), click again: the other way; the text box
# and the verdict choice hide the rows that do not match
_SCRIPT = """
var table = document.getElementById("items"), body = table.tBodies[0];
table.querySelectorAll("th").forEach(function (th, column) {
  th.addEventListener("click", function () {
    var up = th.getAttribute("aria-sort") !== "ascending";
    table.querySelectorAll("th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", up ? "ascending" : "descending");
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[column].dataset.sort || a.cells[column].textContent;
      var y = b.cells[column].dataset.sort || b.cells[column].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var order = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return up ? order : -order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  });
});
function filter() {
  var text = document.getElementById("text").value.toLowerCase();
  var verdict = document.getElementById("verdict").value;
  Array.prototype.forEach.call(body.rows, function (row) {
    var show = (!verdict || row.dataset.verdict === verdict)
      && (!text || row.textContent.toLowerCase().indexOf(text) >= 0);
    row.style.display = show ? "" : "none";
  });
}
document.getElementById("text").addEventListener("input", filter);
document.getElementById("verdict").addEventListener("change", filter);
"""

_COLUMNS = ("#", "item", "verdict", "exporter", "opset", "nodes", "size", "worst output",
            "diff / tol", "seconds", "warnings", "error", "files")


def write_report(report_dir: Path, summary: BatchSummary, title: str = "onnx-studio batch"
                 ) -> Path:
    """Write the page for `summary` (its rows' full documents are `summary.records`);
    its path."""
    rows = "\n".join(_row(i, record, report_dir) for i, record in
                     enumerate(summary.records, start=1))
    error = (f'<p class="error">{_e(summary.error.message)} {_e(summary.error.hint)}</p>'
             if summary.error is not None else "")
    head = "".join(f"<th>{_e(c)}</th>" for c in _COLUMNS)
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{_e(title)}</h1>\n{_counts(summary)}\n{error}\n"
            '<div class="filters"><input id="text" type="search" '
            'placeholder="filter: a name, a kind, a word of a message"> '
            '<select id="verdict"><option value="">every verdict</option>'
            '<option>passed</option><option>inconclusive</option><option>failed</option>'
            "</select></div>\n"
            f'<table id="items">\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n'
            f"</table>\n{_failures(summary.records)}\n<script>{_SCRIPT}</script>\n"
            "</body>\n</html>\n")
    path = report_dir / REPORT
    write_file(path, page.encode("utf-8"), what="The report")
    return path


def _counts(summary: BatchSummary) -> str:
    verdicts = Counter(report_verdict(r.report) for r in summary.records)
    kinds = Counter(r.report.error.kind for r in summary.records if r.report.error is not None)
    failed = ", ".join(f"{n} {k}" for k, n in kinds.most_common())
    parts = [f'<span class="passed"><b>{verdicts["passed"]}</b> passed</span>',
             f'<span class="inconclusive"><b>{verdicts["inconclusive"]}</b> inconclusive</span>',
             f'<span class="failed"><b>{verdicts["failed"]}</b> failed'
             + (f" ({_e(failed)})" if failed else "") + "</span>",
             f"<span>of {summary.total} items in {summary.seconds:.1f} s</span>"]
    if summary.skipped:
        parts.append(f"<span>{summary.skipped} recorded by an earlier run</span>")
    return f'<p class="counts">{"".join(parts)}</p>'


def _row(number: int, record: BatchRecord, report_dir: Path) -> str:
    report = record.report
    verdict = report_verdict(report)
    graph = report.graph
    worst, ratio = _worst(report)
    size = sum(stamp.size for stamp in record.outputs)
    cells = [
        f'<td class="num">{number}</td>',
        f"<td>{_e(_label(record.recipe))}<br><small>{_e(record.recipe)}</small></td>",
        f'<td class="verdict {verdict}">{verdict}{_because(report)}</td>',
        f"<td>{_e(report.exporter or '')}"
        + (f"<br><small>fell back from {_e(report.fallback.tried)}: "
           f"{_e(report.fallback.message)}</small>" if report.fallback else "") + "</td>",
        f'<td class="num">{report.opset or ""}</td>',
        f'<td class="num">{graph.nodes if graph else ""}</td>',
        f'<td class="num" data-sort="{size}">{_bytes(size) if size else ""}</td>',
        f"<td>{worst}</td>",
        f'<td class="num" data-sort="{ratio if ratio is not None else -1}">'
        f"{'' if ratio is None else f'{ratio:.3g}'}</td>",
        f'<td class="num" data-sort="{record.seconds}">{record.seconds:.1f}'
        f"<br><small>{_e(_stages(report))}</small></td>",
        f"<td>{_warnings(report)}</td>",
        f"<td>{_error(report)}</td>",
        f"<td>{_files(record, report_dir)}</td>",
    ]
    return f'<tr data-verdict="{verdict}">' + "".join(cells) + "</tr>"


def _because(report: ExportReport) -> str:
    """Under the verdict: why it is inconclusive, and a generation check in one line."""
    validation = report.validation
    if validation is None:
        return ""
    said = ""
    if validation.verdict == "inconclusive":
        said = f"<br><small>{_e(validation.message or '')} {_e(validation.hint or '')}</small>"
    if validation.generation is not None:
        said += f"<br><small>{_e(validation.generation.summary())}</small>"
    return said


def _worst(report: ExportReport) -> tuple[str, float | None]:
    """The output with the largest difference against its tolerance (atol + rtol * its
    scale), in words, and that ratio (None when no output was compared)."""
    validation = report.validation
    if validation is None or not validation.outputs:
        return "", None
    best: tuple[float, str] | None = None
    for output in validation.outputs:
        diff = output.max_abs_diff
        if not isinstance(diff, float | int):
            continue
        scale = output.reference_scale if isinstance(output.reference_scale, float) else 0.0
        ratio = float(diff) / (validation.atol + validation.rtol * scale or 1e-30)
        rule = " (by its scale)" if output.rule == "scale" else ""
        text = f"{_e(output.name)}: {float(diff):.3g}{rule}"
        if best is None or ratio > best[0]:
            best = (ratio, text)
    return ("", None) if best is None else (best[1], best[0])


def _stages(report: ExportReport) -> str:
    return " · ".join(f"{stage} {seconds:.1f}" for stage, seconds in report.seconds.items())


def _warnings(report: ExportReport) -> str:
    if not report.warnings:
        return ""
    kinds = Counter(w.category for w in report.warnings)
    items = "".join(f"<li>{_e(w.category)}: {_e(w.message)}</li>" for w in report.warnings)
    return (f"<details><summary>{len(report.warnings)}: "
            f"{_e(', '.join(kinds))}</summary><ul>{items}</ul></details>")


def _error(report: ExportReport) -> str:
    error = report.error
    if error is None:
        return ""
    return (f"<b>{_e(error.kind)}</b>: {_e(error.message)}"
            + (f"<br><small>{_e(error.hint)}</small>" if error.hint else ""))


def _failures(records: list[BatchRecord]) -> str:
    """The failures grouped by cause (kind and hint), largest group first."""
    groups: dict[tuple[str, str], list[BatchRecord]] = {}
    for record in records:
        error = record.report.error
        if error is not None:
            groups.setdefault((error.kind, error.hint or error.message), []).append(record)
    if not groups:
        return ""
    parts = ["<h2>Failures by cause</h2>"]
    for (kind, cause), members in sorted(groups.items(), key=lambda g: -len(g[1])):
        names = ", ".join(_e(_label(r.recipe)) for r in members)
        first = members[0].report.error
        message = _e(first.message) if first is not None else ""
        parts.append(f"<details open><summary><b>{_e(kind)}</b> × {len(members)}: "
                     f"{_e(cause)}</summary><p>{message}</p><p><small>{names}</small></p>"
                     "</details>")
    return "\n".join(parts)


def _files(record: BatchRecord, report_dir: Path) -> str:
    """Links to what the item wrote: its file, or each file of a folder export."""
    report = record.report
    paths = [f.path for f in report.files] if report.files else (
        [report.output] if report.output else [])
    return "<br>".join(f'<a href="{_href(p, report_dir)}">{_e(Path(p).name)}</a>'
                       for p in paths)


def _href(path: str, report_dir: Path) -> str:
    """A link that works when the report folder moves together with the files inside it."""
    target = Path(path)
    try:
        relative = os.path.relpath(target, report_dir.resolve())
    except ValueError:  # another drive (Windows)
        return target.resolve().as_uri()
    return urllib.parse.quote(Path(relative).as_posix())


def _bytes(size: int) -> str:
    value, unit = float(size), "B"
    for bigger in ("KB", "MB", "GB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.0f} B" if unit == "B" else f"{value:.1f} {unit}"


def _label(key: str) -> str:
    return Path(key.partition(":")[2] if key.startswith(("hf:", "hf-config:")) else key).name


def _e(text: str) -> str:
    return html.escape(text, quote=True)
