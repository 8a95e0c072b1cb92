"""The export document (`ExportReport`, the CLI's export report) with the facts and files
beside it, and the inspect document (`InspectDocument`) with the file's problems.

`ExportReport` is the `onnx-studio ... --json` contract (ARCHITECTURE.md, "Command line"): its keys
and their order are the contract's. Its parts (onnx_studio.engine.protocol.parts, .validation)
travel inside worker messages too. Keys that the contract's example leaves out but the code writes
today (a validation's `message`, `providers`, `plots`, ...) are OMIT (omit_if_none) or UNSET fields
after the contract's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol.convert import ENCODE, LOCAL, OMIT, REQUIRED, UNSET, Unset, Wire
from onnx_studio.engine.protocol.parts import Error, Graph, TensorInfo, WarningItem
from onnx_studio.engine.protocol.validation import Validation


@dataclass(kw_only=True)
class ExportedFile(Wire):
    """One file of a multi-file export (a Hugging Face folder): its name, its graph and the
    external data files beside it that it reads (names in the same folder)."""

    name: str
    path: str
    graph: Graph
    data_files: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ExportFacts(Wire):
    """Facts about a written file for the window's summary (the `extra` of an export result).

    All absent when the export failed; `external_data` is None when the weights are inside.
    """

    file_bytes: int | None = field(default=None, metadata=OMIT)
    external_data: str | Unset | None = UNSET  # the external data file's name
    opset_imports: dict[str, int] | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class ExporterFallback(Wire):
    """`exporter = "auto"` left dynamo for the TorchScript exporter (onnx_studio.engine.export
    .fallback): the exporter that failed, its error kind and its cause, one sentence."""

    tried: str
    kind: str
    message: str


def _round_seconds(seconds: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in seconds.items()}


@dataclass(kw_only=True)
class ExportReport(Wire):
    """The result of an export (and its validation): the CLI's JSON document, key for key.

    The export and the validation fill it in (onnx_studio.engine.export.exporter,
    onnx_studio.engine.pipeline); the CLI prints it and the worker sends it inside `ExportResult`.
    `seconds` are written rounded to the millisecond, and `extra` stays out of the document (it
    travels in `ExportResult`).
    """

    ok: bool = field(default=False, metadata=REQUIRED)
    output: str | None = None
    exporter: str | None = None  # the exporter that ran (a recipe's "auto" resolved)
    # why that one (onnx_studio.engine.export.exporter.choose_exporter); left out when not known
    exporter_reason: str | None = field(default=None, metadata=OMIT)
    # set when "auto" fell back: `exporter` is then the one that ran (torchscript)
    fallback: ExporterFallback | None = field(default=None, metadata=OMIT)
    # the sizes the export traced dynamic dimensions at when they differ from the example's
    # (an example size of 0 or 1 is specialised by torch: onnx_studio.engine.source.trace_sizes)
    traced_sizes: dict[str, int] | None = field(default=None, metadata=OMIT)
    opset: int | None = None
    seconds: dict[str, float] = field(default_factory=dict, metadata={ENCODE: _round_seconds})
    graph: Graph | None = None
    warnings: list[WarningItem] = field(default_factory=list)
    error: Error | None = None
    validation: Validation | None = None
    # a Hugging Face export: every file written into the `output` folder
    files: list[ExportedFile] | None = field(default=None, metadata=OMIT)
    task: str | None = field(default=None, metadata=OMIT)  # the Hugging Face task exported
    extra: ExportFacts = field(default_factory=ExportFacts, compare=False, metadata=LOCAL)

    def fail(self, error: Error | StudioError) -> ExportReport:
        """Mark the report failed with `error`; returns the report."""
        self.ok = False
        self.error = error if isinstance(error, Error) else Error.from_exception(error)
        return self


@dataclass(kw_only=True)
class FileProblem(Wire):
    """One thing wrong with an .onnx file (onnx_studio.engine.graph.file_check.Problem): "error"
    (the file is unusable) or "warning", its code (cycle, dangling_input, missing_external_data,
    external_data_outside, unknown_operator, checker), a sentence, and the nodes and tensor it
    names."""

    severity: str
    code: str
    message: str
    nodes: list[str] = field(default_factory=list)
    tensor: str = ""


@dataclass(kw_only=True)
class InspectDocument(Wire):
    """What `onnx-studio inspect --json` prints: the graph's fields at the top level and under
    `graph` (as in the export document), with the file's opset imports; `problems` lists
    what onnx_studio.engine.graph.file_check found (an error among them makes `ok` false)."""

    ok: bool = field(default=True, metadata=REQUIRED)
    nodes: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    opset_imports: dict[str, int]  # domain ("" is the default domain) -> version
    graph: Graph
    error: Error | None = None
    problems: list[FileProblem] = field(default_factory=list)

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> InspectDocument:
        """From onnx_studio.engine.graph.summary.summarize's dict."""
        graph = {k: summary[k] for k in ("nodes", "inputs", "outputs")}
        return cls.from_dict({"ok": True, **graph, "opset_imports": summary["opset_imports"],
                              "graph": graph, "error": None})
