"""The JSON documents: the CLI's export report and its parts, the inspect document, errors.

`ExportReport` is the `onnx-studio ... --json` contract (ARCHITECTURE.md, "Command line"): its
keys and their order are the contract's. Its parts travel inside worker messages too. Keys that
the contract's example leaves out but the code writes today (a validation's `message`,
`providers`, `plots`, ...) are OMIT (omit_if_none) or UNSET fields after the contract's keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.errors import KINDS, StudioError
from engine.protocol.convert import (
    ENCODE,
    LOCAL,
    OMIT,
    REQUIRED,
    UNSET,
    ProtocolError,
    Unset,
    Wire,
)

# ---------------------------------------------------------------------------- graph


@dataclass(kw_only=True)
class TensorInfo(Wire):
    """One graph input or output: its name, element type and shape (None: unknown rank)."""

    name: str
    dtype: str
    shape: list[int | str] | None  # a symbolic dimension is its name, an unknown one "?"


@dataclass(kw_only=True)
class Graph(Wire):
    """The `graph` object: node count, inputs (initializers excluded) and outputs."""

    nodes: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> Graph:
        """From engine.graph.summarize's dict (its `opset_imports` is not part of `graph`)."""
        return cls.from_dict({k: summary[k] for k in ("nodes", "inputs", "outputs")})


# ---------------------------------------------------------------------------- warnings, errors


@dataclass(kw_only=True)
class WarningItem(Wire):
    """A warning of the export or the validation; `source` is "file.py:LINE" or ""."""

    category: str
    message: str
    source: str = ""
    hint: str | None = field(default=None, metadata=OMIT)
    details: str | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Error(Wire):
    """The contract's `error` object: what failed (`kind`), one sentence, what to change.

    `details` (the full cause) is written when set: the CLI document carries it, as the
    contract says; on the worker's wire it travels beside the error as `details` today
    (`ErrorEvent`, `ExportResult`), so there it is None and left out.
    """

    kind: str
    message: str
    hint: str = ""
    details: str | None = field(default=None, metadata=OMIT)
    unsupported_ops: list[str] = field(default_factory=list)
    # a StudioError's own exit status, when it differs from its kind's (not on the wire)
    exit_code: int | None = field(default=None, compare=False, metadata=LOCAL)

    @classmethod
    def from_exception(cls, exc: StudioError | ProtocolError, *, with_details: bool = True
                       ) -> Error:
        """The error object of a StudioError (or a ProtocolError: kind "worker_protocol")."""
        if isinstance(exc, ProtocolError):
            return cls(kind=exc.kind, message=exc.message, hint=exc.hint,
                       details="" if with_details else None)
        return cls(kind=exc.kind, message=exc.message, hint=exc.hint,
                   details=exc.details if with_details else None,
                   unsupported_ops=list(exc.unsupported_ops), exit_code=exc.exit_code)

    def to_exception(self, details: str = "") -> StudioError:
        """A StudioError to raise; a kind this engine does not know keeps its name, status 1."""
        known_kind = self.kind in KINDS
        exc = StudioError(self.kind if known_kind else "export", self.message, self.hint,
                          self.unsupported_ops, self.details or details,
                          exit_code=self.exit_code)
        exc.kind = self.kind
        return exc

    def exit_status(self) -> int:
        """The CLI's exit status for this error: 2 a wrong request, 1 a failure."""
        return self.exit_code if self.exit_code is not None else KINDS.get(self.kind, 1)


# ---------------------------------------------------------------------------- validation


