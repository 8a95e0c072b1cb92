"""WhyBar: Why? for the session's failed validation — the button, Cancel while it runs, what it
found (one sentence) and Save repro….

The Validation tab and the Summary each hold one; both read the session's explainer
(onnx_studio.app.session.explaining), so they say the same thing. The Graph tab opening at the node
is the result tabs' part (they hear `explained`).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from onnx_studio.app.session import Explanation, ExportSession

SAVE_TIP = ("Write a folder that reproduces the divergence with numpy and onnxruntime alone: "
            "the smallest ONNX model holding the node, PyTorch's values at its inputs and "
            "outputs, and repro.py (exits 1 when it reproduces) — a file to attach to a bug "
            "report")


def repro_name(node: str) -> str:
    """The folder name offered for the repro of `node` ("repro_layers_2_lin_Gemm")."""
    return "repro_" + (re.sub(r"[^A-Za-z0-9]+", "_", node).strip("_") or "node")


class WhyBar(QWidget):
    """Shown while the session's validation failed: Why?, Cancel, the answer, Save repro…."""

    showOnGraph = Signal(object)  # Explanation: its node's link was clicked

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.explainer = session.explainer
        self.text = QLabel()
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.text.linkActivated.connect(self._link)
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextBrowserInteraction)
        self.why_button = QPushButton("Why?")
        self.why_button.clicked.connect(self.explainer.explain)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop Why? (the validation stays as it is)")
        self.cancel_button.clicked.connect(self.explainer.cancel)
        self.repro_button = QPushButton("Save repro…")
        self.repro_button.setToolTip(SAVE_TIP)
        self.repro_button.clicked.connect(self._save_dialog)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.text, 1)
        for button in (self.why_button, self.cancel_button, self.repro_button):
            row.addWidget(button, 0, Qt.AlignmentFlag.AlignTop)
        for signal in (self.explainer.changed, session.resultsChanged,
                       session.readinessChanged, session.activityChanged):
            signal.connect(self.refresh)
        self.explainer.progress.connect(lambda _fraction, _stage: self.refresh())
        self.refresh()

    def refresh(self) -> None:
        """Say what the explainer has now: nothing yet, running, could not run, or found."""
        explainer = self.explainer
        offer = explainer.offer()
        found = explainer.explanation
        self.setVisible(offer.shown or found is not None or explainer.busy)
        self.why_button.setEnabled(offer.enabled)
        self.why_button.setToolTip(offer.tip)
        self.why_button.setVisible(not explainer.busy)
        self.cancel_button.setVisible(explainer.busy)
        self.repro_button.setVisible(found is not None and found.divergence is not None)
        self.repro_button.setEnabled(not explainer.busy)
        self.text.setText(self.sentence())

    def sentence(self) -> str:
        """What the bar says (HTML): the same words in every view, from the explainer."""
        explainer = self.explainer
        found = explainer.explanation
        if explainer.busy:
            doing = "Writing the repro" if explainer.job_kind == "repro" else "Why? is running"
            stage = f": {explainer.stage}" if explainer.stage else ""
            return f"<i>{html.escape(doing + stage)}…</i>"
        failed = ""
        if explainer.error is not None:
            what = ("Save repro… could not write the folder:"
                    if explainer.error_kind == "repro" else "Why? could not answer:")
            failed = f"<b>{what}</b> {html.escape(explainer.error.message)}"
        if found is None:
            return failed or ("<b>Why?</b> finds the first node whose values leave the "
                              "tolerance, its module and source line.")
        text = (f"{failed}<br>" if failed else "") + "<b>Why:</b> " + html.escape(
            found.sentence(self.session.validation_result))
        if found.divergence is not None:
            text += " <a href='graph'>Show it on the graph</a>"
        repro = found.repro
        if repro is not None:
            text += (f"<br>Repro written to {html.escape(repro.folder)}; run "
                     f"<code>{html.escape(repro.command)}</code>")
        return text

    def _link(self, _link: str) -> None:
        found = self.explainer.explanation
        if found is not None:
            self.showOnGraph.emit(found)

    def save_repro_to(self, folder: Path) -> int | None:
        """Write the repro of the explanation into `folder` (a new or empty folder, written
        whole); the job id, or None when there is nothing to write now."""
        return self.explainer.save_repro(folder)

    def _save_dialog(self) -> None:
        from PySide6.QtWidgets import QFileDialog  # a dialog: loaded when first opened

        found: Explanation | None = self.explainer.explanation
        div = found.divergence if found is not None else None
        if found is None or div is None:
            return
        start = found.file.parent / repro_name(div.node)
        path, _ = QFileDialog.getSaveFileName(
            self, "Save repro (a new folder)", str(start), "Folders (*)",
            options=QFileDialog.Option.ShowDirsOnly)
        if path:
            self.save_repro_to(Path(path))
