"""MainWindow: the layout of one session (form side, result tabs), its menus and its dialogs.

The state lives in the ExportSession; the form side and the result tabs are views of it. The
window adds what belongs to a window: menus and shortcuts, the file dialogs, drag and drop, the
title, the status bar, the theme, and the settings (recent files, geometry).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

# dialogs, QUrl, QDesktopServices: looked up (their classes made) when first used
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QPaintEvent
from PySide6.QtWidgets import QMainWindow, QSplitter, QVBoxLayout, QWidget

from onnx_studio.app import logs, recipes, theme
from onnx_studio.app import settings as settings_mod
from onnx_studio.app.first_paint import FirstFrame
from onnx_studio.app.fold import FormFold
from onnx_studio.app.form import FormPanel
from onnx_studio.app.menus import Menus
from onnx_studio.app.placement import Remembered
from onnx_studio.app.recovery import Autosave
from onnx_studio.app.results.provenance import ProvenanceBar
from onnx_studio.app.session import ExportSession
from onnx_studio.app.status import StatusLine
from onnx_studio.app.tabs import ResultTabs
from onnx_studio.app.unsaved import UnsavedGuard

TITLE = "ONNX Export Studio"
OPEN_FILTER = ("All supported (*.toml *.py *.pt2 *.pt *.pth *.onnx);;Recipes (*.toml);;"
               "Models (*.py *.pt2 *.pt *.pth);;ONNX files (*.onnx);;All files (*)")
class MainWindow(QMainWindow):
    """The form side and the result tabs, side by side: views of `self.session`."""

    def __init__(self, settings: settings_mod.Settings | None = None,
                 settings_notice: str | None = None, start_worker: bool = True,
                 session: ExportSession | None = None) -> None:
        """`session`: the session to show (tests hand one a shared worker); None: a new one,
        whose worker starts with the window unless `start_worker` is False."""
        super().__init__()
        self.first_frame = FirstFrame(self)  # what waits for the window's first frame
        self.settings = settings or settings_mod.Settings()
        # the theme first: the widgets made below are polished once, in its style and colours
        self.theme = theme.Follower(self.settings.theme, self)
        self.theme.apply()
        self.remembered = Remembered(self.settings, self._status)
        self.session = session or ExportSession(use_worker=start_worker)
        if self.session.parent() is None:
            self.session.setParent(self)
        self.setWindowTitle(TITLE)
        self.setAcceptDrops(True)
        self.form = FormPanel(self.session)
        self.form.model_form.exampleChosen.connect(self._load_example)
        self.autosave = Autosave(self.session)
        self.guard = UnsavedGuard(self, self.session, self.autosave, self.save_recipe, TITLE)
        self._log = logs.attach(self.session)
        self._closing = False
        self.tabs = ResultTabs(self.session)
        self.splitter = QSplitter(Qt.Orientation.Horizontal)
        self.provenance = ProvenanceBar(self.session, self.tabs.provenance)
        self.provenance.againRequested.connect(self._again)
        self.tabs.currentChanged.connect(self.provenance.refresh)
        results = QWidget()
        column = QVBoxLayout(results)
        column.setContentsMargins(0, 6, 0, 0)
        column.addWidget(self.provenance)
        column.addWidget(self.tabs, 1)
        self.fold = FormFold(self.splitter, self.form, self.tabs, self.remembered, column)
        self.menus = Menus(self, self)
        self.splitter.addWidget(self.form)
        self.splitter.addWidget(results)
        self.splitter.setChildrenCollapsible(False)  # never dragged away; folded by FormFold
        self.splitter.setStretchFactor(0, 0)
        self.splitter.setStretchFactor(1, 1)
        self.splitter.setSizes([640, 700])
        self.setCentralWidget(self.splitter)
        self.status_line = StatusLine(self.session)
        self.statusBar().addPermanentWidget(self.status_line)

        s = self.session
        s.recipeChanged.connect(self._update_title)
        s.dirtyChanged.connect(self._update_title)
        s.refused.connect(self._status)
        self.tabs.statusMessage.connect(self._status)

        self.theme.changed.connect(self._show_theme)
        self._show_theme(self.theme.dark)
        self.remembered.restore(self, self.splitter, self.form.minimumSizeHint().width())
        self.fold.restore()
        if settings_notice:
            self.form.banner.show_message(settings_notice)
        if start_worker:  # once the window is drawn: its first frame waits for neither
            self.first_frame.after(self._start_background)

    def _start_background(self) -> None:
        # The worker imports torch (seconds); start it now so the first export is warm.
        self.session.start_worker()
        # The graph view's modules (onnx, numpy, pyqtgraph) load on a background thread
        # once the window is up, so showing the first result does not freeze the window.
        from onnx_studio.app.graph.tab import preload_graph_modules  # the tab's module too

        QTimer.singleShot(300, preload_graph_modules)

    # ================================================================= title, status

    def _update_title(self) -> None:
        path = self.session.recipe_path
        # [*]: Qt shows the platform's modified marker there while the window is modified
        self.setWindowTitle(f"{path.name if path else 'Unsaved recipe'}[*] — {TITLE}")
        self.setWindowModified(self.session.dirty)

    @property
    def log_file(self) -> Path | None:
        """The log file the session's lines go to; None when it cannot be written."""
        return self._log.path

    def about_text(self) -> str:
        """The About box's text: the versions of the app and of what it runs on."""
        return logs.about_html(TITLE, self.session.worker_torch, self.log_file)

    def show_about(self) -> None:
        QtWidgets.QMessageBox.about(self, f"About {TITLE}", self.about_text())

    def open_log_folder(self) -> None:
        folder = logs.log_dir()
        folder.mkdir(parents=True, exist_ok=True)
        QtGui.QDesktopServices.openUrl(QtCore.QUrl.fromLocalFile(str(folder)))

    def _again(self, job: str) -> None:
        if job == "validate":
            self.session.start_validation()
        else:
            self.session.start_export()

    def _status(self, text: str, ms: int = 5000) -> None:
        self.statusBar().showMessage(text, ms)

    # ================================================================= files

    def load_initial(self, path: Path | None) -> None:
        """Open `path` (recipe, model or .onnx), or the default example recipe."""
        if path is None or path.suffix != ".toml":
            self.load_default_recipe()
        if path is not None:
            self.open_path(path)
        self.guard.offer_recovery(self.form.banner)

    def load_default_recipe(self) -> None:
        """The default example at once; its recipe file is written into its folder, and the
        gallery (every example's recipe read) filled, once the window is drawn."""
        self.session.load_default(later=self.first_frame.after)
        self.first_frame.after(lambda: self.form.model_form.set_examples(recipes.list_examples()))

    def open_dialog(self) -> None:
        start = self.remembered.start_folder(self.session.recipe.base_dir)
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Open", start, OPEN_FILTER)
        if path:
            self.open_path(Path(path))

    def open_hf_dialog(self) -> None:
        start = self.remembered.start_folder(self.session.recipe.base_dir)
        path = QtWidgets.QFileDialog.getExistingDirectory(self, "Open Hugging Face folder", start)
        if path:
            self.open_hf_folder(Path(path))

    def open_hf_folder(self, path: Path) -> bool:
        """Open a save_pretrained folder as the model (ExportSession.open_hf_folder)."""
        problem = self.session.open_hf_folder(path)
        if problem is not None:
            self.form.banner.show_message(problem)
            return False
        self.remembered.set_last_folder(path.resolve().parent)
        return True

    def open_path(self, path: Path) -> bool:
        """Open a recipe, a model file (as the source) or an .onnx file (in the Graph tab)."""
        suffix = path.suffix.lower()
        if not path.exists():
            self.form.banner.show_message(f"{path} does not exist.")
            return False
        if suffix == ".toml":
            if self.session.dirty:  # opened once the edits are saved or let go
                self.keep_edits_then(f"opening {path.name}", lambda: self._open_recipe(path))
                return False
            return self._open_recipe(path)
        if suffix == ".onnx":  # the session's file: Summary, Graph, and what Validate checks
            self.session.open_onnx(path)  # the Graph tab follows (shown or once shown)
            self.tabs.setCurrentWidget(self.tabs.summary)
        elif suffix in recipes.MODEL_SUFFIXES:
            self.session.set_source(recipes.relative_source(path, self.session.recipe.base_dir))
        else:
            self.form.banner.show_message(f"{path.name}: open a recipe (.toml), a model (.py, "
                                          ".pt2, .pt) or an .onnx file.")
            return False
        self.remembered.add_recent("model", path)
        return True

    def _open_recipe(self, path: Path) -> bool:
        if not self.session.open_recipe(path):
            return False
        self.remembered.add_recent("recipe", self.session.recipe_path or path)
        return True

    def recent(self) -> list[str]:
        """The recent files, newest first (the File ▸ Recent menu)."""
        return self.remembered.recent()

    def save_recipe(self) -> bool:
        path = self.session.recipe_path
        return self.save_recipe_to(path) if path is not None else self.save_recipe_as()

    def save_recipe_as(self) -> bool:
        start = self.session.recipe_path or (
            Path(self.remembered.start_folder(self.session.recipe.base_dir)) / "recipe.toml")
        path, _ = QtWidgets.QFileDialog.getSaveFileName(self, "Save recipe", str(start),
                                                        "Recipes (*.toml)")
        return self.save_recipe_to(Path(path)) if path else False

    def save_recipe_to(self, path: Path) -> bool:
        """Write the recipe (paths rewritten relative to the new folder when it moves)."""
        if not self.session.save(path):
            return False
        self.remembered.add_recent("recipe", path)
        self._status(f"Saved {path.resolve()}", 4000)
        return True

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        self.first_frame.painted()

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        urls = event.mimeData().urls()
        if urls and all(Path(u.toLocalFile()).suffix.lower() in recipes.OPENABLE_SUFFIXES
                        for u in urls[:1]):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        urls = event.mimeData().urls()
        if urls:
            self.open_path(Path(urls[0].toLocalFile()))
            event.acceptProposedAction()

    # ================================================================= theme, settings

    @property
    def dark(self) -> bool:
        return self.theme.dark

    def set_theme(self, name: str) -> None:
        self.remembered.set_theme(name)
        self.theme.choose(name)

    def _show_theme(self, dark: bool) -> None:
        if self.theme.choice in self.menus.themes:
            self.menus.themes[self.theme.choice].setChecked(True)
        self.form.set_dark(dark)
        self.provenance.set_dark(dark)
        self.tabs.summary.follow_palette()
        self.session.recheck()  # the forms mark their problems again, in the new colours

    # ================================================================= unsaved edits

    @property
    def unsaved_prompt(self) -> QtWidgets.QMessageBox | None:
        """The Save / Discard / Cancel question on screen, if any (onnx_studio.app.unsaved)."""
        return self.guard.unsaved_prompt

    @property
    def busy_prompt(self) -> QtWidgets.QMessageBox | None:
        """The "a job is running, quit?" question on screen, if any (onnx_studio.app.unsaved)."""
        return self.guard.busy_prompt

    def keep_edits_then(self, what: str, proceed: Callable[[], object]) -> None:
        """Run `proceed` once unsaved edits are saved or discarded (onnx_studio.app.unsaved)."""
        self.guard.keep_edits_then(what, proceed)

    def _load_example(self, path: Path) -> None:
        self.keep_edits_then(f"loading the example {path.parent.name or path.stem}",
                             lambda: self.session.load_example(path))

    def _close_now(self) -> None:
        self._closing = True
        self.close()

    def closeEvent(self, event: QCloseEvent) -> None:
        if not self._closing and (self.session.busy or self.session.dirty):
            event.ignore()  # asked first: the answer closes the window, or does not
            QTimer.singleShot(0, self, lambda: self.guard.ask_before_quitting(self._close_now))
            return
        self._closing = True
        self.autosave.remove()  # closed on purpose: nothing to recover
        self.remembered.store(self, self.splitter)
        self.session.shutdown()
        super().closeEvent(event)