@dataclass(kw_only=True)
class TrialOutput(Wire):
    """One output in one trial: ONNX Runtime against PyTorch (engine.validation.metrics.compare).

    Non-finite numbers are None (null), never NaN: the validation keeps its JSON strict.
    """

    name: str
    shape: list[int]
    dtype: str
    onnx_shape: list[int]
    onnx_dtype: str
    passed: bool
    message: str
    max_abs_diff: float | None
    max_rel_diff: float | None
    mean_abs_diff: float | None
    cosine_similarity: float | None
    mismatched: int | None
    mismatched_fraction: float | None
    nan_mismatch: int | None
    inf_mismatch: int | None
    matched_nans: int | None
    elements: int
    exact: bool | None = field(default=None, metadata=OMIT)  # absent when the shapes differ
    # the (|ref|, |diff|) pairs that decide the verdict at any tolerance (metrics.tolerance_hull)
    tolerance_hull: list[list[float]] | None = field(default=None, metadata=OMIT)
    # `mismatched` estimated from the plot sample (a validation judged again at another
    # tolerance in the window, app.session.rejudge); the worker never sets it
    mismatched_estimated: bool | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class OutputMetrics(Wire):
    """One output's worst numbers over all trials: an entry of `validation.outputs`.

    The metrics after `passed` are UNSET in an entry that no trial produced (every run
    failed), and None when no trial could compute them (the shapes differed).
    """

    name: str
    max_abs_diff: float | None
    max_rel_diff: float | None
    passed: bool
    mean_abs_diff: float | Unset | None = UNSET
    mismatched: int | Unset | None = UNSET
    mismatched_fraction: float | Unset | None = UNSET
    nan_mismatch: int | Unset | None = UNSET
    inf_mismatch: int | Unset | None = UNSET
    matched_nans: int | Unset | None = UNSET
    cosine_similarity: float | Unset | None = UNSET
    message: str | None = field(default=None, metadata=OMIT)
    dtype: str | None = field(default=None, metadata=OMIT)  # the ONNX output's dtype
    trials: int | None = field(default=None, metadata=OMIT)  # how many trials produced this output
    # as TrialOutput's: a count estimated from a sample when judged again (never from the worker)
    mismatched_estimated: bool | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Trial(Wire):
    """One run of both models: on the export inputs, a random draw, or other dynamic sizes."""

    kind: str  # export-inputs | random | dynamic-size
    seed: int | None = field(default=None, metadata=OMIT)
    # every named dynamic dimension's size
    sizes: dict[str, int] | None = field(default=None, metadata=OMIT)
    ok: bool
    outputs: list[TrialOutput] | None = field(default=None, metadata=OMIT)
    message: str | None = field(default=None, metadata=OMIT)
    # the dimension a dynamic-size trial moves off its export size
    changed: str | None = field(default=None, metadata=OMIT)
    details: str | None = field(default=None, metadata=OMIT)
    seconds: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class NodeMetrics(Wire):
    """One ONNX node's values against the FX node it came from (engine.validation.nodes)."""

    max_abs_diff: float | None
    max_rel_diff: float | None
    passed: bool
    mismatched: int | None = field(default=None, metadata=OMIT)
    # why it could not be compared (the shapes differ)
    message: str | None = field(default=None, metadata=OMIT)
    value: str  # the ONNX value compared
    # the largest |diff| / (atol + rtol * |expected|): 1.0 is at the tolerance; absent when not
    # compared or when a NaN/inf stands where the other side has none (then `passed` is false)
    tolerance_ratio: float | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Intermediates(Wire):
    """Per-node comparison: nodes in graph order and the first one outside the tolerance."""

    nodes: dict[str, NodeMetrics]
    first_divergent: str | None
    compared: int
    message: str | None = field(default=None, metadata=OMIT)  # why nothing was compared
    # ONNX Runtime runs it took: 1, or more when the values were streamed in chunks that fit
    # engine.validation.nodes.BUDGET
    onnxruntime_runs: int | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class NotTried(Wire):
    """A size of a bounded dynamic dimension validation left out: outside its [dims] bounds."""

    dim: str
    size: int
    bounds: list[int | None]  # [min, max]; None: unbounded on that side
    reason: str


@dataclass(kw_only=True)
class Validation(Wire):
    """The contract's `validation` object, with what engine.validation adds after its keys."""

    ok: bool
    # one sentence: how many trials failed, and the first one's reason
    message: str | None = field(default=None, metadata=OMIT)
    rtol: float
    atol: float
    outputs: list[OutputMetrics] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)
    # sizes of bounded dimensions outside their bounds: not run (engine.validation.validator)
    not_tried: list[NotTried] | None = field(default=None, metadata=OMIT)
    warnings: list[WarningItem] | None = field(default=None, metadata=OMIT)
    providers: list[str] | None = field(default=None, metadata=OMIT)
    optimization: str | None = field(default=None, metadata=OMIT)
    intermediates: Intermediates | None = field(default=None, metadata=OMIT)
    plots: str | Unset | None = UNSET  # the .npz of the plot data; None: it was not saved
    seconds: float | None = field(default=None, metadata=OMIT)
    # Hugging Face generation tasks: greedy tokens over the ONNX files against generate()
    generation: Generation | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Generation(Wire):
    """The greedy-generation check of a Hugging Face export (engine.validation.hf_checks)."""

    steps: int
    tokens_equal: bool
    onnx_tokens: list[int]
    torch_tokens: list[int]
    # teacher-forced: both sides fed generate's tokens (`fed_tokens`); each side's token is the
    # argmax of its own logits at that step, and the logits are compared too
    fed_tokens: list[int] | None = field(default=None, metadata=OMIT)
    teacher_forced: bool | None = field(default=None, metadata=OMIT)
    max_abs_diff: float | None = field(default=None, metadata=OMIT)
    max_rel_diff: float | None = field(default=None, metadata=OMIT)
    passed: bool | None = field(default=None, metadata=OMIT)  # tokens equal, logits within
    message: str | None = field(default=None, metadata=OMIT)  # why not, one sentence


