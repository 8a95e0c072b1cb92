"""PropertiesPanel: everything the model says about the selected node, tensor or group."""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QAbstractTableModel, Qt, QUrl, Signal
from PySide6.QtGui import QDesktopServices, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QTableView,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.engine.graph.layout import GraphLayout
from onnx_studio.engine.graph.model import GraphModel, format_shape

_MAX_STATS = 50_000_000  # elements; larger initializers get shape only (memory, time)
# Wide enough for a key beside its value and a tensor's type (float32[batch×3×32×32]) on a
# line; the graph beside it keeps the rest of a 1024-pixel screen's share.
MIN_WIDTH = 250
_INDENT = 12  # pixels: a tensor's type under its name
# A key ("IR version") and a type ("float32[batch×3×32×32]") stay on one line: Qt would break
# a type at "[" and "×" (and a word anywhere when it does not fit) in a narrow column.
_NO_WRAP = " td.key, td.type { white-space: nowrap; }"
_MAX_DOC = 3000  # characters of an operator's documentation shown (Loop's runs to 8000)
_ONNX_DOCS = "https://github.com/onnx/onnx/blob/main/docs/"
_RELATIVE_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s]+)\)")


def _e(text: object) -> str:
    return html.escape(str(text))


def _model_metadata_html(m: GraphModel) -> str:
    """The model's own record: producer, IR version, opset imports, metadata_props."""
    root = m.breadcrumb()[0]
    proto = root.model_proto
    if proto is None:
        return ""
    rows = []
    producer = " ".join(p for p in (proto.producer_name, proto.producer_version) if p)
    for key, value in (("producer", producer), ("IR version", proto.ir_version),
                       ("domain", proto.domain), ("model version", proto.model_version or ""),
                       ("doc", proto.doc_string[:500])):
        if value:
            rows.append(f"<tr><td class=key><b>{key}</b></td><td>{_e(value)}</td></tr>")
    for o in proto.opset_import:
        rows.append(f"<tr><td class=key><b>opset import</b></td><td>{_e(o.domain or 'ai.onnx')} "
                    f"{o.version}</td></tr>")
    for p in proto.metadata_props:
        rows.append(f"<tr><td><b>{_e(p.key)}</b></td><td>{_e(p.value[:300])}</td></tr>")
    return f"<h4>Model</h4><table>{''.join(rows)}</table>" if rows else ""


def _op_doc_html(op_type: str, domain: str, opsets: dict[str, int]) -> str:
    """The operator's documentation from onnx.defs, for the opset the model imports; onnx
    writes it in markdown, rendered here (lists, emphasis, code, links)."""
    import onnx.defs

    dom = "" if domain in ("", "ai.onnx") else domain
    version = opsets.get(dom or "ai.onnx")
    try:
        schema = (onnx.defs.get_schema(op_type, version, dom) if version is not None
                  else onnx.defs.get_schema(op_type, dom))
    except Exception:  # a custom or contrib op: onnx has no schema for it
        return (f"<h4>Operator</h4><p><i>No documentation: {_e(op_type)} is not an operator "
                f"onnx knows in domain {_e(dom or 'ai.onnx')}.</i></p>")
    doc = (schema.doc or "").strip()
    if len(doc) > _MAX_DOC:  # cut at a paragraph, the whole of it one click away
        cut = doc.rfind("\n\n", 0, _MAX_DOC)
        doc = doc[:cut if cut > 0 else _MAX_DOC] + (
            f"\n\n… [the rest in the ONNX documentation]({_ONNX_DOCS}Operators.md#"
            f"{schema.name})")
    ios = "".join(f"<tr><td class=key><b>{_e(f.name)}</b></td>"
                  f"<td>{markdown_html(f.description)}</td></tr>"
                  for f in list(schema.inputs) + list(schema.outputs))
    return (f"<h4>Operator {_e(schema.name)} (since opset {schema.since_version})</h4>"
            f"{markdown_html(doc)}<table>{ios}</table>")


def markdown_html(text: str) -> str:
    """Markdown as an HTML fragment for the panel (Qt's own markdown reader); links
    relative to onnx's docs folder made whole."""
    from PySide6.QtGui import QTextDocument

    doc = QTextDocument()
    doc.setMarkdown(_RELATIVE_LINK.sub(lambda m: f"]({_ONNX_DOCS}{m.group(1)})", text.strip()))
    out = doc.toHtml()
    return out[out.find(">", out.find("<body")) + 1:out.rfind("</body>")]


