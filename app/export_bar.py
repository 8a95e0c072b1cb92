"""The bar under the form: output file, why Export is disabled, progress, Export / Validate /
Cancel (the progress bar and Cancel serve a validation job as well as an export)."""

from __future__ import annotations

import html
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app import marks, theme

EXPORT_TIP = "Export the model (Ctrl+E)"
OUTPUT_TIP = ("Where the .onnx file is written (relative to the recipe's folder); it only "
              "appears once complete")


class ExportBar(QWidget):
    """States: idle (Export enabled unless there are problems), running, done, failed."""

    exportClicked = Signal()
    validateClicked = Signal()
    cancelClicked = Signal()
    outputEdited = Signal(str)
    browseClicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.dark = False
        self.running = False
        self._started_at = 0.0
        self.output = QLineEdit()
        self.output.setToolTip(OUTPUT_TIP)
        self.output_browse = QPushButton("Browse…")
        self.problem_label = QLabel()
        self.problem_label.setWordWrap(True)
        self.problem_label.setTextFormat(Qt.TextFormat.RichText)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(True)
        self.progress.setFormat("Ready")
        self.progress.setValue(0)
        self.stage = QLabel()
        self.elapsed = QLabel()
        self.export_button = QPushButton("Export")
        self.export_button.setDefault(True)
        self.export_button.setToolTip(EXPORT_TIP)
        self.validate_button = QPushButton("Validate")
        self.validate_button.setEnabled(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.cancel_button.setToolTip("Stop the export or validation now (Esc); the form is kept")
        self.timer = QTimer(self)
        self.timer.setInterval(100)
        self.timer.timeout.connect(self._tick)

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 4, 4, 0)
        layout.setSpacing(4)
        row = QHBoxLayout()
        label = QLabel("O&utput")
        label.setBuddy(self.output)
        row.addWidget(label)
        row.addWidget(self.output, 1)
        row.addWidget(self.output_browse)
        layout.addLayout(row)
        layout.addWidget(self.problem_label)
        row = QHBoxLayout()
        row.addWidget(self.progress, 1)
        row.addWidget(self.elapsed)
        row.addWidget(self.export_button)
        row.addWidget(self.validate_button)
        row.addWidget(self.cancel_button)
        layout.addLayout(row)
        layout.addWidget(self.stage)

        self.output.editingFinished.connect(
            lambda: self.outputEdited.emit(self.output.text().strip()))
        self.output_browse.clicked.connect(self.browseClicked)
        self.export_button.clicked.connect(self.exportClicked)
        self.validate_button.clicked.connect(self.validateClicked)
        self.cancel_button.clicked.connect(self.cancelClicked)

    def set_output(self, text: str) -> None:
        if self.output.text() != text:
            self.output.setText(text)

    def show_problems(self, problems: dict[str, str]) -> None:
        """Mark the output field, say why Export is disabled (first problem), enable it."""
        marks.mark(self.output, marks.problems_under(problems, "export.output"), self.dark,
                   OUTPUT_TIP)
        if problems:
            field, sentence = next(iter(problems.items()))
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            reason = f"{field}: {sentence}{more}"
            self.problem_label.setText(
                f"<span style='color:{theme.warning_text(self.dark)}'>Export is disabled — "
                f"{html.escape(reason)}</span>")
            self.export_button.setToolTip(f"Export is disabled: {reason}")
        else:
            self.problem_label.setText("")
            self.export_button.setToolTip(EXPORT_TIP)
        self.problem_label.setVisible(bool(problems))
        self.export_button.setEnabled(not problems and not self.running)

    def start(self, worker_ready: bool) -> None:
        self.running = True
        self.progress.setValue(0)
        self.progress.setFormat("%p%")
        self.stage.setText("Starting…" if worker_ready else "Waiting for the worker…")
        self._started_at = time.perf_counter()
        self.timer.start()
        self._tick()
        self.export_button.setEnabled(False)
        self.validate_button.setEnabled(False)
        self.cancel_button.setEnabled(True)

    def set_progress(self, fraction: float, stage: str) -> None:
        self.progress.setValue(int(1000 * fraction))
        self.stage.setText(stage)

    def seconds(self) -> float:
        return time.perf_counter() - self._started_at

    def finish(self, ok: bool, text: str, failed_format: str = "Not exported") -> None:
        """Stop the clock; `text` goes under the bar ("Done in 3.1 s." or why it failed) and
        `failed_format` in the bar when it failed."""
        self.running = False
        self.timer.stop()
        self._tick()
        self.cancel_button.setEnabled(False)
        if ok:
            self.progress.setValue(1000)
        else:
            self.progress.setFormat(failed_format)
            self.progress.setValue(0)
        self.stage.setText(text)

    def _tick(self) -> None:
        self.elapsed.setText(f"{self.seconds():.1f} s")