# ---------------------------------------------------------------------------- documents


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


def _round_seconds(seconds: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in seconds.items()}


@dataclass(kw_only=True)
class ExportReport(Wire):
    """The result of an export (and its validation): the CLI's JSON document, key for key.

    The export and the validation fill it in (engine.export.exporter, engine.pipeline); the CLI
    prints it and the worker sends it inside `ExportResult`. `seconds` are written rounded to
    the millisecond, and `extra` stays out of the document (it travels in `ExportResult`).
    """

    ok: bool = field(default=False, metadata=REQUIRED)
    output: str | None = None
    exporter: str | None = None  # the exporter that ran (a recipe's "auto" resolved)
    # why that one (engine.export.exporter.choose_exporter); left out when not known
    exporter_reason: str | None = field(default=None, metadata=OMIT)
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
    """One thing wrong with an .onnx file (engine.graph.file_check.Problem): "error" (the file
    is unusable) or "warning", its code (cycle, dangling_input, missing_external_data,
    external_data_outside, unknown_operator, checker), a sentence, and the nodes and tensor
    it names."""

    severity: str
    code: str
    message: str
    nodes: list[str] = field(default_factory=list)
    tensor: str = ""


@dataclass(kw_only=True)
class InspectDocument(Wire):
    """What `onnx-studio inspect --json` prints: the graph's fields at the top level and under
    `graph` (as in the export document), with the file's opset imports; `problems` lists
    what engine.graph.file_check found (an error among them makes `ok` false)."""

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
        """From engine.graph.summary.summarize's dict."""
        graph = {k: summary[k] for k in ("nodes", "inputs", "outputs")}
        return cls.from_dict({"ok": True, **graph, "opset_imports": summary["opset_imports"],
                              "graph": graph, "error": None})


# ---------------------------------------------------------------------------- model sources


@dataclass(kw_only=True)
class ForwardParam(Wire):
    """A forward() parameter as written (engine.source.describe.ForwardParam)."""

    name: str
    kind: str  # positional | keyword | var_positional | var_keyword
    default: str | None = None  # the default's source text; None: no default
    annotation: str = ""
    # what the file says of a tensor's example (a guess from a .py's first layer; a .pt2's own)
    shape: list[int] | None = None
    dtype: str = ""
    dynamic: dict[str, str] = field(default_factory=dict)  # axis (as text) -> dimension name


@dataclass(kw_only=True)
class Candidate(Wire):
    """A class or factory in a model file that could be the model (engine.source.describe)."""

    name: str
    kind: str  # "class" | "factory"
    params: list[str]  # forward params for a class, the factory's own params for a factory
    doc: str = ""
    # forward() of the class (or of the class a factory returns): kinds, defaults, annotations
    signature: list[ForwardParam] = field(default_factory=list)


@dataclass(kw_only=True)
class SourceDescription(Wire):
    """What a model source offers, read without running it (engine.source.describe's fields)."""

    kind: str
    candidates: list[Candidate] = field(default_factory=list)
    forward_params: list[str] = field(default_factory=list)
    error: str | None = None
    # the chosen class's forward() parameters with kinds, defaults and annotations
    forward_signature: list[ForwardParam] = field(default_factory=list)


# ---------------------------------------------------------------------------- analysis
# `onnx-studio compare`, `profile` and `variant` (engine.analysis): the keys the issue names
# come first, in its order; what the analysis adds follows them.


@dataclass(kw_only=True)
class Latency(Wire):
    """Run time in milliseconds over warmed-up runs: median and 90th percentile."""

    p50: float
    p90: float


