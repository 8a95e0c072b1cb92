"""Belonging: the one place that decides whether a result belongs to the file as it is now.

Every result the window shows (an export, a validation, an opened file, a profile, a comparison)
is stamped with the file it is of as it was (onnx_studio.app.outcomes.FileStamp: size, mtime_ns,
inode) and the recipe it came from. `stale` says why one is out of date and which job brings it
up to date; `verdict_of` which validation speaks for a file as it is now; `standing` what the
session's file is and what every view says of it (the Summary's status, the export bar's words,
the banner). Views draw these answers and keep no copy, so no view can call "passed" bytes that
failed. Qt-free.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from onnx_studio.app.outcomes import ExportOutcome, FileStamp, OpenedFile, ValidationOutcome
    from onnx_studio.app.session.recipe_edits import RecipeEdits

    Result = ExportOutcome | ValidationOutcome | OpenedFile

__all__ = ["Stale", "Standing", "file_sentence", "stale", "standing", "verdict_of"]

STALE_RECIPE = ("The form has changed since this {job}: what is shown here is of the previous "
                "recipe.")
STALE_FILE = "{name} has changed on disk since this {job}."
GONE_FILE = "{name} is no longer on disk (it was moved or deleted since this {job})."
STALE_CHECKS = ("The validation settings have changed since this validation: Validate again "
                "to run it with them.")
STALE_TOLERANCE = ("The tolerance has changed, and this validation kept no differences to judge "
                   "again: Validate again to judge the file at the new one.")
REREAD = ("{name} changed on disk at {at}, after its {what}: it is shown as it is now, and has "
          "not been validated since.")


class Results(Protocol):
    """What the decision reads of the session's results (onnx_studio.app.session.results)."""

    validation: ValidationOutcome | None
    export: ExportOutcome | None
    edits: RecipeEdits

    def latest(self) -> ExportOutcome | OpenedFile | None: ...


@dataclass(frozen=True)
class Stale:
    """Why a shown result is out of date, and the job that brings it up to date."""

    sentence: str
    again: str  # "export" | "validate" | "profile" | "compare"


def clock(at: float) -> str:
    """A time as the window shows it (HH:MM:SS, local)."""
    return time.strftime("%H:%M:%S", time.localtime(at)) if at else "?"


def file_sentence(then: FileStamp | None, job: str) -> str | None:
    """Why a result made of the file `then` is out of date on disk ("" never): changed,
    replaced or gone; None while the file is as it was."""
    if then is None:
        return None
    from onnx_studio.app.outcomes import FileStamp  # loaded with the first result

    now = FileStamp.of(then.path)
    if now is None:
        return GONE_FILE.format(name=then.path.name, job=job)
    return None if then.same(now) else STALE_FILE.format(name=then.path.name, job=job)


def _stale_self(result: ExportOutcome | ValidationOutcome, edits: RecipeEdits) -> Stale | None:
    from onnx_studio.app.outcomes import ExportOutcome

    stamp = result.stamp
    job = "export" if isinstance(result, ExportOutcome) else "validation"
    again = "export" if job == "export" else "validate"
    moved = file_sentence(stamp.onnx, job)
    if moved is not None:
        return Stale(moved, again)
    if stamp.export != edits.export_fingerprint:
        return Stale(STALE_RECIPE.format(job=job), again)
    if isinstance(result, ExportOutcome):
        return None
    validation = result.validation
    if validation is None:  # it could not run: current while the recipe reads the same
        return None if stamp.recipe == edits.fingerprint else Stale(
            STALE_RECIPE.format(job=job), again)
    if stamp.run != edits.run_fingerprint:
        return Stale(STALE_CHECKS, "validate")
    checks = edits.recipe.validate
    if (validation.rtol, validation.atol) != (checks.rtol, checks.atol):
        return Stale(STALE_TOLERANCE, "validate")
    return None


