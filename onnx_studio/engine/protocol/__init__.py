"""Typed messages: every request, event and result that crosses the worker boundary, and the
JSON documents the CLI prints, as dataclasses with one encoder and one decoder.

Like lsprotocol's types and converter: the window, the CLI and the worker share these classes,
so a renamed field breaks the type checker instead of a user's session. Field names are the
JSON keys and field order is key order, so the wire is what the worker and the CLI have always
written (`ExportReport` is the contract of ARCHITECTURE.md's "Command line" key for key).

Why dataclasses with a small converter (`convert.py`) and not msgspec, pydantic or attrs: no
new dependency for the window, the worker or the frozen build; the classes are plain to read
and to construct in tests; the rules this protocol needs (keys left out while None, keys that
are absent in one case and null in another, a warning's keys flattened into its event) are a
few lines each. Decoding speed is no concern: a job sends tens of lines.

Where they live: messages.py the worker's requests, events and results; documents.py the
export and inspect documents, validation.py their `validation`, parts.py the graph, warning
and error every document shares; analysis.py compare, profile, variant and explain;
sources.py a model source's description; batch.py the batch records. Import them from here.

- `encode(message) -> str`: one JSON line (NaN allowed, as before; metrics are null instead).
- `decode_reply(data, jobs) -> event`: a worker's line (its JSON object) read by a client that
  knows which job each id was sent as (the window's WorkerProcess).
- `decode(line, expected=None) -> message`: by `job` (requests) or `type` (events; results
  by the job asked for or their distinguishing key); `expected` may also be a document class,
  or `Request` (the worker reads its stdin so: a line without `job` is an error).
- `X.to_dict()` / `X.from_dict(d)` for nested documents. Unknown keys are ignored; a missing
  or mistyped field raises `ProtocolError` (kind "worker_protocol") naming class and field.
- Omission: None is written as null, except `omit_if_none` fields (left out) and UNSET
  (left out; `known()` reads such a field as None). See `onnx_studio.engine.protocol.convert`.
- Conversions: `Error.from_exception(StudioError)`, `Error.to_exception()`,
  `ErrorEvent.from_exception(id, exc, traceback)`, `WarningItem.from_dict(events' dict)`,
  `ExportReport.fail(error)`, `ExportResult.from_report(...)`, `InspectDocument.from_summary`.
"""

from onnx_studio.engine.protocol.analysis import (
    ChangedInitializer,
    CompareDocument,
    Divergence,
    ExplainDocument,
    ExplainedFile,
    Fp16Overflow,
    GroupTime,
    InitializerDiff,
    InputDiff,
    Latency,
    NodeMatching,
    NodeTime,
    OpTime,
    OutputParity,
    Parity,
    ProfileDocument,
    Repro,
    SideParity,
    TorchParity,
    VariantFacts,
    VariantReport,
)
from onnx_studio.engine.protocol.batch import (
    BatchRecord,
    BatchResult,
    BatchSummary,
    ItemError,
    OutputStamp,
)
from onnx_studio.engine.protocol.convert import UNSET, ProtocolError, Unset, Wire, known
from onnx_studio.engine.protocol.documents import (
    ExportedFile,
    ExporterFallback,
    ExportFacts,
    ExportReport,
    InspectDocument,
)
from onnx_studio.engine.protocol.messages import (
    EVENTS,
    PROTOCOL_VERSION,
    REQUESTS,
    RESULTS,
    AbortRequest,
    Committing,
    CompareRequest,
    CompareResult,
    DescribeRequest,
    DescribeResult,
    DevicesRequest,
    DevicesResult,
    ErrorEvent,
    Event,
    ExplainRequest,
    ExplainResult,
    ExportRequest,
    ExportResult,
    FillChoice,
    LogLine,
    Message,
    PingRequest,
    Pong,
    ProfileRequest,
    ProfileResult,
    Progress,
    QuitRequest,
    Ready,
    Request,
    Result,
    ValidateFileRequest,
    ValidateFileResult,
    ValidateRequest,
    ValidateResult,
    VariantRequest,
    VariantResult,
    WarningEvent,
    decode,
    decode_reply,
    encode,
)
from onnx_studio.engine.protocol.parts import Error, Graph, TensorInfo, WarningItem
from onnx_studio.engine.protocol.sources import Candidate, ForwardParam, SourceDescription
from onnx_studio.engine.protocol.validation import (
    Continuation,
    Generation,
    GenerationStep,
    Intermediates,
    NodeMetrics,
    OutputMetrics,
    Trial,
    TrialOutput,
    Validation,
)

__all__ = [
    "EVENTS",
    "PROTOCOL_VERSION",
    "REQUESTS",
    "RESULTS",
    "UNSET",
    "AbortRequest",
    "BatchRecord",
    "BatchResult",
    "BatchSummary",
    "Candidate",
    "ChangedInitializer",
    "Committing",
    "CompareDocument",
    "CompareRequest",
    "CompareResult",
    "Continuation",
    "DescribeRequest",
    "DescribeResult",
    "DevicesRequest",
    "DevicesResult",
    "Divergence",
    "Error",
    "ErrorEvent",
    "Event",
    "ExplainDocument",
    "ExplainRequest",
    "ExplainResult",
    "ExplainedFile",
    "ExportFacts",
    "ExportReport",
    "ExportRequest",
    "ExportResult",
    "ExportedFile",
    "ExporterFallback",
    "FillChoice",
    "ForwardParam",
    "Fp16Overflow",
    "Generation",
    "GenerationStep",
    "Graph",
    "GroupTime",
    "InitializerDiff",
    "InputDiff",
    "InspectDocument",
    "Intermediates",
    "ItemError",
    "Latency",
    "LogLine",
    "Message",
    "NodeMatching",
    "NodeMetrics",
    "NodeTime",
    "OpTime",
    "OutputMetrics",
    "OutputParity",
    "OutputStamp",
    "Parity",
    "PingRequest",
    "Pong",
    "ProfileDocument",
    "ProfileRequest",
    "ProfileResult",
    "Progress",
    "ProtocolError",
    "QuitRequest",
    "Ready",
    "Repro",
    "Request",
    "Result",
    "SideParity",
    "SourceDescription",
    "TensorInfo",
    "TorchParity",
    "Trial",
    "TrialOutput",
    "Unset",
    "ValidateFileRequest",
    "ValidateFileResult",
    "ValidateRequest",
    "ValidateResult",
    "Validation",
    "VariantFacts",
    "VariantReport",
    "VariantRequest",
    "VariantResult",
    "WarningEvent",
    "WarningItem",
    "Wire",
    "decode",
    "decode_reply",
    "encode",
    "known",
]