@dataclass(kw_only=True)
class ChangedInitializer(Wire):
    """An initializer in both files whose values differ (None: its shape or dtype differs)."""

    name: str
    max_abs_diff: float | None
    reason: str | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class InitializerDiff(Wire):
    """Initializers by name: only in B (added), only in A (removed), in both but different."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[ChangedInitializer] = field(default_factory=list)


@dataclass(kw_only=True)
class OutputParity(Wire):
    """One output of a comparison run (outputs are paired by position)."""

    name: str
    max_abs_diff: float | None
    passed: bool
    message: str = ""


@dataclass(kw_only=True)
class SideParity(Wire):
    """One file against eager PyTorch."""

    ok: bool
    max_abs_diff: float | None


@dataclass(kw_only=True)
class TorchParity(Wire):
    """Both files against eager PyTorch on the recipe's inputs."""

    ok: bool
    a: SideParity
    b: SideParity


@dataclass(kw_only=True)
class Parity(Wire):
    """B against A on the same inputs (A the reference), and both against PyTorch."""

    ok: bool
    max_abs_diff: float | None
    torch: TorchParity | None = field(default=None, metadata=OMIT)
    rtol: float | None = field(default=None, metadata=OMIT)
    atol: float | None = field(default=None, metadata=OMIT)
    outputs: list[OutputParity] = field(default_factory=list)


@dataclass(kw_only=True)
class NodeMatching(Wire):
    """Which node of A is which of B (engine.analysis.matching): counts, the unmatched nodes'
    names, and the pairs as [A node index, B node index]."""

    matched: int
    by_name: int
    by_structure: int
    unmatched_a: list[str] = field(default_factory=list)
    unmatched_b: list[str] = field(default_factory=list)
    pairs: list[list[int]] = field(default_factory=list)


@dataclass(kw_only=True)
class CompareDocument(Wire):
    """What `onnx-studio compare --json` prints; per-file values under "a" and "b"."""

    ok: bool = field(default=False, metadata=REQUIRED)
    ops: dict[str, dict[str, int]] = field(default_factory=dict)
    nodes: dict[str, int] = field(default_factory=dict)
    size_bytes: dict[str, int] = field(default_factory=dict)
    initializers: InitializerDiff = field(default_factory=InitializerDiff)
    parity: Parity | None = None
    latency_ms: dict[str, Latency] = field(default_factory=dict)
    load_ms: dict[str, float] = field(default_factory=dict)
    opset_imports: dict[str, dict[str, int]] = field(default_factory=dict)
    inputs: dict[str, list[TensorInfo]] = field(default_factory=dict)
    outputs: dict[str, list[TensorInfo]] = field(default_factory=dict)
    matching: NodeMatching | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[WarningItem] = field(default_factory=list)
    error: Error | None = None

    def fail(self, error: Error | StudioError) -> CompareDocument:
        """Mark the document failed with `error`; returns it."""
        self.ok = False
        self.error = error if isinstance(error, Error) else Error.from_exception(error)
        return self


@dataclass(kw_only=True)
class NodeTime(Wire):
    """One profiled node: mean milliseconds per run, its kernel and its module group."""

    name: str
    op_type: str
    group: str
    ms: float
    node: str | None = None  # the file's node it comes from (None: onnxruntime's own)


@dataclass(kw_only=True)
class OpTime(Wire):
    """One kernel type: total mean milliseconds per run and how many nodes ran it."""

    op_type: str
    ms: float
    count: int


@dataclass(kw_only=True)
class GroupTime(Wire):
    """One module group (its qualified name): total mean milliseconds per run."""

    name: str
    ms: float


@dataclass(kw_only=True)
class ProfileDocument(Wire):
    """What `onnx-studio profile --json` prints; nodes, ops and groups slowest first."""

    ok: bool = field(default=False, metadata=REQUIRED)
    latency_ms: Latency | None = None
    torch_latency_ms: Latency | None = field(default=None, metadata=OMIT)
    nodes: list[NodeTime] = field(default_factory=list)
    ops: list[OpTime] = field(default_factory=list)
    groups: list[GroupTime] = field(default_factory=list)
    runs: int | None = field(default=None, metadata=OMIT)
    warmup: int | None = field(default=None, metadata=OMIT)
    provider: str | None = field(default=None, metadata=OMIT)
    threads: int | None = field(default=None, metadata=OMIT)
    optimization: str | None = field(default=None, metadata=OMIT)
    load_ms: float | None = field(default=None, metadata=OMIT)
    node_total_ms: float | None = field(default=None, metadata=OMIT)  # sum of `nodes`
    coverage: float | None = field(default=None, metadata=OMIT)  # node_total_ms / p50
    profiled_run_ms: float | None = field(default=None, metadata=OMIT)  # mean, profiler on
    overhead: float | None = field(default=None, metadata=OMIT)  # profiled_run_ms / p50
    notes: list[str] = field(default_factory=list)
    warnings: list[WarningItem] = field(default_factory=list)
    error: Error | None = None

    def fail(self, error: Error | StudioError) -> ProfileDocument:
        """Mark the document failed with `error`; returns it."""
        self.ok = False
        self.error = error if isinstance(error, Error) else Error.from_exception(error)
        return self


