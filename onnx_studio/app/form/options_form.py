"""The Options group: exporter, opset, export type, training, folding, data, device, extras,
and the [validate] settings (tolerances, random draws, other sizes, per-node comparison).

A view of the session's `recipe.export` and `recipe.validate`; the opset and device lists
follow what the worker reports it can do (the session's capabilities), for the exporter that
will run: with "auto" the one the source implies (onnx_studio.engine.export.choice.choose_exporter).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QWidget,
)

from onnx_studio.app import theme
from onnx_studio.app.form import marks
from onnx_studio.app.recipes import format_table, implied_exporter, parse_table
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.recipe import (
    EXPORTERS,
    EXTERNAL_DATA,
    OPERATOR_EXPORT_TYPES,
    TRAINING_MODES,
    Recipe,
)

if TYPE_CHECKING:
    from onnx_studio.engine.protocol import DevicesResult


@dataclass(frozen=True)
class Capabilities:
    """What the device and opset lists are filled from: the fields of the worker's
    DevicesResult (the protocol loads after the window's first paint)."""

    devices: list[str]
    opsets: dict[str, list[int]]  # exporter -> [lowest, highest]
    default_opset: dict[str, int]
    ort_max_opset: int | None


# Until the worker reports what the installed torch writes (the `devices` job), these ranges
# (torch 2.13) fill the opset list.
FALLBACK_CAPABILITIES = Capabilities(
    devices=["cpu"], opsets={"dynamo": [18, 23], "torchscript": [7, 20]},
    default_opset={"dynamo": 20, "torchscript": 20}, ort_max_opset=None)
TORCHSCRIPT = "torchscript"  # the exporter whose opsets a TorchScript source is held to
# what the exporter list says; "auto" is resolved at export time (choose_exporter)
EXPORTER_LABELS = {"auto": "auto (follows the source)"}


def format_float(value: float) -> str:
    """1e-05 -> '1e-05', 0.001 -> '0.001', 0.0 -> '0': short, and parsed back exactly."""
    return repr(float(value)).removesuffix(".0") if value == int(value) and abs(value) < 1e15 \
        else repr(float(value))


class OptionsForm(QGroupBox):
    """A view of the session's `recipe.export` and `recipe.validate` (providers aside)."""

    def __init__(self, session: ExportSession, parent: QWidget | None = None) -> None:
        super().__init__("Options", parent)
        self.session = session
        self.dark = False
        self._filling = False

        self.exporter = QComboBox()
        for name in EXPORTERS:
            self.exporter.addItem(EXPORTER_LABELS.get(name, name), name)
        self.opset = QComboBox()
        self.opset_warning = QLabel()
        self.opset_warning.setWordWrap(True)
        self.export_type = QComboBox()
        self.export_type.addItems(list(OPERATOR_EXPORT_TYPES))
        self.training = QComboBox()
        self.training.addItems(list(TRAINING_MODES))
        self.external = QComboBox()
        self.external.addItems(list(EXTERNAL_DATA))
        self.external.setToolTip("auto: weights go to a separate file only near ONNX's 2 GB "
                                 "limit")
        self.device = QComboBox()
        self.folding = QCheckBox("Constant folding")
        self.params = QCheckBox("Export parameters")
        self.keep_inits = QCheckBox("Initializers as inputs")
        self.optimize = QCheckBox("Optimize graph")
        self.validate = QCheckBox("After each export")
        self.validate.setToolTip("Run ONNX Runtime against PyTorch right after the export "
                                 "(validate.enabled); Validate (Ctrl+Shift+V) runs it any time")
        self.dynamic_sizes = QCheckBox("Other sizes")
        self.dynamic_sizes.setToolTip("Also run every dynamic axis at a smaller and a larger "
                                      "size (validate.dynamic_sizes)")
        self.intermediates = QCheckBox("Per node")
        self.intermediates.setToolTip("Compare every intermediate value, to find the first node "
                                      "that diverges (dynamo exports; validate.intermediates)")
        self.rtol = QLineEdit()
        self.atol = QLineEdit()
        for edit, what in ((self.rtol, "Relative"), (self.atol, "Absolute")):
            edit.setMaximumWidth(80)
            edit.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
            edit.setToolTip(f"{what} tolerance: an element passes when |onnx - torch| <= "
                            "atol + rtol * |torch|")
        self.random_trials = QSpinBox()
        self.random_trials.setRange(0, 1000)
        self.random_trials.setToolTip("Fresh random inputs tried besides the export inputs "
                                      "(validate.random_trials)")
        self._tips: dict[QWidget, str] = {
            w: w.toolTip() for w in (self.rtol, self.atol, self.random_trials)}
        self.custom_opsets = QLineEdit()
        self.custom_opsets.setPlaceholderText("custom_domain = 1")
        self.extensions = QLineEdit()
        self.extensions.setPlaceholderText("symbolics.py; more.py")
        self.extensions.setToolTip("Python files run in the worker before the export, to "
                                   "register custom symbolics or translations")
        self.extensions_browse = QPushButton("Add…")
        self.seed = QSpinBox()
        self.seed.setRange(0, 2**31 - 1)

        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setVerticalSpacing(4)
        pairs = [
            ("Exporter", self.exporter, "Opset", self.opset),
            ("Export type", self.export_type, "Training", self.training),
            ("External data", self.external, "Device", self.device),
        ]
        for row, (a, wa, b, wb) in enumerate(pairs):
            grid.addWidget(QLabel(a), row, 0)
            grid.addWidget(wa, row, 1)
            grid.addWidget(QLabel(b), row, 2)
            grid.addWidget(wb, row, 3)
        grid.addWidget(self.opset_warning, 3, 0, 1, 4)
        checks = QGridLayout()
        for i, box in enumerate((self.folding, self.params, self.keep_inits, self.optimize)):
            checks.addWidget(box, i // 3, i % 3)
        grid.addLayout(checks, 4, 0, 1, 4)
        grid.addWidget(QLabel("Custom opsets"), 5, 0)
        grid.addWidget(self.custom_opsets, 5, 1)
        grid.addWidget(QLabel("Seed"), 5, 2)
        grid.addWidget(self.seed, 5, 3)
        row_layout = QHBoxLayout()
        row_layout.addWidget(self.extensions, 1)
        row_layout.addWidget(self.extensions_browse)
        grid.addWidget(QLabel("Extensions"), 6, 0)
        grid.addLayout(row_layout, 6, 1, 1, 3)
        # [validate] in two compact rows, so the form still fits a 768-pixel-high screen
        grid.addWidget(QLabel("Validation"), 7, 0)
        checks_row = QHBoxLayout()
        for box in (self.validate, self.dynamic_sizes, self.intermediates):
            checks_row.addWidget(box)
        checks_row.addStretch(1)
        grid.addLayout(checks_row, 7, 1, 1, 3)
        numbers = QHBoxLayout()
        for text, widget in (("rtol", self.rtol), ("atol", self.atol),
                             ("Random draws", self.random_trials)):
            label = QLabel(text)
            label.setBuddy(widget)
            numbers.addWidget(label)
            numbers.addWidget(widget)
            numbers.addSpacing(8)
        numbers.addStretch(1)
        grid.addLayout(numbers, 8, 1, 1, 3)
        grid.setColumnStretch(1, 1)
        grid.setColumnStretch(3, 1)

        for combo in (self.exporter, self.opset, self.export_type, self.training, self.external,
                      self.device):
            combo.currentIndexChanged.connect(self._edited)
        for box in (self.folding, self.params, self.keep_inits, self.optimize, self.validate,
                    self.dynamic_sizes, self.intermediates):
            box.toggled.connect(self._edited)
        self.seed.valueChanged.connect(self._edited)
        self.random_trials.valueChanged.connect(self._edited)
        self.rtol.editingFinished.connect(self._edited)
        self.atol.editingFinished.connect(self._edited)
        self.custom_opsets.editingFinished.connect(self._edited)
        self.extensions.editingFinished.connect(self._edited)
        self.extensions_browse.clicked.connect(self._add_extension)
        self.refresh()
        session.recipeChanged.connect(self.refresh)
        session.recipeEdited.connect(self._recipe_edited)
        session.capabilitiesChanged.connect(self._capabilities_changed)
        session.readinessChanged.connect(self._readiness_changed)

    # ----------------------------------------------------------------- session -> form

    def _recipe_edited(self, part: str, origin: object) -> None:
        if (part == "options" and origin is not self) or (
                part == "model" and self._drop_what_no_longer_applies()):
            self.refresh()
        elif part == "model" and self.session.recipe.export.exporter == "auto":
            # another source or `script` may imply the other exporter: its opsets and options
            self._filling = True
            try:
                self._fill_opsets()
            finally:
                self._filling = False
            self._update_enabled()

    def _readiness_changed(self) -> None:
        self.mark(self.session.problems)

    def _drop_what_no_longer_applies(self) -> bool:
        """After the model changed: when its source forces the TorchScript exporter (a
        TorchScript archive, model.script), the user's dynamo-only choices are let go (an
        explicit dynamo exporter goes back to auto, the per-node comparison off, an opset the
        TorchScript exporter does not write back to its default). True when one was."""
        recipe = self.session.recipe
        probe = recipe.copy()
        probe.export.exporter, probe.export.operator_export_type = "auto", "ONNX"
        if implied_exporter(probe)[0] != TORCHSCRIPT:
            return False
        low, high = self.capabilities.opsets.get(TORCHSCRIPT, [7, 20])
        opset = recipe.export.opset
        stale = {"exporter": recipe.export.exporter == "dynamo",
                 "intermediates": recipe.validate.intermediates,
                 "opset": opset is not None and not low <= opset <= high}
        if not any(stale.values()):
            return False
        with self.session.edit("options", self) as edited:
            if stale["exporter"]:
                edited.export.exporter = "auto"
            if stale["intermediates"]:
                edited.validate.intermediates = False
            if stale["opset"]:
                edited.export.opset = None
        return True

    @property
    def capabilities(self) -> DevicesResult | Capabilities:
        """What the worker reported it can do (the session's), or the fallback until then."""
        return self.session.capabilities or FALLBACK_CAPABILITIES

    def _capabilities_changed(self, _result: DevicesResult) -> None:
        self.refresh()

    def refresh(self) -> None:
        opts = self.session.recipe.export
        parse_errors = self.session.parse_errors
        self._filling = True
        try:
            index = self.exporter.findData(opts.exporter)
            if index < 0:  # a value the list does not know: shown as it is (marked wrong)
                self.exporter.addItem(opts.exporter, opts.exporter)
                index = self.exporter.count() - 1
            self.exporter.setCurrentIndex(index)
            self._fill_opsets()
            self.export_type.setCurrentText(opts.operator_export_type)
            self.training.setCurrentText(opts.training)
            self.external.setCurrentText(opts.external_data)
            devices = list(self.capabilities.devices or ["cpu"])
            if opts.device not in devices:
                devices.append(opts.device)
            self.device.clear()
            self.device.addItems(devices)
            self.device.setCurrentText(opts.device)
            self.folding.setChecked(opts.do_constant_folding)
            self.params.setChecked(opts.export_params)
            self.keep_inits.setChecked(opts.keep_initializers_as_inputs)
            self.optimize.setChecked(opts.optimize)
            checks = self.session.recipe.validate
            self.validate.setChecked(checks.enabled)
            self.dynamic_sizes.setChecked(checks.dynamic_sizes)
            self.intermediates.setChecked(checks.intermediates)
            self.random_trials.setValue(checks.random_trials)
            for edit, key, value in ((self.rtol, "validate.rtol", checks.rtol),
                                     (self.atol, "validate.atol", checks.atol)):
                if key not in parse_errors:  # the text being fixed stays
                    edit.setText(format_float(value))
            self.seed.setValue(opts.seed)
            if "export.custom_opsets" not in parse_errors:
                self.custom_opsets.setText(format_table(dict(opts.custom_opsets)))
            self.extensions.setText("; ".join(opts.extensions))
        finally:
            self._filling = False
        self._update_enabled()

    def effective_exporter(self) -> str:
        """The exporter that will run: the recipe's, or the one "auto" implies now."""
        return implied_exporter(self.session.recipe)[0]

    def _fill_opsets(self) -> None:
        opts = self.session.recipe.export
        exporter = self.effective_exporter()
        low, high = self.capabilities.opsets.get(exporter, [7, 23])
        default = self.capabilities.default_opset.get(exporter)
        self.opset.clear()
        self.opset.addItem(f"default ({default})" if default else "default", None)
        versions = list(range(int(high), int(low) - 1, -1))
        if opts.opset is not None and opts.opset not in versions:
            versions.append(opts.opset)  # a recipe's value is kept even outside the range
        for version in versions:
            self.opset.addItem(str(version), version)
        index = self.opset.findData(opts.opset) if opts.opset is not None else 0
        self.opset.setCurrentIndex(max(index, 0))

    def _update_enabled(self) -> None:
        chosen = self.session.recipe.export.exporter
        exporter, reason = implied_exporter(self.session.recipe)
        torchscript = exporter == "torchscript"
        self.exporter.setToolTip(
            (f"auto: the exporter follows the source; here {exporter}, as {reason}.\n"
             if chosen == "auto" else "")
            + "dynamo: torch.export-based; torchscript: the legacy tracer/scripter, for "
            "TorchScript archives, scripted modules and operator export types")
        # "auto" takes an export type too: one other than ONNX makes it the TorchScript exporter
        self.export_type.setEnabled(chosen != "dynamo")
        self.export_type.setToolTip("Only the torchscript exporter takes an export type"
                                    + (" (with auto, one other than ONNX chooses it)"
                                       if chosen == "auto" else "")
                                    if not torchscript else "")
        self.optimize.setEnabled(not torchscript)
        self.folding.setEnabled(torchscript)
        self.custom_opsets.setEnabled(torchscript)
        only = "" if torchscript else " (torchscript exporter only)"
        self.folding.setToolTip("Fold constant subgraphs at export time" + only)
        self.custom_opsets.setToolTip("Versions of custom operator domains" + only)
        self.optimize.setToolTip("Run the ONNX optimizer after export"
                                 + (" (dynamo exporter only)" if torchscript else ""))
        self._update_opset_warning()

    def _update_opset_warning(self) -> None:
        opts = self.session.recipe.export
        ort_max = self.capabilities.ort_max_opset
        exporter = self.effective_exporter()
        default = self.capabilities.default_opset.get(exporter)
        chosen = opts.opset if opts.opset is not None else default
        messages = []
        if ort_max and chosen and chosen > ort_max:
            messages.append(f"Opset {chosen} is above {ort_max}, the newest the installed "
                            "ONNX Runtime runs: validation will not be possible.")
        low, high = self.capabilities.opsets.get(exporter, [7, 23])
        if opts.opset is not None and not low <= opts.opset <= high:
            messages.append(f"The {exporter} exporter writes opsets {low}–{high}.")
        self.opset_warning.setText(" ".join(messages))
        if messages:  # no style sheet (a style of its own) for a warning that stays hidden
            self.opset_warning.setStyleSheet(f"color: {theme.warning_text(self.dark)};")
        self.opset_warning.setVisible(bool(messages))

    # ----------------------------------------------------------------- form -> session

    def _edited(self) -> None:
        if self._filling:
            return
        with self.session.edit("options", self) as recipe:
            self._write(recipe)

    def _write(self, recipe: Recipe) -> None:
        """Read every field into `recipe` (inside the session's edit)."""
        opts = recipe.export
        before = self.effective_exporter()
        chosen = str(self.exporter.currentData() or self.exporter.currentText())
        exporter_changed = chosen != opts.exporter
        opts.exporter = chosen
        opts.opset = None if exporter_changed else self.opset.currentData()
        opts.operator_export_type = self.export_type.currentText()
        if opts.exporter == "dynamo":
            opts.operator_export_type = "ONNX"  # only torchscript takes another one
        opts.training = self.training.currentText()
        opts.external_data = self.external.currentText()
        opts.device = self.device.currentText() or "cpu"
        opts.do_constant_folding = self.folding.isChecked()
        opts.export_params = self.params.isChecked()
        opts.keep_initializers_as_inputs = self.keep_inits.isChecked()
        opts.optimize = self.optimize.isChecked()
        opts.seed = self.seed.value()
        self._write_validate(recipe)
        try:
            table = parse_table(self.custom_opsets.text())
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in table.values()):
                raise ValueError("each version must be a whole number")
            opts.custom_opsets = {k: int(v) for k, v in table.items()}  # type: ignore[call-overload]
            self.session.set_parse_error("export.custom_opsets", None)
        except ValueError as exc:
            self.session.set_parse_error("export.custom_opsets", f"Custom opsets: {exc}.")
        opts.extensions = [p.strip() for p in self.extensions.text().split(";") if p.strip()]
        if exporter_changed:
            self.refresh()
            return
        if self.effective_exporter() != before:  # "auto" and another export type
            self._filling = True
            try:
                self._fill_opsets()
            finally:
                self._filling = False
        self._update_enabled()

    def _write_validate(self, recipe: Recipe) -> None:
        checks = recipe.validate
        checks.enabled = self.validate.isChecked()
        checks.dynamic_sizes = self.dynamic_sizes.isChecked()
        checks.intermediates = self.intermediates.isChecked()
        checks.random_trials = self.random_trials.value()
        for edit, key in ((self.rtol, "rtol"), (self.atol, "atol")):
            try:
                value = float(edit.text().strip())
                if value != value or value in (float("inf"), float("-inf")):
                    raise ValueError
            except ValueError:
                self.session.set_parse_error(
                    f"validate.{key}",
                    f"{key} must be a number such as 1e-3 (not {edit.text().strip()!r}).")
                continue
            self.session.set_parse_error(f"validate.{key}", None)
            setattr(checks, key, value)

    def _add_extension(self) -> None:
        from PySide6.QtWidgets import QFileDialog  # a dialog: loaded when first opened

        path, _ = QFileDialog.getOpenFileName(self, "Extension",
                                              str(self.session.recipe.base_dir),
                                              "Python (*.py)")
        if path:
            with self.session.edit("options", self) as recipe:
                recipe.export.extensions.append(path)
                self.refresh()

    def mark(self, problems: dict[str, str]) -> None:
        for widget, key in ((self.opset, "export.opset"),
                            (self.export_type, "export.operator_export_type"),
                            (self.device, "export.device"),
                            (self.custom_opsets, "export.custom_opsets"),
                            (self.extensions, "export.extensions")):
            marks.mark(widget, problems.get(key), self.dark)
        checks: tuple[tuple[QWidget, str], ...] = (
            (self.rtol, "validate.rtol"), (self.atol, "validate.atol"),
            (self.random_trials, "validate.random_trials"))
        for check, key in checks:
            # these keep their explanation as the tooltip when nothing is wrong
            marks.mark(check, problems.get(key), self.dark, self._tips[check])
