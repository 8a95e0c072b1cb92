"""FormPanel: the window's left side — a notice banner, the four forms and the export bar."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from onnx_studio.app import theme
from onnx_studio.app.form.export_bar import ExportBar
from onnx_studio.app.form.hf_task import HfTaskForm
from onnx_studio.app.form.model_form import ModelForm
from onnx_studio.app.form.options_form import OptionsForm
from onnx_studio.app.form.structured_inputs import ArgumentEditor, DimBoundsTable
from onnx_studio.app.form.tensor_tables import InputsTable, OutputsTable
from onnx_studio.app.session import ExportSession


class Banner(QFrame):
    """A notice at the top of the form (settings reset, a recipe that did not load, unsaved
    edits to recover), with buttons for what the user can do about it."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.label = QLabel()
        self.label.setWordWrap(True)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Dismiss")
        close.clicked.connect(self.hide)
        self.buttons: list[QPushButton] = []
        self._row = QHBoxLayout()
        self._row.addStretch(1)
        column = QVBoxLayout()
        column.addWidget(self.label)
        column.addLayout(self._row)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addLayout(column, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self._dark = False
        self.hide()

    def set_dark(self, dark: bool) -> None:
        """Its background in the dark (or light) palette's colour; a hidden banner takes it
        when shown (no style sheet, a style of its own, for a banner that stays hidden)."""
        self._dark = dark
        if not self.isHidden():
            self._paint()

    def _paint(self) -> None:
        self.setStyleSheet(f"Banner {{ background: {theme.error_background(self._dark)}; }}")

    def show_message(self, text: str,
                     actions: Sequence[tuple[str, Callable[[], object]]] = ()) -> None:
        """Show `text`, with a button per (label, action); a button hides the banner first."""
        for button in self.buttons:
            button.deleteLater()
        self.buttons = []
        for label, action in actions:
            button = QPushButton(label)
            button.clicked.connect(self.hide)
            button.clicked.connect(lambda _=False, act=action: act())
            self._row.addWidget(button)
            self.buttons.append(button)
        self.label.setText(text)
        self._paint()
        self.show()


class FormPanel(QWidget):
    """The form side of the window: every part is a view of the session's recipe."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.banner = Banner()
        self.model_form = ModelForm(session)
        self.hf_task = HfTaskForm(session)
        self.inputs_table = InputsTable(session)
        self.argument_editor = ArgumentEditor(session, self.inputs_table)
        self.dim_bounds = DimBoundsTable(session)
        self.outputs_table = OutputsTable(session)
        self.options_form = OptionsForm(session)
        self.forms = (self.model_form, self.inputs_table, self.argument_editor, self.dim_bounds,
                      self.outputs_table, self.options_form)
        self.export_bar = ExportBar(session)
        session.notice.connect(self.banner.show_message)

        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(0, 0, 4, 0)
        column.setSpacing(6)
        for form in self.forms:
            column.addWidget(form)
            if form is self.model_form:
                column.addWidget(self.hf_task)
        column.addStretch(1)
        self.form_scroll = scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(content)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        side = QVBoxLayout(self)
        side.setContentsMargins(6, 6, 0, 6)
        side.addWidget(self.banner)
        side.addWidget(scroll, 1)
        side.addWidget(self.export_bar)
        self.setMinimumWidth(520)

    def set_dark(self, dark: bool) -> None:
        """Mark problems in the colours of the dark (or light) palette from now on."""
        for form in (*self.forms, self.hf_task):
            form.dark = dark
        self.banner.set_dark(dark)
