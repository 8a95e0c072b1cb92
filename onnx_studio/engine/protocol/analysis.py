"""The documents `onnx-studio compare`, `profile`, `variant` and `explain` print
(onnx_studio.engine.analysis): `CompareDocument`, `ProfileDocument`, `VariantReport`,
`ExplainDocument` and their parts. The keys the issue names come first, in its order; what the
analysis adds follows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol.convert import OMIT, REQUIRED, Wire
from onnx_studio.engine.protocol.documents import ExportReport
from onnx_studio.engine.protocol.parts import Error, TensorInfo, WarningItem


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
    """Which node of A is which of B (onnx_studio.engine.analysis.matching): counts, the unmatched
    nodes' names, and the pairs as [A node index, B node index]."""

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
    load_ms: dict[str, float] = field(default_factory=dict)  # each file's median load
    # "load" and "p50": each file's [lowest, highest] over the rounds it was measured in
    spread_ms: dict[str, dict[str, list[float]]] = field(default_factory=dict, metadata=OMIT)
    timing_note: str | None = field(default=None, metadata=OMIT)  # a difference, or noise
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
    ms: float  # mean per run with the profiler on
    node: str | None = None  # the file's node it comes from (None: onnxruntime's own)
    # every node of the file the kernel ran (a fused Conv+Relu: both), when more than `node`
    fused: list[str] | None = field(default=None, metadata=OMIT)
    share: float | None = field(default=None, metadata=OMIT)  # of the profiled run
    p50_ms: float | None = field(default=None, metadata=OMIT)  # that share of the plain p50


@dataclass(kw_only=True)
class OpTime(Wire):
    """One kernel type: total mean milliseconds per run and how many nodes ran it."""

    op_type: str
    ms: float
    count: int
    share: float | None = field(default=None, metadata=OMIT)  # of the profiled run
    p50_ms: float | None = field(default=None, metadata=OMIT)  # that share of the plain p50


@dataclass(kw_only=True)
class GroupTime(Wire):
    """One module group (its qualified name): total mean milliseconds per run."""

    name: str
    ms: float
    share: float | None = field(default=None, metadata=OMIT)  # of the profiled run
    p50_ms: float | None = field(default=None, metadata=OMIT)  # that share of the plain p50


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
    coverage: float | None = field(default=None, metadata=OMIT)  # node_total / profiled run
    profiled_run_ms: float | None = field(default=None, metadata=OMIT)  # mean, profiler on
    overhead: float | None = field(default=None, metadata=OMIT)  # profiled_run_ms / p50
    notes: list[str] = field(default_factory=list)
    warnings: list[WarningItem] = field(default_factory=list)
    error: Error | None = None

    def per_node_sentence(self) -> str:
        """How the per-node times relate to the run: the profiled run, the profiler's own cost
        (`overhead`) and how much of the run the kernels account for (`coverage`)."""
        lat = self.latency_ms
        if lat is None or self.profiled_run_ms is None:
            return ""
        overhead = (f" ({self.overhead:.1f}x the p50: the profiler's own cost)"
                    if self.overhead else "")
        covered = (f"; its kernels account for {self.coverage:.0%} of it, the rest is "
                   "onnxruntime's work between them" if self.coverage is not None else "")
        return (f"Per node: with the profiler on, a run took {self.profiled_run_ms:.3f} ms"
                f"{overhead}{covered}; each node's share of it is shown as ms of the p50 run "
                f"({lat.p50:.3f} ms).")

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
    # how it was made: fp16 {"keep_io_types": bool, "keep_fp32": "auto" | "NODE,..." | None},
    # optimized {"optimization": level}, int8 {"weight_type", "method"}
    settings: dict[str, str | bool | None] = field(default_factory=dict)
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
    """A value an fp16 variant holds in float16 whose float32 values exceed 65504 on the validation
    inputs (onnx_studio.engine.analysis.ranges): the node computing it and its largest |x|."""

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
