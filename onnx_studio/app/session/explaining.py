"""Explainer: the Why? of a failed validation — the explain job in the worker, what it found (the
first node of the validated file whose values leave the tolerance, its module and source line:
onnx_studio.engine.analysis.explain) with its provenance, and Save repro…, the same job writing the
folder that reproduces it.

The explanation belongs to the validation it explains: the same file, unchanged on disk, and
the recipe as it was (its model, inputs and tolerance). It goes when they change, when an
export starts or another file is opened, so every view says the same thing after every action.
Qt signals, no widget.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.session.jobs import Jobs
from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.app.session.results import Results, _same_file
from onnx_studio.engine.recipe import to_toml

if TYPE_CHECKING:  # the protocol loads with the first job, after the window's first paint
    from onnx_studio.app.outcomes import FileStamp, Stamp, ValidationOutcome
    from onnx_studio.engine.protocol import (
        Divergence,
        Error,
        ErrorEvent,
        ExplainDocument,
        Repro,
        Result,
    )

__all__ = ["Explainer", "Explanation", "WhyOffer", "trial_names"]

WHAT_WHY_DOES = ("Find the first node of {name} whose values leave the tolerance while every "
                 "value it reads is within it: its module, its source line, the differences "
                 "(run in the worker; the Graph tab opens at it)")


@dataclass(frozen=True)
class Explanation:
    """What explain found in `onnx` (a file, or the folder a Hugging Face export wrote), sent
    with the recipe and the file as its `stamp` names them."""

    onnx: Path
    document: ExplainDocument
    stamp: Stamp
    rtol: float
    atol: float

    @property
    def divergence(self) -> Divergence | None:
        """The first divergent node (None: no node diverges on the export inputs)."""
        return self.document.first_divergence if self.document.diverges else None

    @property
    def file(self) -> Path:
        """The file that diverges: `onnx` itself, or the file of the folder that does (the
        first that diverges; the first file when none does)."""
        files = self.document.files
        if not files or not self.onnx.is_dir():
            return self.onnx
        first = next((f for f in files if f.diverges), files[0])
        return self.onnx / first.file

    @property
    def repro(self) -> Repro | None:
        return self.document.repro

    def sentence(self, validation: ValidationOutcome | None = None) -> str:
        """What the views say about it, one paragraph of plain text; `validation` (the one it
        explains) names the trials that failed when no node diverges."""
        div = self.divergence
        tolerance = f"rtol {self.rtol:g}, atol {self.atol:g}"
        name = self.file.name
        if div is None:
            if self.document.message:
                return (f"explain could not compare {name} with the model: "
                        f"{self.document.message}")
            failed = trial_names(validation)
            where = (f" The validation failed on {failed}, which explain does not run: it "
                     "compares on the export inputs only.") if failed else ""
            return (f"No node of {name} diverges: all {self.document.compared} values "
                    f"compared with PyTorch's on the export inputs are within {tolerance}, so "
                    f"there the file computes what the model computes.{where}")
        where = f"module {div.module}" if div.module else "the model itself"
        source = f", {div.source}" if div.source else ""
        ratio = (f" ({_num(div.tolerance_ratio)} × the tolerance)"
                 if div.tolerance_ratio is not None else "")
        after = (f"; {self.document.downstream} node{'s' if self.document.downstream != 1 else ''}"
                 " after it are beyond the tolerance too" if self.document.downstream else "")
        return (f"The first divergence in {name} is node {div.node} ({div.op_type}) in "
                f"{where}{source}: its outputs differ by up to {_num(div.max_abs_diff)}{ratio} "
                f"while every value it reads is within {tolerance}{after}.")

    def mark(self) -> str:
        """The outline's sentence on the graph: what makes the node the first divergence."""
        div = self.divergence
        if div is None:
            return ""
        ratio = (f" ({_num(div.tolerance_ratio)} × the tolerance)"
                 if div.tolerance_ratio is not None else "")
        return (f"the first divergence (Why?): its outputs differ by up to "
                f"{_num(div.max_abs_diff)}{ratio}, what it reads is within the tolerance")

    def node_rows(self) -> tuple[tuple[str, str], ...]:
        """The divergent node's rows for the graph's properties: module, source line, the
        differences of its outputs and of each value it reads."""
        div = self.divergence
        if div is None:
            return ()
        rows = [("module", div.module + (f" ({div.module_type.rsplit('.', 1)[-1]})"
                                         if div.module_type else "") if div.module else "—"),
                ("source", div.source or "—")]
        # short keys, the value's name in the text: a narrow properties panel keeps it whole
        for out in div.outputs or ["(output)"]:
            rows.append(("output", f"{out}: max abs diff {_num(div.max_abs_diff)}"
                         + (f", {_num(div.tolerance_ratio)} × the tolerance"
                            if div.tolerance_ratio is not None else "")))
        for value in div.inputs:
            diff = ("not compared" if value.max_abs_diff is None
                    else f"max abs diff {_num(value.max_abs_diff)}")
            kind = "" if value.kind == "value" else f" ({value.kind.replace('_', ' ')})"
            rows.append(("input", f"{value.name}: {diff}{kind}"))
        rows.append(("downstream", f"{self.document.downstream} nodes beyond the tolerance"))
        return tuple(rows)