class ValuesModel(QAbstractTableModel):
    """An array's values for a table, read on demand (a memory map stays a memory map): a
    matrix by rows and columns, anything else flattened with its index."""

    def __init__(self, values: Any, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.values = values if values.ndim == 2 else values.reshape(-1, 1)
        self.flat = values.ndim != 2

    def rowCount(self, parent: Any = None) -> int:
        return 0 if parent is not None and parent.isValid() else int(self.values.shape[0])

    def columnCount(self, parent: Any = None) -> int:
        return 0 if parent is not None and parent.isValid() else int(self.values.shape[1])

    def data(self, index: Any, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole or not index.isValid():
            return None
        v = self.values[index.row(), index.column()]
        return f"{v:.6g}" if self.values.dtype.kind in "fc" else str(v)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return "value" if self.flat else str(section)
        return str(section)


class PropertiesPanel(QWidget):
    """A rich-text view with links (tensors, producers, subgraphs) and, for an
    initializer, a histogram of its values."""

    linkActivated = Signal(str)  # "node:12", "tensor:name", "group:id", "sub:12:body", "func:12"

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = self._layout = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.browser = QTextBrowser(self)
        self.browser.setOpenLinks(False)
        self.browser.anchorClicked.connect(self._anchor)
        self.setMinimumWidth(MIN_WIDTH)
        lay.addWidget(self.browser, 3)
        self.hist_title = QLabel(self)
        self.hist_title.hide()
        lay.addWidget(self.hist_title)
        # An initializer's values: the histogram and, beside it, the values themselves.
        self.values_row = QWidget(self)
        self._values_layout = QHBoxLayout(self.values_row)
        self._values_layout.setContentsMargins(0, 0, 0, 0)
        self.values_table = QTableView(self.values_row)
        self.values_table.setMinimumHeight(140)
        self.values_table.verticalHeader().setDefaultSectionSize(18)
        self.values_table.horizontalHeader().setDefaultSectionSize(72)
        self._values_layout.addWidget(self.values_table, 1)
        self.values_row.hide()
        lay.addWidget(self.values_row, 2)
        self._plot: Any = None
        self.model: GraphModel | None = None
        self.layout_state: GraphLayout | None = None
        self.overlay: dict[str, float] | None = None
        self.overlay_label = ""
        self.marks: dict[str, str] = {}  # ONNX node name -> its problem, from set_marks
        # ONNX node name -> (a heading, its rows): what a finding says of the node (Why?)
        self.notes: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {}
        self._last: Callable[[], None] = self.show_empty
        self.show_empty()

    def _set_html(self, text: str) -> None:
        # Links take the application's colour unless told: use this widget's palette, so a
        # dark graph tab does not get dark-blue links.
        link = self.palette().color(QPalette.ColorRole.Link)
        self.browser.document().setDefaultStyleSheet(f"a {{ color: {link.name()}; }}" + _NO_WRAP)
        self.browser.setHtml(text)

    def _anchor(self, url: QUrl) -> None:
        if url.scheme() in ("http", "https"):  # an operator's documentation links the web
            QDesktopServices.openUrl(url)
        else:
            self.linkActivated.emit(url.toString())

    def set_graph(self, model: GraphModel, layout: GraphLayout) -> None:
        """A new graph: forget the selection."""
        self.model = model
        self.layout_state = layout
        self.show_empty()

    def refresh(self) -> None:
        """Render the current content again (link colours follow a palette change)."""
        self._last()

    def set_notes(self, notes: dict[str, tuple[str, tuple[tuple[str, str], ...]]]) -> None:
        """Show `notes` (node name -> heading, rows) in those nodes' properties; replaces
        the earlier notes and shows the current content again."""
        self.notes = dict(notes)
        self.refresh()

    def show_empty(self) -> None:
        """The summary of the graph when nothing is selected."""
        self._last = self.show_empty
        m = self.model
        self._hide_histogram()
        if m is None:
            self._set_html("<p>No graph loaded.</p>")
            return
        ops = Counter(m.columns.op_types).most_common(12)
        rows = "".join(f"<tr><td>{_e(k)}</td><td align=right>{v}</td></tr>" for k, v in ops)
        opsets = ", ".join(f"{_e(d)} {v}" for d, v in m.opset_imports.items())
        ins = "".join(self._tensor_row(t) for t in m.inputs)
        outs = "".join(self._tensor_row(t) for t in m.outputs)
        self._set_html(
            f"<h3>{_e(m.title)}</h3><p>{len(m.nodes)} nodes, {len(m.initializers)} "
            f"initializers, {len(m.groups) - 1} module groups"
            + (f"<br>opsets: {opsets}" if opsets else "") + "</p>"
            f"<h4>Inputs</h4><table>{ins}</table><h4>Outputs</h4><table>{outs}</table>"
            + _model_metadata_html(m) +
            f"<h4>Most used ops</h4><table>{rows}</table>"
            "<p><i>Click a box for its details; double-click a module to open it.</i></p>")

    # ------------------------------------------------------------------ node
    def show_node(self, index: int) -> None:
        """Op type, name, module, source, attributes, inputs and outputs of a node."""
        self._last = lambda: self.show_node(index)
        m = self.model
        assert m is not None
        self._hide_histogram()
        n = m.nodes[index]
        parts = [f"<h3>{_e(n.op_type)}</h3><table>",
                 f"<tr><td class=key><b>name</b></td><td>{_e(n.name or '(unnamed)')}</td></tr>"]
        if n.domain:
            parts.append(f"<tr><td class=key><b>domain</b></td><td>{_e(n.domain)}</td></tr>")
        if n.group:
            g = m.groups[n.group]
            parts.append(f"<tr><td class=key><b>module</b></td><td><a href='group:{_e(g.id)}'>"
                         f"{_e(g.qualname)}</a> {_e(g.class_name)}</td></tr>")
        if self.overlay is not None and n.name in self.overlay:
            parts.append(f"<tr><td class=key><b>{_e(self.overlay_label)}</b></td>"
                         f"<td>{self.overlay[n.name]:.4g}</td></tr>")
        if n.name in self.marks:
            parts.append(f"<tr><td class=key><b>problem</b></td><td><font color='#d02828'>"
                         f"{_e(self.marks[n.name])}</font></td></tr>")
        src = n.source
        if src:
            parts.append(f"<tr><td class=key><b>source</b></td><td>{_e(src)}</td></tr>")
        parts.append("</table>")
        if n.name in self.notes:
            heading, note_rows = self.notes[n.name]
            parts.append(f"<h4>{_e(heading)}</h4><table>")
            parts.extend(f"<tr><td class=key><b>{_e(k)}</b></td><td>{_e(v)}</td></tr>"
                         for k, v in note_rows)
            parts.append("</table>")
        if n.attributes:
            parts.append("<h4>Attributes</h4><table>")
            parts.extend(f"<tr><td class=key><b>{_e(k)}</b></td><td>{_e(v)}</td></tr>"
                         for k, v in n.attributes.items())
            parts.append("</table>")
        parts.append("<h4>Inputs</h4><table>")
        parts.extend(self._tensor_row(t, producer=True) for t in n.inputs if t)
        parts.append("</table><h4>Outputs</h4><table>")
        parts.extend(self._tensor_row(t) for t in n.outputs if t)
        parts.append("</table>")
        subs = n.subgraph_attributes
        func = m.function_of(index)
        if subs or func:
            parts.append("<h4>Subgraphs</h4><ul>")
            parts.extend(f"<li><a href='sub:{index}:{_e(s)}'>open {_e(s)}</a></li>" for s in subs)
            if func:
                parts.append(f"<li><a href='func:{index}'>open function {_e(func[1])}</a></li>")
            parts.append("</ul>")
        folded = self.layout_state.folded_into.get(index, []) if self.layout_state else []
        if folded:
            parts.append("<h4>Shape and constant nodes folded into this one</h4><ul>")
            parts.extend(f"<li><a href='node:{i}'>{_e(m.nodes[i].op_type)}</a> "
                         f"{_e(m.nodes[i].label)}</li>" for i in folded[:40])
            if len(folded) > 40:
                parts.append(f"<li>… {len(folded) - 40} more</li>")
            parts.append("</ul>")
        parts.append(_op_doc_html(n.op_type, n.domain, m.opset_imports))
        trace = n.stack_trace
        if trace:
            parts.append(f"<h4>Stack trace</h4><pre style='font-size:small'>{_e(trace)}</pre>")
        meta = {k: v for k, v in n.metadata.items() if k != "pkg.torch.onnx.stack_trace"}
        if meta:
            parts.append("<h4>Metadata</h4><table>")
            # the exporter's keys are long (pkg.onnxscript.rewriter.rule_name): the value under
            parts.extend(f"<tr><td><b>{_e(k)}</b></td></tr><tr><td style='padding-left: "
                         f"{_INDENT}px'>{_e(v[:300])}</td></tr>" for k, v in meta.items())
            parts.append("</table>")
        self._set_html("".join(parts))

    def _tensor_row(self, name: str, producer: bool = False) -> str:
        """A tensor in a list (one-column table): its name, kind and producer, and under them
        its type, on a line of its own that never breaks, so a narrow panel keeps it whole."""
        m = self.model
        assert m is not None
        try:
            t = m.tensor(name)
        except KeyError:
            return f"<tr><td>{_e(name)} ?</td></tr>"
        kind = "initializer" if t.is_initializer else t.kind
        src = ""
        if producer and t.producer is not None:
            src = (f" ← <a href='node:{t.producer}'>{_e(m.nodes[t.producer].op_type)}</a>")
        return (f"<tr><td><a href='tensor:{_e(name)}'>{_e(name)}</a> <i>{_e(kind)}</i>{src}"
                f"</td></tr><tr><td class=type style='padding-left: {_INDENT}px'>"
                f"{_e(t.dtype)}[{_e(format_shape(t.shape))}]</td></tr>")

    # ------------------------------------------------------------------ tensor
    def show_tensor(self, name: str) -> None:
        """Type, producer and consumers of a value; stats and histogram of an initializer."""
        self._last = lambda: self.show_tensor(name)
        m = self.model
        assert m is not None
        t = m.tensor(name)
        kind = "initializer" if t.is_initializer else t.kind
        parts = [f"<h3>{_e(name)}</h3><table>",
                 f"<tr><td class=key><b>kind</b></td><td>{_e(kind)}</td></tr>",
                 f"<tr><td class=key><b>type</b></td><td class=type>{_e(t.dtype)}</td></tr>",
                 f"<tr><td class=key><b>shape</b></td>"
                 f"<td class=type>{_e(format_shape(t.shape))}</td></tr>"]
        if t.producer is not None:
            p = m.nodes[t.producer]
            parts.append(f"<tr><td class=key><b>producer</b></td><td><a href='node:{p.index}'>"
                         f"{_e(p.op_type)} {_e(p.label)}</a></td></tr>")
        parts.append("</table>")
        if t.consumers:
            parts.append(f"<h4>Consumers ({len(t.consumers)})</h4><ul>")
            parts.extend(f"<li><a href='node:{c}'>{_e(m.nodes[c].op_type)}</a> "
                         f"{_e(m.nodes[c].label)}</li>" for c in t.consumers[:50])
            parts.append("</ul>")
        values = None
        if t.is_initializer:
            init = m.initializers[name]
            numel = 1
            for d in init.dims:
                numel *= d
            if init.data_location == 1:
                where = next((e.value for e in init.external_data if e.key == "location"), "?")
                parts.append(f"<p>Stored in external data file <b>{_e(where)}</b>.</p>")
            if numel <= _MAX_STATS:
                try:
                    values = m.initializer_array(name)
                except Exception as exc:  # missing external file: say so, keep the panel
                    parts.append(f"<p>Values unavailable: {_e(exc)}</p>")
            if values is not None:
                parts.append(self._stats_html(values))
        self._set_html("".join(parts))
        if values is not None and values.size > 1:
            self._show_histogram(name, values)
            self.values_table.setModel(ValuesModel(values, self.values_table))
            self.values_row.show()
        else:
            self._hide_histogram()

    @staticmethod
    def _stats_html(values: Any) -> str:
        import numpy as np

        if values.size == 0:
            return "<p>empty</p>"
        if values.dtype.kind not in "fiub":
            return f"<p>{values.size} values of type {_e(values.dtype)}</p>"
        v = values.astype(np.float64).ravel()
        finite = v[np.isfinite(v)]
        rows = [("elements", f"{v.size}"), ("min", f"{finite.min():.6g}" if finite.size else "-"),
                ("max", f"{finite.max():.6g}" if finite.size else "-"),
                ("mean", f"{finite.mean():.6g}" if finite.size else "-"),
                ("std", f"{finite.std():.6g}" if finite.size else "-"),
                ("zeros", f"{int((v == 0).sum())}"),
                ("NaN / Inf", f"{int((~np.isfinite(v)).sum())}")]
        if v.size <= 16:
            rows.append(("values", _e(values.ravel().tolist())))
        body = "".join(f"<tr><td class=key><b>{k}</b></td><td>{val}</td></tr>" for k, val in rows)
        return f"<h4>Values</h4><table>{body}</table>"

    def _show_histogram(self, name: str, values: Any) -> None:
        import numpy as np

        if values.dtype.kind not in "fiub":
            self._hide_histogram()
            return
        v = values.astype(np.float64).ravel()
        v = v[np.isfinite(v)]
        if not v.size:
            self._hide_histogram()
            return
        if self._plot is None:
            import pyqtgraph as pg  # imported on first use: it costs window start time

            self._plot = pg.PlotWidget(self.values_row)
            self._plot.setMinimumHeight(140)
            self._plot.setBackground(self.palette().color(self.backgroundRole()))
            self._values_layout.insertWidget(0, self._plot, 1)
        counts, edges = np.histogram(v, bins=min(64, max(4, int(v.size ** 0.5))))
        self._plot.clear()
        self._plot.plot(edges, counts, stepMode="center", fillLevel=0,
                        brush=(80, 130, 200, 160))
        self.hist_title.setText(f"Histogram of {name}")
        self.hist_title.show()
        self._plot.show()

    def _hide_histogram(self) -> None:
        if self._plot is not None:
            self._plot.hide()
        self.hist_title.hide()
        self.values_row.hide()
        self.values_table.setModel(None)  # drop the memory map

    # ------------------------------------------------------------------ group
    def show_group(self, gid: str) -> None:
        """A module group (or a section): path, class, node count, op mix, boundary tensors."""
        self._last = lambda: self.show_group(gid)
        m, lay = self.model, self.layout_state
        assert m is not None and lay is not None
        self._hide_histogram()
        vg = lay.groups[gid]
        g = m.groups.get(gid)
        nodes = lay.nodes_in(gid)
        inside = set(nodes)
        produced = {o for i in nodes for o in m.nodes[i].outputs}
        ins: list[str] = []
        outs: list[str] = []
        folded = lay.folded

        def shape_value(t: str) -> bool:  # computed by folded shape arithmetic
            p = m.producer.get(t)
            return p is not None and p in folded

        for i in nodes:
            for t in m.nodes[i].inputs:
                if (t and t not in produced and t not in m.initializers and t not in ins
                        and not shape_value(t)):
                    ins.append(t)
            for t in m.nodes[i].outputs:
                if t and not shape_value(t) and (
                        t in m.outputs or any(c not in inside for c in m.consumers.get(t, ()))):
                    outs.append(t)
        ops = Counter(m.nodes[i].op_type for i in nodes).most_common(15)
        params = sum(1 for i in nodes for t in m.nodes[i].inputs if t in m.initializers)
        title = g.qualname if g is not None and g.qualname else vg.label
        parts = [f"<h3>{_e(title)}</h3><table>"]
        if g is not None and g.class_name:
            parts.append(f"<tr><td class=key><b>class</b></td><td>{_e(g.class_name)}</td></tr>")
        parts.append(f"<tr><td class=key><b>nodes</b></td><td>{len(nodes)}</td></tr>")
        parts.append(f"<tr><td class=key><b>initializer inputs</b></td><td>{params}</td></tr>")
        if self.overlay is not None:
            vals = [self.overlay[m.nodes[i].name] for i in nodes if m.nodes[i].name in self.overlay]
            if vals:
                parts.append(f"<tr><td class=key><b>largest {_e(self.overlay_label)}</b></td>"
                             f"<td>{max(vals):.4g}</td></tr>")
        parts.append("</table><h4>Inputs</h4><table>")
        parts.extend(self._tensor_row(t, producer=True) for t in ins[:40])
        parts.append("</table><h4>Outputs</h4><table>")
        parts.extend(self._tensor_row(t) for t in outs[:40])
        parts.append("</table><h4>Ops</h4><table>")
        parts.extend(f"<tr><td>{_e(k)}</td><td align=right>{v}</td></tr>" for k, v in ops)
        parts.append("</table>")
        self._set_html("".join(parts))
