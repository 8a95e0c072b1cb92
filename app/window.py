"""MainWindow: the form side bound to one Recipe, the result tabs, the export and validate jobs."""

from __future__ import annotations

import functools
import importlib
import threading
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app import settings as settings_mod
from app import theme
from app.export_bar import ExportBar
from app.graph_tab import GraphTab
from app.jobs import JobRunner
from app.model_form import ModelForm, relative_source
from app.options_form import OptionsForm
from app.recipes import (
    MODEL_SUFFIXES,
    OPENABLE_SUFFIXES,
    ExampleRecipe,
    default_output_dir,
    fallback_recipe,
    file_problems,
    list_examples,
    load_example,
)
from app.results import LogView, PythonView, SourceViewer, SummaryView, WarningsView, resolve_source
from app.tensor_tables import InputsTable, OutputsTable
from app.validation_jobs import ValidationJobs
from app.validation_tab import ValidationTab
from engine import recipe as recipes
from engine import shipped
from engine.errors import StudioError
from engine.paths import rebase_recipe_paths
from engine.recipe import Recipe

TITLE = "ONNX Export Studio"
OPEN_FILTER = ("All supported (*.toml *.py *.pt2 *.pt *.pth *.onnx);;Recipes (*.toml);;"
               "Models (*.py *.pt2 *.pt *.pth);;ONNX files (*.onnx);;All files (*)")
TABS = ("Summary", "Warnings", "Validation", "Graph", "Python", "Log")


# pyqtgraph too: the Validation tab's parity plots need it as soon as a result arrives
GRAPH_MODULES = ("numpy", "onnx", "engine.graph", "app.graph", "pyqtgraph")


def preload_graph_modules() -> threading.Thread:
    """Import the graph view's dependencies off the GUI thread (class definitions only)."""

    def work() -> None:
        for name in GRAPH_MODULES:
            try:
                importlib.import_module(name)
            except Exception:  # the Graph tab reports a missing piece when it is opened
                return

    thread = threading.Thread(target=work, name="preload-graph", daemon=True)
    thread.start()
    return thread


class Banner(QFrame):
    """A one-line notice at the top of the form (settings reset, a recipe that did not load)."""

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
        layout = QHBoxLayout(self)
        layout.setContentsMargins(8, 4, 4, 4)
        layout.addWidget(self.label, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, text: str) -> None:
        self.label.setText(text)
        self.show()