@dataclass(frozen=True)
class WhyOffer:
    """Whether the views offer Why? now: `shown` for a failed validation, `enabled` when it can
    run, `tip` what it does or why it cannot."""

    shown: bool
    enabled: bool
    tip: str


def trial_names(validation: ValidationOutcome | None) -> str:
    """The failed trials of `validation` as a phrase ("the random draw (seed 1) and ..")."""
    run = validation.validation if validation is not None else None
    if run is None:
        return ""
    names = []
    for trial in run.trials:
        if trial.ok:
            continue
        if trial.kind == "random":
            names.append(f"the random draw (seed {trial.seed})")
        elif trial.kind == "dynamic-size":
            sizes = ", ".join(f"{k}={v}" for k, v in (trial.sizes or {}).items())
            names.append(f"other sizes ({sizes})")
        else:
            names.append("the export inputs")
    return " and ".join(dict.fromkeys(names))


def _same_state(a: FileStamp | None, b: FileStamp | None) -> bool:
    """True when two stamps name one file as it was at one moment (paths compared resolved)."""
    return a is not None and a.same(b)


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.3g}"


class Explainer(QObject):
    """Runs Why? and Save repro… in the session's worker; keeps the explanation."""

    changed = Signal()  # the explanation, the job running or the last error changed
    progress = Signal(float, str)
    explained = Signal(object)  # Explanation: Why? found it (the graph opens at its node)
    reproWritten = Signal(object)  # Repro: Save repro… wrote it
    failed = Signal(object)  # Error: the job could not run, or was cancelled

    def __init__(self, edits: RecipeEdits, jobs: Jobs, results: Results) -> None:
        super().__init__(edits)
        self.edits = edits
        self.jobs = jobs
        self.results = results
        self.explanation: Explanation | None = None
        self.error: Error | None = None  # why the last job did not answer (until the next)
        self.job: int | None = None
        self.job_kind = ""  # "why" | "repro" while one runs
        self.error_kind = ""  # the job `error` is about: "why" | "repro"
        self.stage = ""  # the running job's last progress stage
        self._generation = 0  # bumped by every drop: an answer sent before it is stale

    @property
    def busy(self) -> bool:
        return self.job is not None

    # ----------------------------------------------------------------- what is offered

    def offer(self) -> WhyOffer:
        """Why? for the session's validation: shown when it failed; enabled while it is current
        and no job makes or replaces its file."""
        outcome = self.results.validation
        run = outcome.validation if outcome is not None else None
        if outcome is None or run is None or run.ok or outcome.onnx is None:
            return WhyOffer(False, False, "")
        name = outcome.onnx.name
        if self.busy:
            return WhyOffer(True, False, "Why? is running.")
        if self.jobs.busy:
            return WhyOffer(True, False, "Why? waits for the export or validation running.")
        stale = self.results.stale(outcome)
        if stale is not None:
            return WhyOffer(True, False, f"{stale.sentence} Validate again first.")
        if not self.edits.recipe.model.source:
            return WhyOffer(True, False, "Why? compares with the model: fill in the model.")
        return WhyOffer(True, True, WHAT_WHY_DOES.format(name=name))

    # ----------------------------------------------------------------- jobs

    def explain(self) -> int | None:
        """Run Why? on the session's failed validation; the job id, or None (the offer's tip
        says why)."""
        offer = self.offer()
        outcome = self.results.validation
        if not offer.enabled or outcome is None or outcome.onnx is None:
            return None
        self.explanation = None
        return self._send(outcome.onnx, None, "why",
                          f"Explaining why {outcome.onnx.name} differs…")

    def save_repro(self, folder: Path) -> int | None:
        """Write the repro of the explanation's divergence into `folder` (the same job, with
        its folder); the job id, or None when there is nothing to reproduce or a job runs."""
        found = self.explanation
        if found is None or found.divergence is None or self.busy:
            return None
        return self._send(found.onnx, folder, "repro",
                          f"Writing the repro of {found.divergence.node}…")

    def cancel(self) -> None:
        """Cancel the running Why? or Save repro… (other jobs go on)."""
        if self.job is not None:
            self.jobs.runner.cancel([self.job])

    def _send(self, onnx: Path, folder: Path | None, kind: str, activity: str) -> int:
        from onnx_studio.app.outcomes import FileStamp, Stamp
        from onnx_studio.engine.protocol import ExplainRequest

        edits = self.edits
        recipe = edits.recipe
        stamp = Stamp(recipe=edits.fingerprint, export=edits.export_fingerprint,
                      run=edits.run_fingerprint, onnx=FileStamp.of(onnx),
                      label=edits.recipe_label())
        request = ExplainRequest(onnx=str(onnx), recipe=to_toml(recipe),
                                 base_dir=str(recipe.base_dir),
                                 repro_dir=str(folder) if folder is not None else None,
                                 write_repro=folder is not None)
        self.error = None
        self.job_kind, self.stage = kind, "Sent to the worker"
        self.job = self.jobs.send(
            request, functools.partial(self._done, onnx, stamp, kind, self._generation),
            activity=activity, progress=self._progress)
        self.changed.emit()
        return self.job

    def _progress(self, fraction: float, stage: str) -> None:
        self.stage = stage
        self.progress.emit(fraction, stage)

    def _done(self, onnx: Path, stamp: Stamp, kind: str, generation: int,
              final: Result | ErrorEvent) -> None:
        from onnx_studio.engine.protocol import Error, ErrorEvent, ExplainResult

        self.job, self.job_kind, self.stage = None, "", ""
        document = final.explanation if isinstance(final, ExplainResult) else None
        if document is None or not document.ok:
            self.error_kind = kind
            self.error = (final.error if isinstance(final, ErrorEvent) else
                          document.error if document is not None and document.error else
                          Error(kind="worker_protocol", message="The worker answered Why? "
                                f"with a {type(final).__name__}."))
            self.changed.emit()
            self.failed.emit(self.error)
            return
        checks = self.edits.recipe.validate
        found = Explanation(onnx, document, replace(stamp, at=time.time()), checks.rtol,
                            checks.atol)
        if generation != self._generation or not self._current(found):
            self.results.logLine.emit(f"=== Why? of {onnx.name} answered after its file or "
                                      "recipe changed: not shown")
            self.changed.emit()
            return
        self.explanation = found
        self.changed.emit()
        if kind == "repro" and document.repro is not None:
            self.reproWritten.emit(document.repro)
        elif kind == "why":
            self.explained.emit(found)

    # ----------------------------------------------------------------- what is current

    def _current(self, found: Explanation) -> bool:
        """True while `found` explains the session's validation: the same file, unchanged,
        the recipe's model, inputs and tolerance as they were."""
        from onnx_studio.app.outcomes import FileStamp  # an explanation comes after a result

        outcome = self.results.validation
        edits = self.edits
        checks = edits.recipe.validate
        return (outcome is not None and outcome.onnx is not None
                and _same_file(outcome.onnx, found.onnx)
                and _same_state(outcome.stamp.onnx, found.stamp.onnx)
                and _same_state(FileStamp.of(found.onnx), found.stamp.onnx)
                and found.stamp.export == edits.export_fingerprint
                and found.stamp.run == edits.run_fingerprint
                and (checks.rtol, checks.atol) == (found.rtol, found.atol))

    def follow(self) -> None:
        """Drop the explanation when it no longer explains the session's validation."""
        if self.explanation is not None and not self._current(self.explanation):
            self.drop()

    def drop(self, *_args: object) -> None:
        """Forget the explanation and the last error (an export started, a file was opened);
        an answer still on its way is not shown."""
        self._generation += 1
        if self.explanation is None and self.error is None:
            return
        self.explanation = None
        self.error = None
        self.changed.emit()
