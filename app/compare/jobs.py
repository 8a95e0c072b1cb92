"""AnalysisJobs: the compare, profile and variant jobs of one tab, on the session's worker.

One job at a time; its progress, and its end as a typed result (engine.protocol) or an Error.
Cancel cancels this tab's job only (the session's JobRunner: see JobRunner.cancel)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.jobs import JobCallback
from app.session import ExportSession
from engine.protocol import Error, ErrorEvent, ProtocolError, Result, decode
from engine.recipe import Recipe


class AnalysisJobs(QObject):
    """Runs one analysis job at a time and says how it goes."""

    started = Signal(str)  # the job: compare | profile | variant
    progress = Signal(float, str)
    finished = Signal(str, object)  # (job, CompareResult | ProfileResult | VariantResult)
    failed = Signal(str, object)  # (job, Error)

    def __init__(self, session: ExportSession, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.session = session
        self.job: str | None = None
        self.job_id: int | None = None
        self.ahead: tuple[str, ...] = ()  # what the current job waits behind (JobRunner.ahead_of)
        # the exports still to run before a both-exporters compare, and what it compares
        self._chain: list[tuple[str, Path]] = []
        self._chain_files: list[Path] = []
        self._chain_recipe = ""
        self._chain_base = Path()

    @property
    def busy(self) -> bool:
        return self.job is not None

    def compare(self, a: Path, b: Path, recipe_toml: str | None, base_dir: Path) -> bool:
        request: dict[str, Any] = {"job": "compare", "a": str(a), "b": str(b),
                                   "base_dir": str(base_dir)}
        if recipe_toml is not None:
            request["recipe"] = recipe_toml
        return self._submit(request)

    def profile(self, onnx: Path, recipe_toml: str | None, base_dir: Path) -> bool:
        request: dict[str, Any] = {"job": "profile", "onnx": str(onnx),
                                   "base_dir": str(base_dir)}
        if recipe_toml is not None:
            request["recipe"] = recipe_toml
        return self._submit(request)

    def variant(self, onnx: Path, recipe_toml: str, base_dir: Path, kind: str, output: Path
                ) -> bool:
        return self._submit({"job": "variant", "onnx": str(onnx), "recipe": recipe_toml,
                             "base_dir": str(base_dir), "kind": kind, "output": str(output)})

    def both_exporters(self, recipe: Recipe) -> bool:
        """Export `recipe` with dynamo, then with TorchScript (beside its output, as
        NAME.dynamo.onnx and NAME.torchscript.onnx), then compare the two files against its
        PyTorch model: one job to the user, three in the worker."""
        if self.busy:
            return False
        out = recipe.output_path
        files = [out.with_name(f"{out.stem}.{e}.onnx") for e in ("dynamo", "torchscript")]
        recipes = [dataclasses.replace(recipe, export=dataclasses.replace(
            recipe.export, exporter=e, output=str(f)))
            for e, f in zip(("dynamo", "torchscript"), files, strict=True)]
        self._chain = [*((r.to_toml(), recipe.base_dir) for r in recipes)]
        self._chain_files = files
        self._chain_recipe = recipe.to_toml()
        self._chain_base = recipe.base_dir
        self.job = "export"
        self._next_export()
        self.started.emit("export with both exporters")
        return True

    def _next_export(self) -> None:
        toml, base = self._chain.pop(0)
        step = 2 - len(self._chain)
        self.progress.emit(0.45 * (step - 1), f"Export {step} of 2")
        self._send({"job": "export", "recipe": toml, "base_dir": str(base)}, self._on_export)

    def _on_export(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind not in ("result", "error"):
            return
        report = message.get("report") or {}
        if kind == "error" or not report.get("ok"):
            error = (message.get("error") if kind == "error" else report.get("error")) or {}
            self.job = self.job_id = None
            self._chain = []
            self.failed.emit("export", Error.from_dict(
                {"kind": "export", "message": "The export failed.", **error}))
            return
        if self._chain:
            self._next_export()
            return
        self.job = None
        a, b = self._chain_files
        self.compare(a, b, self._chain_recipe, self._chain_base)

    def cancel(self) -> None:
        """Cancel this tab's job (an export or validation from the form goes on)."""
        if self.busy and self.job_id is not None:
            self._chain = []
            self.session.runner.cancel([self.job_id])

    def _submit(self, request: dict[str, Any]) -> bool:
        if self.busy:
            return False
        self.job = str(request["job"])
        self._send(request, self._on_event)
        self.started.emit(self.job)
        return True

    def _send(self, request: dict[str, Any], callback: JobCallback) -> None:
        """Send a job to the session's worker; note what it waits behind there."""
        runner = self.session.runner
        self.job_id = runner.submit(request, callback)
        self.ahead = runner.ahead_of(self.job_id)

    def _on_event(self, message: dict[str, Any]) -> None:
        job = self.job or ""
        kind = message.get("type")
        if kind == "progress":
            self.progress.emit(float(message.get("fraction", 0.0)), str(message.get("stage")))
            return
        if kind not in ("result", "error"):
            return
        self.job = self.job_id = None
        try:
            final = decode(json.dumps(message), expected=job)
        except ProtocolError as exc:
            self.failed.emit(job, Error.from_exception(exc))
            return
        if isinstance(final, ErrorEvent):
            self.failed.emit(job, final.error)
        elif isinstance(final, Result):
            self.finished.emit(job, final)