class MainWindow(QMainWindow):
    """The form (a view of `self.recipe`) on the left, results on the right."""

    exportFinished = Signal(object)  # the final worker message (result or error)
    validationFinished = Signal(object)  # the final message of a validate job

    def __init__(self, settings: settings_mod.Settings | None = None,
                 settings_notice: str | None = None, start_worker: bool = True) -> None:
        super().__init__()
        self.settings = settings or settings_mod.Settings()
        self.recipe_path: Path | None = None
        self.recipe = Recipe()
        self.problems: dict[str, str] = {}
        self.dark = False
        self.export_job: int | None = None
        self.validation_jobs = ValidationJobs(self)
        self.last_message: dict[str, Any] | None = None
        self._saved_toml = ""
        self._python_dirty = True
        self.setWindowTitle(TITLE)
        self.setAcceptDrops(True)

        self.use_worker = start_worker
        self.runner = JobRunner(self)
        self.runner.workerReady.connect(self._worker_ready)
        self.runner.workerLost.connect(self._worker_lost)
        self.runner.log.connect(self._worker_log)

        self._build_form()
        self._build_results()
        self._build_menus()
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.form_side)
        splitter.addWidget(self.tabs)
        splitter.setStretchFactor(0, 0)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([640, 700])
        self.splitter = splitter
        self.setCentralWidget(splitter)
        self.worker_status = QLabel("Worker: starting…")
        self.statusBar().addPermanentWidget(self.worker_status)

        self.apply_theme(self.settings.theme)
        hints = QApplication.styleHints()
        if hasattr(hints, "colorSchemeChanged"):
            hints.colorSchemeChanged.connect(lambda *_: self.apply_theme(self.settings.theme))
        self._restore_geometry()
        if settings_notice:
            self.banner.show_message(settings_notice)
        if start_worker:
            # The worker imports torch (seconds); start it now so the first export is warm.
            QTimer.singleShot(0, self.runner.start)
            # The graph view's modules (onnx, numpy, pyqtgraph) load on a background thread
            # once the window is up, so showing the first result does not freeze the window.
            QTimer.singleShot(300, preload_graph_modules)

    # ================================================================= layout

    def _build_form(self) -> None:
        self.banner = Banner()
        self.model_form = ModelForm(self.recipe)
        self.inputs_table = InputsTable(self.recipe)
        self.outputs_table = OutputsTable(self.recipe)
        self.options_form = OptionsForm(self.recipe)
        self.forms = (self.model_form, self.inputs_table, self.outputs_table, self.options_form)
        for form in self.forms:
            form.changed.connect(self._form_changed)
        self.model_form.describeRequested.connect(self._describe)
        self.model_form.exampleChosen.connect(self._example_chosen)
        self.model_form.candidateChosen.connect(self._candidate_chosen)

        content = QWidget()
        column = QVBoxLayout(content)
        column.setContentsMargins(0, 0, 4, 0)
        column.setSpacing(6)
        for form in self.forms:
            column.addWidget(form)
        column.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setWidget(content)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

        self.export_bar = ExportBar()
        bar = self.export_bar
        # The bar's widgets under their old names: tests and shortcuts reach them directly.
        self.output, self.problem_label = bar.output, bar.problem_label
        self.progress, self.stage, self.elapsed = bar.progress, bar.stage, bar.elapsed
        self.export_button, self.cancel_button = bar.export_button, bar.cancel_button
        self.validate_button = bar.validate_button

        self.form_side = QWidget()
        side = QVBoxLayout(self.form_side)
        side.setContentsMargins(6, 6, 0, 6)
        side.addWidget(self.banner)
        side.addWidget(scroll, 1)
        side.addWidget(self.export_bar)
        self.form_side.setMinimumWidth(520)

        bar.outputEdited.connect(self._output_edited)
        bar.browseClicked.connect(self._browse_output)
        bar.exportClicked.connect(self.start_export)
        bar.validateClicked.connect(self.start_validation)
        bar.cancelClicked.connect(self.cancel_export)

    def _build_results(self) -> None:
        self.summary = SummaryView()
        self.warnings = WarningsView()
        self.validation = ValidationTab()
        self.graph = GraphTab()
        self.python = PythonView()
        self.log = LogView()
        self.tabs = QTabWidget()
        for widget, name in zip((self.summary, self.warnings, self.validation, self.graph,
                                 self.python, self.log), TABS, strict=True):
            self.tabs.addTab(widget, name)
        self.tabs.currentChanged.connect(self._tab_changed)
        self.warnings.sourceRequested.connect(self.open_source)
        self.validation.validateRequested.connect(self.start_validation)
        self.validation.showOnGraph.connect(self.show_errors_on_graph)
        self.validation.clearGraph.connect(lambda: self.validation_jobs.clear_graph())

    def _action(self, menu: Any, text: str, slot: Any, shortcut: Any = None) -> QAction:
        action = QAction(text, self)
        if shortcut is not None:
            keys = shortcut if isinstance(shortcut, list) else [shortcut]
            action.setShortcuts([QKeySequence(k) for k in keys])
        action.triggered.connect(slot)
        menu.addAction(action)
        return action

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file = bar.addMenu("&File")
        self._action(file, "&Open…", self.open_dialog, QKeySequence.StandardKey.Open)
        self._action(file, "&New recipe", self.new_recipe, QKeySequence.StandardKey.New)
        self._action(file, "&Save recipe", self.save_recipe, QKeySequence.StandardKey.Save)
        self._action(file, "Save recipe &as…", self.save_recipe_as, "Ctrl+Shift+S")
        self.recent_menu = file.addMenu("Recent")
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        file.addSeparator()
        self._action(file, "&Quit", self.close, QKeySequence.StandardKey.Quit)
        run = bar.addMenu("&Export")
        self.export_action = self._action(run, "&Export", self.start_export,
                                          ["Ctrl+E", "Ctrl+Return"])
        self.validate_action = self._action(run, "&Validate with ONNX Runtime",
                                            self.start_validation, "Ctrl+Shift+V")
        self.cancel_action = self._action(run, "&Cancel", self.cancel_export, "Esc")
        self._action(run, "Copy Python script", self.python.copy, "Ctrl+Shift+C")
        view = bar.addMenu("&View")
        for i, name in enumerate(TABS):
            self._action(view, name, lambda _=False, i=i: self.tabs.setCurrentIndex(i),
                         f"Ctrl+{i + 1}")
        view.addSeparator()
        themes = view.addMenu("Theme")
        for name in settings_mod.THEMES:
            self._action(themes, name.capitalize(), lambda _=False, n=name: self.set_theme(n))
        help_menu = bar.addMenu("&Help")
        self._action(help_menu, "Keyboard shortcuts", self._show_shortcuts, "F1")

    # ================================================================= recipe <-> form

    def set_recipe(self, recipe: Recipe, path: Path | None = None) -> None:
        """Show `recipe` (the window's one source of truth from now on)."""
        self.recipe = recipe
        self.recipe_path = path
        for form in self.forms:
            form.set_recipe(recipe)
        self.export_bar.set_output(recipe.export.output)
        self._saved_toml = recipe.to_toml() if path else ""
        self.model_form.set_candidates([], [], None)
        self._form_changed()
        self.model_form.request_describe()

    def _form_changed(self) -> None:
        self.inputs_table.paint_dynamic()
        self.outputs_table.paint_dynamic()
        self.revalidate()
        self._python_dirty = True
        if self.tabs.currentWidget() is self.python:
            self._update_python()
        self._update_title()

    def _update_title(self) -> None:
        if self.recipe_path is None:
            self.setWindowTitle(TITLE)
            return
        modified = self.recipe.to_toml() != self._saved_toml
        self.setWindowTitle(f"{TITLE} — {self.recipe_path.name}{' *' if modified else ''}")

    def parse_errors(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for form in self.forms:
            out.update(form.parse_errors)
        return out

    def revalidate(self) -> None:
        """Mark every problem in the form and enable Export only when there is none."""
        problems: dict[str, str] = {}
        for field, sentence in [*self.parse_errors().items(), *self.recipe.problems(),
                                *file_problems(self.recipe)]:
            problems.setdefault(field, sentence)
        self.problems = problems
        for form in self.forms:
            form.mark(problems)
        self.export_bar.show_problems(problems)
        self.export_action.setEnabled(self.export_button.isEnabled())
        self.validation_jobs.update_enabled()

    # ----------------------------------------------------------------- validate (validation_jobs)

    @property
    def validate_job(self) -> int | None:
        return self.validation_jobs.job

    def validation_target(self) -> Path | None:
        """The file Validate would check now (None: nothing to validate)."""
        return self.validation_jobs.target()[0]

    def start_validation(self) -> int | None:
        """Validate the last export with the form's [validate] settings (Ctrl+Shift+V)."""
        return self.validation_jobs.start()

    def show_errors_on_graph(self, values: dict[str, float], label: str, node: str = "") -> bool:
        return self.validation_jobs.show_on_graph(values, label, node)

    def export_disabled_reason(self) -> str:
        return "" if self.export_button.isEnabled() else self.problem_label.text()

    def _output_edited(self, text: str | None = None) -> None:
        text = self.output.text().strip() if text is None else text
        if text != self.recipe.export.output:
            self.recipe.export.output = text
            self._form_changed()

    def _browse_output(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "ONNX file", str(self.recipe.output_path),
                                              "ONNX (*.onnx)")
        if path:
            self.output.setText(relative_source(Path(path), self.recipe.base_dir))
            self._output_edited()

    def _update_python(self) -> None:
        if not self._python_dirty:
            return
        from engine.export.codegen import generate

        try:
            code = generate(self.recipe)
        except Exception as exc:  # a half-filled form: say so instead of failing
            code = f"# The script cannot be written yet: {exc}\n"
        self.python.set_code(code)
        self._python_dirty = False

    def _tab_changed(self, index: int) -> None:
        if self.tabs.widget(index) is self.python:
            self._update_python()

    # ================================================================= files

    def load_initial(self, path: Path | None) -> None:
        """Open `path` (recipe, model or .onnx), or the default example recipe."""
        if path is None or path.suffix != ".toml":
            self.load_default_recipe()
        if path is not None:
            self.open_path(path)

    def load_default_recipe(self) -> None:
        examples = list_examples()
        out_dir = default_output_dir()
        default = next((e for e in examples if e.name == "default"), None)
        self.model_form.set_examples(examples)
        try:
            recipe = load_example(default.path) if default else fallback_recipe(out_dir)
        except (StudioError, OSError) as exc:
            self.banner.show_message(f"The example recipe did not load: {exc}")
            recipe = fallback_recipe(out_dir)
        self.set_recipe(recipe, None)

    def open_dialog(self) -> None:
        start = self.settings.last_folder or str(self.recipe.base_dir)
        path, _ = QFileDialog.getOpenFileName(self, "Open", start, OPEN_FILTER)
        if path:
            self.open_path(Path(path))

    def open_path(self, path: Path) -> bool:
        """Open a recipe, a model file (as the source) or an .onnx file (in the Graph tab)."""
        suffix = path.suffix.lower()
        if not path.exists():
            self.banner.show_message(f"{path} does not exist.")
            return False
        if suffix == ".toml":
            try:  # a shipped example opens as its working copy, never in the install tree
                path = shipped.runnable(path)
                recipe = recipes.load(path)
            except StudioError as exc:
                self.banner.show_message(f"The recipe did not open: {exc.message}")
                return False
            self.set_recipe(recipe, path.resolve())
            self._remember("recipe", path)
            return True
        if suffix == ".onnx":
            self.tabs.setCurrentWidget(self.graph)
            self.graph.load_file(path)
            self._remember("model", path)
            return True
        if suffix in MODEL_SUFFIXES:
            self.model_form.set_source(relative_source(path, self.recipe.base_dir))
            self._remember("model", path)
            return True
        self.banner.show_message(f"{path.name}: open a recipe (.toml), a model (.py, .pt2, "
                                 ".pt) or an .onnx file.")
        return False

    def _remember(self, kind: str, path: Path) -> None:
        self.settings.add_recent(kind, str(path.resolve()))
        self._save_settings()

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        items = [*self.settings.recent_recipes, *self.settings.recent_models]
        for item in items:
            action = self.recent_menu.addAction(item)
            action.triggered.connect(lambda _=False, p=item: self.open_path(Path(p)))
        if not items:
            self.recent_menu.addAction("(none)").setEnabled(False)

    def new_recipe(self) -> None:
        self.set_recipe(Recipe(base_dir=default_output_dir()), None)

    def save_recipe(self) -> bool:
        if self.recipe_path is None:
            return self.save_recipe_as()
        return self.save_recipe_to(self.recipe_path)

    def save_recipe_as(self) -> bool:
        start = str(self.recipe_path or (Path(self.settings.last_folder or self.recipe.base_dir)
                                         / "recipe.toml"))
        path, _ = QFileDialog.getSaveFileName(self, "Save recipe", start, "Recipes (*.toml)")
        return self.save_recipe_to(Path(path)) if path else False

    def save_recipe_to(self, path: Path) -> bool:
        """Write the recipe (paths rewritten relative to the new folder when it moves)."""
        path = path.resolve()
        if path.parent != self.recipe.base_dir.resolve():
            self.set_recipe(rebase_recipe_paths(self.recipe, path.parent), self.recipe_path)
        try:
            recipes.save(self.recipe, path)
        except (OSError, StudioError) as exc:
            self.banner.show_message(f"The recipe was not saved: {exc}")
            return False
        self.recipe_path = path
        self._saved_toml = self.recipe.to_toml()
        self._update_title()
        self._remember("recipe", path)
        self.statusBar().showMessage(f"Saved {path}", 4000)
        return True

    def _example_chosen(self, example: ExampleRecipe) -> None:
        try:
            recipe = load_example(example.path)
        except (StudioError, OSError) as exc:
            self.banner.show_message(f"The example did not load: {exc}")
            return
        self.set_recipe(recipe, None)

    def open_source(self, source: str) -> SourceViewer | None:
        """Show the file of a warning's 'file:line' at that line."""
        folders = [self.recipe.base_dir]
        from app.recipes import source_file

        model = source_file(self.recipe)
        if model is not None:
            folders.append(model.parent)
        path, line = resolve_source(source, *folders)
        if path is None:
            self.statusBar().showMessage(f"Cannot find the file of {source}", 5000)
            return None
        viewer = SourceViewer(path, line, self)
        viewer.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        viewer.show()
        return viewer

    # ================================================================= drag and drop

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        urls = event.mimeData().urls()
        if urls and all(Path(u.toLocalFile()).suffix.lower() in OPENABLE_SUFFIXES
                        for u in urls[:1]):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        urls = event.mimeData().urls()
        if urls:
            self.open_path(Path(urls[0].toLocalFile()))
            event.acceptProposedAction()

    # ================================================================= worker jobs

    def _worker_ready(self, info: dict[str, Any]) -> None:
        self.worker_status.setText(f"Worker ready (torch {info.get('torch')}, "
                                   f"pid {info.get('pid')})")
        self.runner.submit({"job": "devices"}, self._devices_event)

    def _devices_event(self, message: dict[str, Any]) -> None:
        if message.get("type") == "result":
            self.options_form.set_capabilities(message)
            self.revalidate()

    def _worker_lost(self, sentence: str) -> None:
        self.worker_status.setText("Worker restarting…")
        self.log.add(f"!! {sentence}")

    def _worker_log(self, line: str) -> None:
        self.log.add(line)

    def _describe(self, source: str) -> None:
        request = {"job": "describe", "source": source, "base_dir": str(self.recipe.base_dir)}
        if self.use_worker:
            self.runner.submit(request, functools.partial(self._describe_event, source))
            return
        # No worker (exit-after-paint, form tests): describe only reads the file (ast), so
        # it can run here without importing torch.
        import dataclasses

        from engine.source.describe import describe

        desc = describe(source, self.recipe.base_dir)
        self._describe_event(source, {"type": "result", "description": dataclasses.asdict(desc)})

    def _describe_event(self, source: str, message: dict[str, Any]) -> None:
        current = self.recipe.model.source
        if message.get("type") not in ("result", "error") or not current.startswith(source):
            return
        if message["type"] == "error":
            self.model_form.set_candidates([], [], message["error"].get("message"))
            return
        desc = message.get("description") or {}
        candidates = list(desc.get("candidates") or [])
        self._description = desc
        self.model_form.set_candidates(candidates, list(desc.get("forward_params") or []),
                                       desc.get("error"))
        if ".py:" not in current and len(candidates) == 1:
            # One class in the file: pick it, and name the inputs after its forward().
            self.model_form._candidate_activated(self.model_form.candidates.item(0))

    def _candidate_chosen(self, candidate: dict[str, Any]) -> None:
        params = list(candidate.get("params") or [])
        if candidate.get("kind") != "class":
            params = list(getattr(self, "_description", {}).get("forward_params") or [])
        if params:
            self.inputs_table.set_names(params)

    # ----------------------------------------------------------------- export

    def start_export(self) -> int | None:
        """Send the recipe to the worker; returns the job id (None when Export is disabled)."""
        self._output_edited()
        self.revalidate()
        if self.export_job is not None or self.validate_job is not None or self.problems:
            return None
        self.summary.show_running(str(self.recipe.output_path),
                                  self.runner.ready_info is not None)
        self.warnings.clear()
        self._count_warnings()
        self.last_message = None
        self.log.add(f"=== Export started {time.strftime('%H:%M:%S')}: "
                     f"{self.recipe.model.source} -> {self.recipe.output_path}")
        self.export_bar.start(self.runner.ready_info is not None)
        if self.recipe.validate.enabled:
            self.validation.show_running(str(self.recipe.output_path),
                                         self.runner.ready_info is not None)
            self.validation.add_stage("Exporting first")
        else:
            self.validation.show_empty()  # results of the file about to be replaced
        self.export_job = self.runner.export(self.recipe.to_toml(), self.recipe.base_dir,
                                             self._export_event)
        self.revalidate()
        self.tabs.setCurrentWidget(self.summary)
        return self.export_job

    def cancel_export(self) -> None:
        """Cancel the running export or validation (Esc)."""
        if self.export_job is not None or self.validate_job is not None:
            self.runner.cancel()

    def _export_event(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "progress":
            self.export_bar.set_progress(float(message.get("fraction", 0)),
                                         str(message.get("stage", "")))
            self.summary.add_stage(str(message.get("stage", "")))
            if self.recipe.validate.enabled and self.validation.result is None:
                self.validation.add_stage(str(message.get("stage", "")))
        elif kind == "log":
            self.log.add(str(message.get("line", "")))
        elif kind == "warning":
            self.warnings.add(message)
            self._count_warnings()
        elif kind in ("result", "error"):
            self._export_done(message)

    def _export_done(self, message: dict[str, Any]) -> None:
        self.export_job = None
        self.last_message = message
        seconds = self.export_bar.seconds()
        if message["type"] == "result":
            report = message.get("report") or {}
            if report.get("warnings"):
                self.warnings.clear()
                for item in report["warnings"]:
                    self.warnings.add(item)
            self.validation_jobs.export_done(message, report)
            if report.get("ok"):
                self.export_bar.finish(True, f"Done in {seconds:.1f} s.")
                self.summary.show_report(report, message.get("extra") or {})
                self.log.add(f"=== Export finished in {seconds:.1f} s: {report.get('output')}")
                output = report.get("output")
                if output:
                    QTimer.singleShot(0, lambda p=Path(output): self.graph.load_file(p))
            else:
                error = report.get("error") or {"kind": "export", "message": "Export failed."}
                self._show_failure(error, str(message.get("details") or ""), report)
                if report.get("validation"):  # exported, but it computes something else
                    self.tabs.setCurrentWidget(self.validation)
        else:
            self._show_failure(message.get("error") or {}, str(message.get("details") or ""),
                               None)
            if self.recipe.validate.enabled:
                self.validation.show_empty()
        self._count_warnings()
        self.revalidate()
        self.exportFinished.emit(message)

    def _count_warnings(self) -> None:
        count = self.warnings.count()
        self.tabs.setTabText(self.tabs.indexOf(self.warnings),
                             f"Warnings ({count})" if count else "Warnings")

    def _show_failure(self, error: dict[str, Any], details: str,
                      report: dict[str, Any] | None) -> None:
        if error.get("kind") == "validation" and report and report.get("validation"):
            # the file was written; it computes something else than the model
            self.export_bar.finish(False, "Exported, but the validation failed; the "
                                          "Validation tab shows where.", "Validation failed")
        else:
            title = {"cancelled": "Cancelled", "worker_crashed": "The worker crashed"}.get(
                str(error.get("kind")), "Export failed")
            self.export_bar.finish(False, f"{title}; the Summary tab says why.")
        self.summary.show_error(error, details, report)
        self.tabs.setCurrentWidget(self.summary)
        self.log.add(f"=== {error.get('kind', 'error')}: {error.get('message', '')}")

    # ================================================================= theme, settings

    def set_theme(self, name: str) -> None:
        self.settings.theme = name
        self.apply_theme(name)
        self._save_settings()

    def apply_theme(self, name: str) -> None:
        app = QApplication.instance()
        if isinstance(app, QApplication):
            self.dark = theme.apply(app, name)
        for form in self.forms:
            form.dark = self.dark
        self.banner.setStyleSheet(
            f"Banner {{ background: {theme.error_background(self.dark)}; }}")
        self.revalidate()

    def _restore_geometry(self) -> None:
        restored = False
        if self.settings.geometry:
            restored = self.restoreGeometry(
                QByteArray.fromBase64(self.settings.geometry.encode()))
        if self.settings.splitter:
            self.splitter.restoreState(QByteArray.fromBase64(self.settings.splitter.encode()))
        if not restored:
            screen = QApplication.primaryScreen()
            avail = screen.availableGeometry() if screen else None
            width = min(1340, avail.width()) if avail else 1340
            height = min(740, avail.height()) if avail else 740
            self.resize(width, height)

    def _save_settings(self) -> None:
        try:
            settings_mod.save(self.settings)
        except OSError as exc:
            self.statusBar().showMessage(f"Settings not saved: {exc}", 5000)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.settings.geometry = bytes(self.saveGeometry().toBase64().data()).decode()
        self.settings.splitter = bytes(self.splitter.saveState().toBase64().data()).decode()
        self._save_settings()
        self.runner.shutdown()
        super().closeEvent(event)

    def _show_shortcuts(self) -> None:
        QMessageBox.information(self, "Keyboard shortcuts", "\n".join([
            "Ctrl+O  open a recipe, model or .onnx file",
            "Ctrl+S / Ctrl+Shift+S  save the recipe (as)",
            "Ctrl+E or Ctrl+Enter  export",
            "Ctrl+Shift+V  validate the exported file with ONNX Runtime",
            "Esc  cancel the export or validation",
            "Ctrl+1 … Ctrl+6  Summary, Warnings, Validation, Graph, Python, Log",
            "Ctrl+Shift+C  copy the Python script",
            "Ctrl+Q  quit",
        ]))
