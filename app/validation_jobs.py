"""The window's validate job: which file Validate checks, running it, and showing the outcome.

One click validates the last exported file (or the recipe's output file when it exists) with
the form's current [validate] settings in the warm worker. The export bar's progress bar and
Cancel serve it as they serve an export; the Validation tab shows the result, and its
per-node errors can be put on the Graph tab.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QTimer

from app.validation_common import texts

if TYPE_CHECKING:
    from app.window import MainWindow


class ValidationJobs:
    """Validate-job state and steps for a MainWindow (kept apart to keep the window small)."""

    def __init__(self, window: MainWindow) -> None:
        self.w = window
        self.job: int | None = None
        # the last file an export wrote, and the model it came from (what Validate uses)
        self.last_export: tuple[Path, str] | None = None

    # ----------------------------------------------------------------- what to validate

    def model_key(self) -> str:
        """The model source as written plus the folder it is relative to."""
        recipe = self.w.recipe
        return f"{recipe.base_dir.resolve()}|{recipe.model.source}"

    def target(self) -> tuple[Path | None, str]:
        """The file Validate checks, or None and why there is none.

        The last export when it came from the model now in the form (the recipe describes
        how to rebuild that model's inputs), else the recipe's output file if it exists.
        """
        if self.last_export is not None:
            path, model = self.last_export
            if model == self.model_key() and path.is_file():
                return path, ""
        output = self.w.recipe.output_path
        if output.is_file():
            return output, ""
        return None, f"there is no ONNX file to validate yet ({output.name}); export first."

    def disabled_reason(self) -> str:
        w = self.w
        if w.export_job is not None or self.job is not None:
            return "a job is running."
        # the output path does not matter for validating an existing file
        problems = {k: v for k, v in w.problems.items() if not k.startswith("export.output")}
        if problems:
            field, sentence = next(iter(problems.items()))
            return f"{field}: {sentence}"
        return self.target()[1]

    def update_enabled(self) -> None:
        """Enable Validate (bar button, menu action, tab button) or say why it is not."""
        w = self.w
        reason = self.disabled_reason()
        target = self.target()[0]
        tip = (f"Validate {target.name if target else 'the export'} with ONNX Runtime "
               "(Ctrl+Shift+V)") if not reason else f"Validate is disabled: {reason}"
        for widget in (w.validate_button, w.validate_action):
            widget.setEnabled(not reason)
            widget.setToolTip(tip)
        w.validation.set_validate_enabled(not reason, tip)

    # ----------------------------------------------------------------- after an export

    def export_done(self, message: dict[str, Any], report: dict[str, Any]) -> None:
        """Remember the written file; fill the Validation tab when the export validated it."""
        w = self.w
        output = report.get("output")
        validation = report.get("validation")
        error = report.get("error") or {}
        written = report.get("ok") or (validation is not None and error.get("kind") ==
                                       "validation")
        if output and written:
            self.last_export = (Path(output), self.model_key())
        if validation:
            self.add_warnings(validation.get("warnings") or [])
            w.validation.show_result(validation, output, message.get("job_dir"))
            if not report.get("ok") and output:  # the Summary skips the graph of a failure
                QTimer.singleShot(0, lambda p=Path(output): w.graph.load_file(p))
        elif w.recipe.validate.enabled:
            w.validation.show_empty()

    def add_warnings(self, items: list[dict[str, Any]]) -> None:
        """Add warnings the Warnings tab does not list yet (events and reports repeat them)."""
        w = self.w
        shown = {(row[0], row[1]) for row in texts(w.warnings.tree)}
        for item in items:
            key = (str(item.get("category", "Warning")), str(item.get("message", "")).strip())
            if key not in shown:
                w.warnings.add(item)
        w._count_warnings()

    # ----------------------------------------------------------------- the job

    def start(self) -> int | None:
        """Validate the target with the form's [validate] settings in the worker; the job
        id, or None when Validate is disabled (the status bar says why)."""
        w = self.w
        w._output_edited()
        w.revalidate()
        reason = self.disabled_reason()
        target = self.target()[0]
        if reason or target is None:
            w.statusBar().showMessage(f"Validate is disabled: {reason}", 5000)
            return None
        ready = w.runner.ready_info is not None
        w.validation.show_running(str(target), ready)
        w.log.add(f"=== Validation started {time.strftime('%H:%M:%S')}: {target} against "
                  f"{w.recipe.model.source}")
        w.export_bar.start(ready)
        self.job = w.runner.validate(w.recipe.to_toml(), w.recipe.base_dir, target, self._event)
        w.revalidate()
        w.tabs.setCurrentWidget(w.validation)
        return self.job

    def _event(self, message: dict[str, Any]) -> None:
        w = self.w
        kind = message.get("type")
        if kind == "progress":
            stage = str(message.get("stage", ""))
            w.export_bar.set_progress(float(message.get("fraction", 0)), stage)
            w.validation.add_stage(stage)
        elif kind == "log":
            w.log.add(str(message.get("line", "")))
        elif kind == "warning":
            self.add_warnings([message])
        elif kind in ("result", "error"):
            self._done(message)

    def _done(self, message: dict[str, Any]) -> None:
        w = self.w
        self.job = None
        seconds = w.export_bar.seconds()
        if message["type"] == "result":
            validation = message.get("validation") or {}
            ok = bool(validation.get("ok"))
            w.validation.show_result(validation, message.get("onnx"), message.get("job_dir"))
            text = (f"Validation passed in {seconds:.1f} s." if ok else
                    "Validation failed; the Validation tab shows which trials and outputs.")
            w.export_bar.finish(ok, text, "Validation failed")
            if ok:
                w.progress.setFormat("Validated")
            w.log.add(f"=== Validation {'passed' if ok else 'failed'} in {seconds:.1f} s"
                      + ("" if ok else f": {validation.get('message', '')}"))
            onnx = message.get("onnx")
            if onnx and w.graph.loaded_path != Path(onnx):  # for "Show on graph"
                QTimer.singleShot(0, lambda p=Path(onnx): w.graph.load_file(p))
        else:
            error = message.get("error") or {}
            w.validation.show_error(error, str(message.get("details") or ""))
            title = {"cancelled": "Validation cancelled",
                     "worker_crashed": "The worker crashed"}.get(str(error.get("kind")),
                                                                 "Validation could not run")
            w.export_bar.finish(False, f"{title}; the Validation tab says why.", title)
            w.log.add(f"=== {error.get('kind', 'error')}: {error.get('message', '')}")
        w.tabs.setCurrentWidget(w.validation)
        w.revalidate()
        w.validationFinished.emit(message)

    # ----------------------------------------------------------------- the graph

    def show_on_graph(self, values: dict[str, float], label: str, node: str = "") -> bool:
        """Colour the Graph tab by per-node error, switch to it and centre `node`."""
        w = self.w
        onnx = w.validation.onnx
        if onnx and w.graph.loaded_path != Path(onnx) and not w.graph.load_file(Path(onnx)):
            w.statusBar().showMessage(f"The graph of {Path(onnx).name} cannot be shown.", 5000)
            return False
        browser = w.graph.ensure_browser()
        if browser.model is None:
            return False
        browser.set_overlay(values, label)
        w.tabs.setCurrentWidget(w.graph)
        index = browser.model.node_by_name(node) if node else None
        if index is not None:
            browser.select_node(index)
        return True

    def clear_graph(self) -> None:
        if self.w.graph.browser is not None:
            self.w.graph.browser.clear_overlay()
