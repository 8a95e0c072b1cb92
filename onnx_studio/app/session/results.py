"""Results: every result the session holds, with its provenance, and whether it is current.

The last export and the last validation (onnx_studio.app.outcomes, stamped with the recipe, the file
and when they ran), an .onnx the user opened, the warnings, and the files the exports wrote. A new
tolerance judges the validation again from its stored differences (onnx_studio.app.session.rejudge)
and stores the new verdict here, so every view reads the same one; `stale` says why a shown result
is out of date and which job brings it up to date (export again, or validate again), decided in
one place (onnx_studio.app.session.belonging). The files shown are watched (`watch`,
onnx_studio.app.session.file_watch): the session's own file, changed on disk, is read again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.session import belonging
from onnx_studio.app.session.belonging import Stale, Standing
from onnx_studio.app.session.file_watch import FileWatch
from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.app.session.rejudge import rejudge
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import is_folder_source

if TYPE_CHECKING:  # the protocol loads with the first result, after the window's first paint
    from onnx_studio.app.outcomes import ExportOutcome, OpenedFile, Stamp, ValidationOutcome
    from onnx_studio.engine.protocol import Validation, WarningItem

__all__ = ["Results", "Stale"]


def _same_file(a: Path | None, b: Path | None) -> bool:
    return a is not None and b is not None and a.resolve() == b.resolve()


class Results(QObject):
    """The session's results; `changed` whenever one of them is replaced."""

    changed = Signal()  # export, validation (a re-judge too) or opened file replaced
    warningsChanged = Signal()  # `warnings` was cleared, replaced or grew
    fileOpened = Signal(object)  # OpenedFile: an .onnx the user opened is the session's file
    logLine = Signal(str)

    def __init__(self, edits: RecipeEdits) -> None:
        super().__init__(edits)
        self.edits = edits
        self.export: ExportOutcome | None = None
        self.validation: ValidationOutcome | None = None
        self.opened: OpenedFile | None = None  # an .onnx opened since the last export
        self.warnings: list[WarningItem] = []  # replaced, never cleared in place
        self.exports: list[Path] = []  # the files exports wrote, each once, the latest last
        self._last_written: tuple[Path, str] | None = None  # (file, model_key) of an export
        self._samples: tuple[Path, dict[str, dict[str, Any]]] | None = None  # plot file's
        # files other parts show (the analysis: its profile's, its comparison's)
        self.more_files: Callable[[], list[Path]] = list
        self.watch = FileWatch(self)  # the files shown, on disk
        self.watch.touched.connect(lambda _paths: self.follow_disk())
        self.changed.connect(self.refollow)

    # ----------------------------------------------------------------- storing

    def export_started(self) -> None:
        """An export was sent: its result replaces the last one, its file the opened one."""
        self.export = None
        self.opened = None
        self.set_warnings([])
        self.changed.emit()

    def set_export(self, outcome: ExportOutcome, model_key: str) -> None:
        """Store an export's end, and the validation it made (if it validated)."""
        self.export = outcome
        report = outcome.report
        output = outcome.output
        if outcome.written and output is not None:
            self._last_written = (output, model_key)
            self.exports = [p for p in self.exports if p != output] + [output]
        if report is not None and report.warnings:
            self.set_warnings(list(report.warnings))
        if report is not None and report.validation is not None:
            self.add_warnings(report.validation.warnings or [])
            from onnx_studio.app.outcomes import ValidationOutcome
            from onnx_studio.engine.protocol import ExportResult

            job_dir = outcome.final.job_dir if isinstance(outcome.final, ExportResult) else None
            self.validation = ValidationOutcome(
                outcome.job, output, report.validation, report.error, outcome.details, job_dir,
                outcome.stamp, outcome.seconds, from_export=True)
        self.changed.emit()

    def set_validation(self, outcome: ValidationOutcome) -> None:
        """Store a validation's end (its warnings join the session's)."""
        if outcome.validation is not None:
            self.add_warnings(list(outcome.validation.warnings or []))
        self.validation = outcome
        self.changed.emit()

    def open_onnx(self, path: Path, reread: bool = False) -> OpenedFile:
        """Make an existing .onnx the session's file: what it holds (read here, without its
        weights); Validate checks it until the next export writes another. `reread`: the
        session's file changed on disk and is read again (the log and the header say so)."""
        from onnx_studio.app.outcomes import FileStamp, OpenedFile
        from onnx_studio.engine.graph.summary import summarize
        from onnx_studio.engine.protocol import InspectDocument

        path = path.resolve()
        try:
            inspect = InspectDocument.from_summary(summarize(path))
            opened = OpenedFile(path, FileStamp.of(path), inspect, None, time.time(), reread)
        except StudioError as exc:
            opened = OpenedFile(path, FileStamp.of(path), None, exc.message, time.time(), reread)
        self.opened = opened if opened.error is None else None
        said = "Read again (it changed on disk)" if reread else "Opened"
        self.logLine.emit(f"=== {said} {path}" + (f": {opened.error}" if opened.error else ""))
        self.fileOpened.emit(opened)
        self.changed.emit()
        return opened

    def forget_opened(self) -> None:
        """The form holds a model the opened file is not compared with (a Hugging Face
        folder exports and validates a folder): the file and its warnings are no longer the
        session's."""
        if self.opened is None:
            return
        self.opened = None
        self.set_warnings([])
        self.changed.emit()

    def add_warnings(self, items: list[WarningItem]) -> None:
        """Add the warnings not listed yet (events and reports repeat them)."""
        shown = {(w.category, w.message.strip()) for w in self.warnings}
        for item in items:
            if (item.category, item.message.strip()) not in shown:
                shown.add((item.category, item.message.strip()))
                self.warnings.append(item)
        self.warningsChanged.emit()

    def set_warnings(self, items: list[WarningItem]) -> None:
        self.warnings = items
        self.warningsChanged.emit()

    # ----------------------------------------------------------------- what the results are

    def latest(self) -> ExportOutcome | OpenedFile | None:
        """The session's file: one opened since the last export, else the last export."""
        return self.opened or self.export

    def validation_of(self, shown: ExportOutcome | OpenedFile | Stamp | None
                      ) -> ValidationOutcome | None:
        """The session's validation when it checked the file `shown` is of, as it was then
        (onnx_studio.app.session.belonging.verdict_of)."""
        from onnx_studio.app.outcomes import Stamp  # loaded with the first result

        if isinstance(shown, Stamp):
            validation = self.validation
            ok = (validation is not None and shown.onnx is not None
                  and shown.onnx.same(validation.stamp.onnx))
            return validation if ok else None
        return belonging.verdict_of(self, shown)

    def is_current(self, result: ExportOutcome | ValidationOutcome) -> bool:
        """True while `result` still describes what the session holds: the recipe reads the
        same (an export: [validate] aside; a validation: judged at the form's tolerance) and
        its ONNX file is unchanged (size, mtime, inode)."""
        return belonging.stale(self, result) is None

    def stale(self, shown: ExportOutcome | ValidationOutcome | OpenedFile) -> Stale | None:
        """Why `shown` is out of date and what brings it up to date; None while current
        (onnx_studio.app.session.belonging.stale)."""
        return belonging.stale(self, shown)

    def standing(self) -> Standing:
        """The session's file, the validation of it as it is now, and why it is out of date:
        what every view says (onnx_studio.app.session.belonging.standing)."""
        return belonging.standing(self)

    # ----------------------------------------------------------------- the files on disk

    def followed(self) -> list[Path]:
        """The files the session shows: its file, the validated one, the profiled and the
        compared ones."""
        from onnx_studio.app.outcomes import OpenedFile

        paths: list[Path] = []
        shown = self.latest()
        if isinstance(shown, OpenedFile):
            paths.append(shown.path)
        elif shown is not None and shown.stamp.onnx is not None:
            paths.append(shown.stamp.onnx.path)
        if self.validation is not None and self.validation.stamp.onnx is not None:
            paths.append(self.validation.stamp.onnx.path)
        paths += self.more_files()
        return list(dict.fromkeys(paths))

    def follow_disk(self) -> bool:
        """Look at the session's files on disk: its own file, changed since it was read, is
        read again (what it holds now is shown, marked as read again); True when anything
        the session shows changed (`changed` then)."""
        from onnx_studio.app.outcomes import FileStamp, OpenedFile

        touched = self.watch.check()
        shown = self.latest()
        stamp = shown.stamp if isinstance(shown, OpenedFile) else (
            shown.stamp.onnx if shown is not None else None)
        if stamp is not None and not stamp.same(FileStamp.of(stamp.path)) \
                and stamp.path.is_file():
            self.open_onnx(stamp.path, reread=True)
            return True
        if touched:
            self.changed.emit()
        return bool(touched)

    def refollow(self) -> None:
        """Follow the files the session shows now (`followed`)."""
        self.watch.follow(self.followed())

    # ----------------------------------------------------------------- judging again

    def follow_tolerance(self) -> bool:
        """Judge the last validation again at the form's tolerance, when only the tolerance changed
        since it ran (onnx_studio.app.session.rejudge: nothing is run); True when a new verdict was
        stored."""
        outcome = self.validation
        run = outcome.run if outcome is not None else None
        if outcome is None or run is None or outcome.stamp.run != self.edits.run_fingerprint:
            return False
        if outcome.stamp.export != self.edits.export_fingerprint:
            return False
        checks = self.edits.recipe.validate
        tolerance = (checks.rtol, checks.atol)
        shown = outcome.validation
        if shown is not None and (shown.rtol, shown.atol) == tolerance:
            return False
        judged: Validation | None
        if (run.rtol, run.atol) == tolerance:
            judged = run  # back at the tolerance it ran at: its own verdict
        else:
            judged = rejudge(run, *tolerance, self._plot_samples(outcome))
        if judged is None:
            return False
        self.validation = replace(outcome, validation=judged,
                                  as_run=None if judged is run else run)
        self.logLine.emit(f"=== Judged again at rtol {checks.rtol:g}, atol {checks.atol:g}: "
                          f"{'passed' if judged.ok else 'failed'} (nothing re-run)")
        self.changed.emit()
        return True

    def _plot_samples(self, outcome: ValidationOutcome) -> dict[str, dict[str, Any]]:
        """The plot file's samples of `outcome` (read once per file)."""
        path = outcome.plots
        if path is None or not path.is_file():
            return {}
        if self._samples is None or self._samples[0] != path:
            from onnx_studio.engine.validation.metrics import load_plots

            try:
                self._samples = (path, load_plots(path))
            except (OSError, ValueError, KeyError):
                return {}
        return self._samples[1]

    # ----------------------------------------------------------------- what Validate checks

    def validation_target(self) -> tuple[Path | None, str]:
        """An .onnx the user opened (since the last export), else the last export when it
        came from the model now in the form (the recipe says how to rebuild that model's
        inputs), else the recipe's output file if it exists; None and why when there is none."""
        edits = self.edits
        if self.opened is not None and self.opened.path.is_file():
            return self.opened.path, ""
        # a Hugging Face recipe exports (and validates) a folder of files
        written = Path.is_dir if is_folder_source(edits.recipe.model.source) else Path.is_file
        if self._last_written is not None:
            path, model = self._last_written
            if model == edits.model_key() and written(path):
                return path, ""
        output = edits.recipe.output_path
        if written(output):
            return output, ""
        return None, f"there is no ONNX file to validate yet ({output.name}); export first."

    def previous_and_latest(self) -> tuple[Path, Path] | str:
        """The file the export before the latest wrote and the latest's, both still there; or
        why there are not two to compare."""
        files = [p for p in self.exports if p.exists()]
        if not files:
            return "There is no export yet: export, or choose two files."
        if len(files) == 1:
            return (f"There is only one export so far ({files[0].name}): export again to "
                    "another file (another recipe or exporter), or choose file B.")
        return files[-2], files[-1]