@dataclass(kw_only=True)
class VariantFacts(Wire):
    """A variant against its source: sizes, latencies on the same inputs, the worst error
    against PyTorch, and the tolerance it was held to."""

    kind: str  # optimized | fp16 | int8
    source: str
    settings: dict[str, str] = field(default_factory=dict)
    rtol: float
    atol: float
    size_bytes: int
    source_size_bytes: int
    size_ratio: float
    latency_ms: Latency | None = field(default=None, metadata=OMIT)
    source_latency_ms: Latency | None = field(default=None, metadata=OMIT)
    latency_ratio: float | None = field(default=None, metadata=OMIT)
    max_abs_diff: float | None = None
    note: str | None = field(default=None, metadata=OMIT)  # why a latency is missing
    # fp16: the nodes kept in float32 (--keep-fp32), in graph order
    kept_fp32: list[str] | None = field(default=None, metadata=OMIT)
    # fp16: values beyond float16's range the variant computes in float16 (fail the verdict)
    fp16_overflows: list[Fp16Overflow] | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Fp16Overflow(Wire):
    """A value an fp16 variant holds in float16 whose float32 values exceed 65504 on the
    validation inputs (engine.analysis.ranges): the node computing it and its largest |x|."""

    node: str
    op_type: str
    value: str
    max_abs: float


@dataclass(kw_only=True)
class VariantReport(ExportReport):
    """What `onnx-studio variant --json` prints: the export document (with its `validation`)
    and the `variant` facts after its keys."""

    variant: VariantFacts | None = field(default=None, metadata=OMIT)


# ---------------------------------------------------------------------------- explain


@dataclass(kw_only=True)
class InputDiff(Wire):
    """One input of the first divergent node: PyTorch's value against ONNX Runtime's (a graph
    input: 0; an initializer: the file's against the model's parameter of that name; None:
    not compared)."""

    name: str
    max_abs_diff: float | None
    kind: str = "value"  # value | graph_input | initializer | constant


@dataclass(kw_only=True)
class Divergence(Wire):
    """The first node whose outputs exceed the tolerance while its inputs are within it."""

    node: str
    op_type: str
    module: str  # the nn.Module path ("layers.3"); "" for the model itself
    source: str  # "file.py:LINE" in the model's code; "" when the file does not say
    max_abs_diff: float | None
    tolerance_ratio: float | None
    inputs: list[InputDiff] = field(default_factory=list)
    module_type: str | None = field(default=None, metadata=OMIT)  # the module's class
    source_path: str | None = field(default=None, metadata=OMIT)  # the full path of `source`
    outputs: list[str] = field(default_factory=list)  # the values compared


@dataclass(kw_only=True)
class Repro(Wire):
    """The folder reproducing the divergence: its files and the command that runs it."""

    folder: str
    files: list[str]
    command: str


@dataclass(kw_only=True)
class ExplainedFile(Wire):
    """One file's answer (a Hugging Face folder has several)."""

    file: str
    diverges: bool
    first_divergence: Divergence | None = None
    downstream: int = 0
    repro: Repro | None = None
    compared: int = 0
    message: str | None = field(default=None, metadata=OMIT)  # why nothing was compared


@dataclass(kw_only=True)
class ExplainDocument(Wire):
    """What `onnx-studio explain --json` prints: the first divergent node of the file (of the
    first file that diverges, for a Hugging Face folder, with every file under `files`), the
    number of nodes beyond tolerance downstream of it, and the repro folder written."""

    ok: bool = field(default=False, metadata=REQUIRED)
    diverges: bool = False
    first_divergence: Divergence | None = None
    downstream: int = 0
    repro: Repro | None = None
    model: str | None = None
    rtol: float | None = None
    atol: float | None = None
    compared: int = 0
    files: list[ExplainedFile] | None = field(default=None, metadata=OMIT)
    message: str | None = field(default=None, metadata=OMIT)
    warnings: list[WarningItem] = field(default_factory=list)
    error: Error | None = None

    def fail(self, error: Error | StudioError) -> ExplainDocument:
        """Mark the document failed with `error`; returns it."""
        self.ok = False
        self.error = error if isinstance(error, Error) else Error.from_exception(error)
        return self
