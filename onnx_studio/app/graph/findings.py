"""What a finding says of some nodes, drawn on the Graph tab: the first divergent node of Why?
(the file opened at it, the node outlined, selected and centred, its module, source line and
differences in the properties) and the nodes an fp16 variant keeps in float32 (outlined).

Functions of the tab, no state of their own: the session holds the finding, the browser the
outlines and the properties' notes, and they go when the finding does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from onnx_studio.app.session import Explanation

if TYPE_CHECKING:
    from onnx_studio.app.graph.tab import GraphTab

WHY_HEADING = "Why? — the first divergence"


def _same(a: Path | None, b: Path) -> bool:
    return a is not None and a.resolve() == b.resolve()


def show_file(tab: GraphTab, path: Path, folder: Path | None = None) -> bool:
    """Make `path` the file shown first (opening `folder`, the export it belongs to, when it
    is one and not open); False (the tab says why) when it cannot be shown."""
    if _same(tab.shown[0], path):
        return True
    if folder is not None and folder.is_dir():
        if not (tab.loaded_path is not None and _same(tab.loaded_path, folder)) \
                and not tab.load_file(folder):
            return False
        return _same(tab.shown[0], path) or tab.show_file(0, path)
    return tab.load_file(path)


def show_divergence(tab: GraphTab, found: Explanation) -> bool:
    """Open the graph of `found`'s file at its first divergent node: outlined, selected and
    centred, its properties showing the module, the source line and the differences. False
    when there is no divergence or the node cannot be shown."""
    div = found.divergence
    if div is None or not show_file(tab, found.file, found.onnx):
        return False
    browser = tab.ensure_browser()
    if browser.model is None or browser.model.node_by_name(div.node) is None:
        return False
    clear_divergence(tab)
    browser.properties.set_notes({div.node: (WHY_HEADING, found.node_rows())})
    browser.set_marks({**browser.marks, div.node: found.mark()})
    tab.select_node(div.node)
    return True


def clear_divergence(tab: GraphTab) -> None:
    """Take Why?'s outline and rows off the graph (the explanation went)."""
    browser = tab.browser
    if browser is None:
        return
    noted = {name for name, (heading, _) in browser.properties.notes.items()
             if heading == WHY_HEADING}
    if not noted:
        return
    browser.properties.set_notes({k: v for k, v in browser.properties.notes.items()
                                  if k not in noted})
    if any(name in browser.marks for name in noted):
        browser.set_marks({k: v for k, v in browser.marks.items() if k not in noted})


def mark_nodes(tab: GraphTab, path: Path, reasons: Mapping[str, str],
               select: Sequence[str] = ()) -> bool:
    """Open `path` and outline the nodes in `reasons` (name -> why), selecting the first of
    `select` found; False when the file cannot be shown."""
    if not show_file(tab, path):
        return False
    browser = tab.ensure_browser()
    browser.set_marks({**browser.marks, **reasons})
    first = next((name for name in select if browser.model is not None
                  and browser.model.node_by_name(name) is not None), "")
    if first:
        tab.select_node(first)
    return True