def verdict_of(results: Results, shown: ExportOutcome | OpenedFile | None
               ) -> ValidationOutcome | None:
    """The session's validation when it checked the file `shown` is of, as `shown` holds it
    and as it is on disk now (the same bytes: size, mtime, inode); None when no validation
    did (a file changed since has not been validated)."""
    validation = results.validation
    if shown is None or validation is None or validation.stamp.onnx is None:
        return None
    from onnx_studio.app.outcomes import FileStamp, OpenedFile

    then = shown.stamp if isinstance(shown, OpenedFile) else shown.stamp.onnx
    if then is None or not then.same(validation.stamp.onnx):
        return None
    return validation if then.same(FileStamp.of(then.path)) else None


def stale(results: Results, shown: Result) -> Stale | None:
    """Why `shown` is out of date and what brings it up to date; None while current. An
    export whose own file is current but whose validation is not offers Validate again; a file
    the session read again after it changed on disk offers Validate until it is validated."""
    from onnx_studio.app.outcomes import OpenedFile, ValidationOutcome

    edits = results.edits
    if isinstance(shown, OpenedFile):
        moved = file_sentence(shown.stamp, "opening")
        if moved is not None:
            return Stale(moved, "validate")
        verdict = verdict_of(results, shown)
        if verdict is not None:
            return _stale_self(verdict, edits)
        before = results.export
        if shown.reread and before is not None and before.output == shown.path:
            return Stale(REREAD.format(name=shown.path.name, at=clock(shown.at),
                                       what=f"export at {clock(before.stamp.at)}"), "validate")
        if shown.reread:
            return Stale(REREAD.format(name=shown.path.name, at=clock(shown.at),
                                       what="opening"), "validate")
        return None
    own = _stale_self(shown, edits)
    if own is not None or isinstance(shown, ValidationOutcome):
        return own
    validation = verdict_of(results, shown)
    return _stale_self(validation, edits) if validation is not None else None


@dataclass(frozen=True)
class Standing:
    """The session's file and what every view says of it: the validation of its bytes as they
    are now (`verdict`), and why what is shown is out of date (`stale`)."""

    shown: ExportOutcome | OpenedFile | None
    verdict: ValidationOutcome | None
    stale: Stale | None

    @property
    def word(self) -> str:
        """The verdict in a word or two (the export bar's), "" when there is nothing to say;
        "Out of date" when what is shown is (the sentence says why and of what)."""
        if self.stale is not None:
            return "Out of date"
        validation = self.verdict.validation if self.verdict is not None else None
        if self.verdict is not None and validation is None:
            return "Validation could not run"
        if validation is not None:
            return "Validated" if validation.ok else "Validation failed"
        return ""

    @property
    def sentence(self) -> str:
        """What the export bar says under its bar about the session's file now."""
        validation = self.verdict.validation if self.verdict is not None else None
        if validation is not None and self.stale is None:
            name = _name(self.shown)
            if validation.ok:
                return f"{name} passed its validation ({_trials(self.verdict)})."
            return (f"{name} failed its validation ({_trials(self.verdict)}); the Validation "
                    "tab shows where.")
        if self.stale is not None:
            return self.stale.sentence
        return ""


def _name(shown: ExportOutcome | OpenedFile | None) -> str:
    from onnx_studio.app.outcomes import OpenedFile

    if isinstance(shown, OpenedFile):
        return shown.path.name
    output = shown.output if shown is not None else None
    return output.name if output is not None else "The export"


def _trials(outcome: ValidationOutcome | None) -> str:
    validation = outcome.validation if outcome is not None else None
    if validation is None:
        return "no trial ran"
    trials = validation.trials
    return f"{sum(1 for t in trials if t.ok)} of {len(trials)} trials"


def standing(results: Results) -> Standing:
    """What the session's file is now (an .onnx opened or read again since the last export,
    else the export), the validation of it as it is now, and why it is out of date."""
    shown = results.latest()
    if shown is None:
        return Standing(None, None, None)
    return Standing(shown, verdict_of(results, shown), stale(results, shown))


def same_path(a: Path | None, b: Path | None) -> bool:
    return a is not None and b is not None and (a == b or a.resolve() == b.resolve())
