"""REPORT_DIR/report.html: the batch as one self-contained page, a table sortable by any column
(a few lines of plain JavaScript, nothing fetched), a row per item with its verdict, cause,
hint and files."""

from __future__ import annotations

import html
import os
import urllib.parse
from pathlib import Path

from onnx_studio.engine.files import write_text_atomic
from onnx_studio.engine.protocol import BatchRecord, BatchSummary

REPORT = "report.html"

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; } .counts { margin-bottom: 1em; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; cursor: pointer; user-select: none; white-space: nowrap; }
th[aria-sort=ascending]::after { content: " \\25B2"; }
th[aria-sort=descending]::after { content: " \\25BC"; }
td.num { text-align: right; white-space: nowrap; }
tr.passed td.verdict { color: #176f2c; font-weight: 600; }
tr.failed td.verdict { color: #b3261e; font-weight: 600; }
.error { color: #b3261e; }
"""

# click a header: sort by it (numbers as numbers), click again: the other way
_SCRIPT = """
document.querySelectorAll("th").forEach(function (th, column) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0];
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
"""

_COLUMNS = ("#", "item", "verdict", "kind", "cause", "hint", "seconds", "validation",
            "files", "node")


def write_report(report_dir: Path, summary: BatchSummary, title: str = "onnx-studio batch"
                 ) -> Path:
    """Write the page for `summary` (its rows' full documents are `summary.records`);
    its path."""
    rows = "\n".join(_row(i, record, report_dir) for i, record in
                     enumerate(summary.records, start=1))
    counts = (f"{summary.total} items: {summary.passed} passed, {summary.failed} failed"
              + (f", {summary.skipped} recorded by an earlier run" if summary.skipped else "")
              + f"; {summary.seconds:.1f} s")
    error = (f'<p class="error">{_e(summary.error.message)} {_e(summary.error.hint)}</p>'
             if summary.error is not None else "")
    head = "".join(f"<th>{_e(c)}</th>" for c in _COLUMNS)
    page = (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{_e(title)}</h1>\n<p class=\"counts\">{_e(counts)}</p>\n{error}\n"
            f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>\n"
            f"<script>{_SCRIPT}</script>\n</body>\n</html>\n")
    path = report_dir / REPORT
    write_text_atomic(path, page)
    return path


def _row(number: int, record: BatchRecord, report_dir: Path) -> str:
    report = record.report
    error = report.error
    verdict = "passed" if report.ok else "failed"
    validation = ("—" if report.validation is None
                  else "passed" if report.validation.ok else "failed")
    cells = [
        f'<td class="num">{number}</td>',
        f"<td>{_e(_label(record.recipe))}<br><small>{_e(record.recipe)}</small></td>",
        f'<td class="verdict">{verdict}</td>',
        f"<td>{_e(error.kind) if error else ''}</td>",
        f"<td>{_e(error.message) if error else ''}</td>",
        f"<td>{_e(error.hint) if error else ''}</td>",
        f'<td class="num" data-sort="{record.seconds}">{record.seconds:.1f}</td>',
        f"<td>{validation}</td>",
        f"<td>{_files(record, report_dir)}</td>",
        f"<td>{_e(record.node)}</td>",
    ]
    return f'<tr class="{verdict}">' + "".join(cells) + "</tr>"


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


def _label(key: str) -> str:
    return Path(key.partition(":")[2] if key.startswith(("hf:", "hf-config:")) else key).name


def _e(text: str) -> str:
    return html.escape(text, quote=True)
