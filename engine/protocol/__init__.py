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

- `encode(message) -> str`: one JSON line (NaN allowed, as before; metrics are null instead).
- `decode(line, expected=None) -> message`: by `job` (requests) or `type` (events; results
  by the job asked for or their distinguishing key); `expected` may also be a document class,
  or `Request` (the worker reads its stdin so: a line without `job` is an error).
- `X.to_dict()` / `X.from_dict(d)` for nested documents. Unknown keys are ignored; a missing
  or mistyped field raises `ProtocolError` (kind "worker_protocol") naming class and field.
- Omission: None is written as null, except `omit_if_none` fields (left out) and UNSET
  (left out; `known()` reads such a field as None). See `engine.protocol.convert`.
- Conversions: `Error.from_exception(StudioError)`, `Error.to_exception()`,
  `ErrorEvent.from_exception(id, exc, traceback)`, `WarningItem.from_dict(events' dict)`,
  `ExportReport.fail(error)`, `ExportResult.from_report(...)`, `InspectDocument.from_summary`.
"""

from engine.protocol.convert import UNSET, ProtocolError, Unset, Wire, known
from engine.protocol.documents import (
    Candidate,
    ChangedInitializer,
    CompareDocument,
    Error,
    ExportFacts,
    ExportReport,
    Graph,
    GroupTime,
    InitializerDiff,
    InspectDocument,
    Intermediates,
    Latency,
    NodeMatching,
    NodeMetrics,
    NodeTime,
    OpTime,
    OutputMetrics,
    OutputParity,
    Parity,
    ProfileDocument,
    SideParity,
    SourceDescription,
    TensorInfo,
    TorchParity,
    Trial,
    TrialOutput,
    Validation,
    VariantFacts,
    VariantReport,
    WarningItem,
)
from engine.protocol.messages import (
    EVENTS,
    PROTOCOL_VERSION,
    REQUESTS,
    RESULTS,
    AbortRequest,
    DescribeRequest,
    DescribeResult,
    DevicesRequest,
    DevicesResult,
    ErrorEvent,
    Event,
    ExportRequest,
    ExportResult,
    LogLine,
    Message,
    PingRequest,
    Pong,
    Progress,
    QuitRequest,
    Ready,
    Request,
    Result,
    ValidateRequest,
    ValidateResult,
    WarningEvent,
    decode,
    encode,
)

__all__ = [
    "EVENTS",
    "PROTOCOL_VERSION",
    "REQUESTS",
    "RESULTS",
    "UNSET",
    "AbortRequest",
    "Candidate",
    "ChangedInitializer",
    "CompareDocument",
    "DescribeRequest",
    "DescribeResult",
    "DevicesRequest",
    "DevicesResult",
    "Error",
    "ErrorEvent",
    "Event",
    "ExportFacts",
    "ExportReport",
    "ExportRequest",
    "ExportResult",
    "Graph",
    "GroupTime",
    "InitializerDiff",
    "InspectDocument",
    "Intermediates",
    "Latency",
    "LogLine",
    "Message",
    "NodeMatching",
    "NodeMetrics",
    "NodeTime",
    "OpTime",
    "OutputMetrics",
    "OutputParity",
    "Parity",
    "PingRequest",
    "Pong",
    "ProfileDocument",
    "Progress",
    "ProtocolError",
    "QuitRequest",
    "Ready",
    "Request",
    "Result",
    "SideParity",
    "SourceDescription",
    "TensorInfo",
    "TorchParity",
    "Trial",
    "TrialOutput",
    "Unset",
    "ValidateRequest",
    "ValidateResult",
    "Validation",
    "VariantFacts",
    "VariantReport",
    "WarningEvent",
    "WarningItem",
    "Wire",
    "decode",
    "encode",
    "known",
]
