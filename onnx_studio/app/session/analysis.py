"""AnalysisModel: the compare, profile and variant jobs and what they found, with provenance.

The session owns one; the Compare tab is its view. One job at a time, in the session's worker
(onnx_studio.app.session.jobs); each result is kept with the files it is of, the recipe it ran
against PyTorch with (if any) and when it ran: the last comparison, the last profile, every variant.
Cancel cancels this job only (JobRunner.cancel).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from onnx_studio.app.outcomes import FileStamp
from onnx_studio.app.session.belonging import Stale, file_sentence
from onnx_studio.app.session.jobs import Jobs
from onnx_studio.app.session.recipe_edits import RecipeEdits
from onnx_studio.engine.recipe import to_toml

if TYPE_CHECKING:  # the protocol loads with the first job, after the window's first paint
    from onnx_studio.app.session.jobs import End
    from onnx_studio.engine.protocol import (
        CompareDocument,
        ErrorEvent,
        ExportRequest,
        Fp16Overflow,
        ProfileDocument,
        Request,
        Result,
        VariantReport,
    )

__all__ = ["AnalysisModel", "Comparison", "Profile", "Variant"]


@dataclass(frozen=True)
class Comparison:
    """Two files compared: A the reference, B the other; `against` the recipe whose PyTorch
    model was the third reference ("" when inputs came from A's shapes)."""

    a: Path
    b: Path
    document: CompareDocument
    against: str
    at: float  # time.time() when it ran
    stamps: tuple[FileStamp | None, FileStamp | None] = (None, None)  # A and B when sent

    def stale(self) -> Stale | None:
        """Why this comparison is no longer of the files as they are (None: it is)."""
        for stamp in self.stamps:
            moved = file_sentence(stamp, "comparison")
            if moved is not None:
                return Stale(moved, "compare")
        return None


@dataclass(frozen=True)
class Profile:
    """One file timed in ONNX Runtime; `against` as Comparison's (eager PyTorch timed too)."""

    onnx: Path
    document: ProfileDocument
    against: str
    at: float
    stamp: FileStamp | None = None  # the file as it was when the profile was sent

    def stale(self) -> Stale | None:
        """Why this profile is no longer of the file as it is (None: it is)."""
        moved = file_sentence(self.stamp, "profile")
        return Stale(moved, "profile") if moved is not None else None

    def node_ms(self) -> dict[str, float]:
        """Milliseconds of the p50 run by the file's node names (each node's share of the
        profiled run, onnx_studio.engine.analysis.profile): a kernel that ran several of the
        file's nodes (a fused Conv+Relu) colours each of them with its time, as one."""
        values: dict[str, float] = {}
        for n in self.document.nodes:
            ms = n.p50_ms if n.p50_ms is not None else n.ms
            for name in n.fused or ([n.node] if n.node else []):
                values[name] = values.get(name, 0.0) + ms
        return values


@dataclass(frozen=True)
class Variant:
    """A variant written beside `source` and judged against the recipe's PyTorch model."""

    source: Path
    kind: str  # fp16 | int8 | optimized
    report: VariantReport
    at: float
    keep_fp32: str | None = None  # fp16: "auto" or node names, kept in float32 (as asked)

    @property
    def output(self) -> Path | None:
        """The variant's file (None when none was written)."""
        return Path(self.report.output) if self.report.output else None

    @property
    def kept_fp32(self) -> list[str]:
        """The nodes the fp16 variant keeps in float32, in graph order."""
        facts = self.report.variant
        return list(facts.kept_fp32 or []) if facts is not None else []

    @property
    def overflows(self) -> list[Fp16Overflow]:
        """The values the fp16 variant holds in float16 beyond its range (fail the verdict)."""
        facts = self.report.variant
        return list(facts.fp16_overflows or []) if facts is not None else []


AnalysisResult = Comparison | Profile | Variant


class AnalysisModel(QObject):
    """Runs one analysis job at a time and keeps what each found."""

    started = Signal(str)  # the job, as the status line names it (compare, profile, ...)
    progress = Signal(float, str)
    finished = Signal(str, object)  # (job, Comparison | Profile | Variant)
    failed = Signal(str, object)  # (job, Error)

    def __init__(self, edits: RecipeEdits, jobs: Jobs) -> None:
        super().__init__(edits)
        self.edits = edits
        self.jobs = jobs
        self.job: str | None = None
        self.job_id: int | None = None
        self.ahead: tuple[str, ...] = ()  # what the current job waits behind (JobRunner.ahead_of)
        self.comparison: Comparison | None = None
        self.profile: Profile | None = None
        self.variants: list[Variant] = []  # every variant made, the latest last
        self._chain: list[ExportRequest] = []  # the exports still to run before a compare
        self._chain_files: tuple[Path, Path] | None = None

    @property
    def busy(self) -> bool:
        return self.job is not None

    def files(self) -> list[Path]:
        """The files the last profile and comparison are of (the session watches them)."""
        found = [self.profile.onnx] if self.profile is not None else []
        if self.comparison is not None:
            found += [self.comparison.a, self.comparison.b]
        return found

    def _against(self, against_torch: bool) -> tuple[str | None, str]:
        """(the recipe's TOML, its label) when PyTorch is a reference too, else (None, "")."""
        recipe = self.edits.recipe
        if against_torch and recipe.model.source:
            return to_toml(recipe), self.edits.recipe_label()
        return None, ""

    # ----------------------------------------------------------------- jobs

    def compare(self, a: Path, b: Path, against_torch: bool) -> bool:
        """Compare A with B (and both with the recipe's PyTorch model, if asked)."""
        from onnx_studio.engine.protocol import CompareRequest

        toml, label = self._against(against_torch)
        request = CompareRequest(a=str(a), b=str(b), recipe=toml,
                                 base_dir=str(self.edits.recipe.base_dir))
        return self._submit("compare", request, f"Comparing {a.name} with {b.name}…",
                            functools.partial(self._compared, a, b, label,
                                              (FileStamp.of(a), FileStamp.of(b))))

    def profile_file(self, onnx: Path, against_torch: bool) -> bool:
        """Time `onnx` in ONNX Runtime per node, operator and module group."""
        from onnx_studio.engine.protocol import ProfileRequest

        toml, label = self._against(against_torch)
        request = ProfileRequest(onnx=str(onnx), recipe=toml,
                                 base_dir=str(self.edits.recipe.base_dir))
        return self._submit("profile", request, f"Profiling {onnx.name}…",
                            functools.partial(self._profiled, onnx, label, FileStamp.of(onnx)))

    def variant(self, onnx: Path, kind: str, keep_fp32: str | None = None) -> bool:
        """Write the `kind` variant of `onnx` beside it and judge it against the recipe's
        PyTorch model; fp16 with `keep_fp32` ("auto": the studio finds them, or node names
        joined by commas) keeps those nodes in float32 (NAME.fp16-keep.onnx)."""
        from onnx_studio.engine.protocol import VariantRequest

        recipe = self.edits.recipe
        keep = keep_fp32 if kind == "fp16" and keep_fp32 else None
        output = onnx.with_name(f"{onnx.stem}.{kind}{'-keep' if keep else ''}.onnx")
        request = VariantRequest(onnx=str(onnx), recipe=to_toml(recipe),
                                 base_dir=str(recipe.base_dir), kind=kind, output=str(output),
                                 keep_fp32=keep)
        what = f"{kind} (keeping {keep} in float32)" if keep else kind
        return self._submit("variant", request, f"Making the {what} variant of {onnx.name}…",
                            functools.partial(self._made, onnx, kind, keep))

    def both_exporters(self) -> tuple[Path, Path] | None:
        """Export the recipe with dynamo, then with TorchScript (beside its output, as
        NAME.dynamo.onnx and NAME.torchscript.onnx), then compare the two files against its
        PyTorch model: one job to the user, three in the worker. The two files, or None when
        a job runs already."""
        from onnx_studio.engine.protocol import ExportRequest

        if self.busy:
            return None
        recipe = self.edits.recipe
        out = recipe.output_path
        a, b = (out.with_name(f"{out.stem}.{e}.onnx") for e in ("dynamo", "torchscript"))
        self._chain = [ExportRequest(recipe=to_toml(dataclasses.replace(
            recipe, export=dataclasses.replace(recipe.export, exporter=e, output=str(f)))),
            base_dir=str(recipe.base_dir)) for e, f in (("dynamo", a), ("torchscript", b))]
        self._chain_files = (a, b)
        self.job = "export"
        self._next_export()
        self.started.emit("export with both exporters")
        return a, b

    def _next_export(self) -> None:
        request = self._chain.pop(0)
        step = 2 - len(self._chain)
        self.progress.emit(0.45 * (step - 1), f"Export {step} of 2")
        self._send(request, f"Exporting with both exporters ({step} of 2)…", self._exported)

    def _exported(self, final: Result | ErrorEvent) -> None:
        from onnx_studio.engine.protocol import Error, ErrorEvent, ExportResult

        report = final.report if isinstance(final, ExportResult) else None
        if report is None or not report.ok:
            error = final.error if isinstance(final, ErrorEvent) else (
                report.error if report is not None else None)
            self._end()
            self.failed.emit("export", error or Error(kind="export",
                                                      message="The export failed."))
            return
        if self._chain:
            self._next_export()
            return
        assert self._chain_files is not None
        self.job = None
        self.compare(*self._chain_files, against_torch=True)

    def cancel(self) -> None:
        """Cancel this model's job (an export or validation from the form goes on)."""
        if self.busy and self.job_id is not None:
            self._chain = []
            self.jobs.runner.cancel([self.job_id])

    def _submit(self, job: str, request: Request, activity: str,
                done: Callable[[Result], AnalysisResult | None]) -> bool:
        if self.busy:
            return False
        self.job = job
        self._send(request, activity, functools.partial(self._finish, job, done))
        self.started.emit(job)
        return True

    def _send(self, request: Request, activity: str, end: End) -> None:
        """Send a job to the session's worker; note what it waits behind there."""
        self.job_id = self.jobs.send(request, end, activity=activity,
                                     progress=self.progress.emit)
        self.ahead = self.jobs.runner.ahead_of(self.job_id)

    def _end(self) -> None:
        self.job = self.job_id = None
        self._chain = []

    def _finish(self, job: str, done: Callable[[Result], AnalysisResult | None],
                final: Result | ErrorEvent) -> None:
        from onnx_studio.engine.protocol import Error, ErrorEvent

        self._end()
        if isinstance(final, ErrorEvent):
            self.failed.emit(job, final.error)
            return
        record = done(final)
        if record is None:
            self.failed.emit(job, Error(kind="worker_protocol", message=f"The worker answered "
                                        f"the {job} with a {type(final).__name__}."))
            return
        self.finished.emit(job, record)

    # ----------------------------------------------------------------- results

    def _compared(self, a: Path, b: Path, against: str,
                  stamps: tuple[FileStamp | None, FileStamp | None],
                  final: Result) -> Comparison | None:
        from onnx_studio.engine.protocol import CompareResult

        if not isinstance(final, CompareResult):
            return None
        self.comparison = Comparison(a, b, final.comparison, against, time.time(), stamps)
        return self.comparison

    def _profiled(self, onnx: Path, against: str, stamp: FileStamp | None,
                  final: Result) -> Profile | None:
        from onnx_studio.engine.protocol import ProfileResult

        if not isinstance(final, ProfileResult):
            return None
        self.profile = Profile(onnx, final.profile, against, time.time(), stamp)
        return self.profile

    def _made(self, onnx: Path, kind: str, keep: str | None, final: Result) -> Variant | None:
        from onnx_studio.engine.protocol import VariantResult

        if not isinstance(final, VariantResult):
            return None
        variant = Variant(onnx, kind, final.variant_report, time.time(), keep)
        self.variants = [*self.variants, variant]
        return variant
