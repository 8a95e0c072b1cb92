"""The worker's messages: requests, events and job results, and the one encoder and decoder.

One JSON object per line. A request names its `job`; everything the worker says has a `type`:
`ready` (once, no id), then per job `progress`, `log` and `warning` events and exactly one
`result` or `error`. Results of different jobs share the type "result" and are told apart by
the job the client asked for (`decode(line, expected="export")`) or, without it, by their
distinguishing key (`report`, `validation`, `description`, `devices`, `pong`).
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Self, TypeAlias, TypeVar, overload

from onnx_studio.engine.errors import KINDS, StudioError, plain
from onnx_studio.engine.protocol.analysis import (
    CompareDocument,
    ExplainDocument,
    ProfileDocument,
    VariantReport,
)
from onnx_studio.engine.protocol.convert import FLATTEN, LOCAL, OMIT, ProtocolError, Wire, from_dict
from onnx_studio.engine.protocol.documents import ExportFacts, ExportReport
from onnx_studio.engine.protocol.parts import Error, WarningItem
from onnx_studio.engine.protocol.sources import SourceDescription
from onnx_studio.engine.protocol.validation import Validation

PROTOCOL_VERSION: Final = 1
W = TypeVar("W", bound=Wire)


class Request(Wire):
    """A job sent to the worker; `id` is the client's, echoed on every event of the job."""

    TAG_KEY = "job"
    id: int | None  # every request has it (a field of each request class)


class Event(Wire):
    """Something the worker says: a `ready`, a job's progress, log, warning, result or error."""

    TAG_KEY = "type"


class Result(Event):
    """The successful end of a job: its `JOB` and the `KEY` no other job's result has."""

    TAG = "result"
    JOB: ClassVar[str]
    KEY: ClassVar[str]
    id: int | None  # every result has it (a field of each result class): its job's


Message: TypeAlias = Request | Event


# ---------------------------------------------------------------------------- requests


@dataclass(kw_only=True)
class ExportRequest(Request):
    """Export the recipe (TOML text; relative paths against `base_dir`); `validate` None: as
    the recipe says."""

    TAG = "export"
    id: int | None = field(default=None, metadata=OMIT)
    recipe: str
    base_dir: str | None = field(default=None, metadata=OMIT)
    validate: bool | None = field(default=None, metadata=OMIT)
    # true: the validation's plot data beside the .onnx file (the CLI's), not in the job folder
    plots_beside_onnx: bool | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class ValidateFileRequest(Request):
    """Validate the .onnx file `onnx` against the recipe's model and answer with the export
    document the CLI's `validate` prints (`ValidateFileResult`): the file's graph, the
    validation and its verdict. Plot data goes beside the file."""

    TAG = "validate_file"
    id: int | None = field(default=None, metadata=OMIT)
    recipe: str
    base_dir: str | None = field(default=None, metadata=OMIT)
    onnx: str


@dataclass(kw_only=True)
class ValidateRequest(Request):
    """Validate the .onnx file `onnx` (None: the recipe's output) against the recipe's model."""

    TAG = "validate"
    id: int | None = field(default=None, metadata=OMIT)
    recipe: str
    base_dir: str | None = field(default=None, metadata=OMIT)
    onnx: str | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class DescribeRequest(Request):
    """Describe a model source (its classes, factories and forward parameters)."""

    TAG = "describe"
    id: int | None = field(default=None, metadata=OMIT)
    source: str
    base_dir: str | None = field(default=None, metadata=OMIT)
    # a Hugging Face folder's own code (auto_map) may run to describe it (model.trust_remote_code)
    trust_remote_code: bool = field(default=False, metadata=OMIT)


@dataclass(kw_only=True)
class DevicesRequest(Request):
    """Ask for the devices, the exporters' opsets and the versions of the worker's torch."""

    TAG = "devices"
    id: int | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class PingRequest(Request):
    """Ask the worker whether it is alive (answered by `Pong`)."""

    TAG = "ping"
    id: int | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class QuitRequest(Request):
    """End the worker gently, after the job it is running."""

    TAG = "quit"
    id: int | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class AbortRequest(Request):
    """End the worker at once, with every process its job started (heard during a job too)."""

    TAG = "abort"
    id: int | None = field(default=None, metadata=OMIT)


# ---------------------------------------------------------------------------- events


@dataclass(kw_only=True)
class Ready(Event):
    """The worker has imported torch (in `import_s` seconds) and takes jobs; sent once.

    `torch_tested`: whether that torch is in the range this release is tested with
    (onnx_studio.engine.torch_private.TESTED_TORCH); None from a worker too old to say.
    """

    TAG = "ready"
    protocol: int
    pid: int
    torch: str
    import_s: float
    torch_tested: bool | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class Progress(Event):
    """A job's progress: `fraction` 0..1 of the whole job and the stage it is in."""

    TAG = "progress"
    id: int | None
    fraction: float
    stage: str


@dataclass(kw_only=True)
class LogLine(Event):
    """One line of the exporter's output or of the job's own log."""

    TAG = "log"
    id: int | None
    line: str


@dataclass(kw_only=True)
class WarningEvent(Event):
    """A warning as soon as it is found; its keys sit beside `id` and `type`."""

    TAG = "warning"
    id: int | None
    warning: WarningItem = field(metadata=FLATTEN)


@dataclass(kw_only=True)
class Committing(Event):
    """The job is about to rename its new file into place at `output`
    (onnx_studio.engine.files.COMMIT).

    Sent before the first rename; a worker ended after this line ends only once the renames are
    done. So a client that cancels knows: without this line the previous file stays; with it the
    export had already finished and the new file is in place. A folder's export (a set of files
    committed as one, onnx_studio.engine.file_set) names the folder in `output` and the files it
    puts there in `files`.
    """

    TAG = "committing"
    id: int | None
    output: str
    files: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class ErrorEvent(Event):
    """A job that could not run, or a request that could not be read (then without `id`).

    The full cause travels beside the error object as `details`, as the worker always sent it.
    """

    TAG = "error"
    id: int | None = field(default=None, metadata=OMIT)
    error: Error
    details: str = ""
    # the exit status the CLI gives this error, when it differs from its kind's
    exit_code: int | None = field(default=None, metadata=OMIT)
    # a job cancelled after its file was renamed into place: that file (set by the window's
    # job runner, never sent)
    written: str | None = field(default=None, metadata=LOCAL)

    @classmethod
    def from_exception(cls, job_id: int | None, exc: BaseException, details: str = ""
                       ) -> ErrorEvent:
        """The error event for what a job raised; `details` is the traceback of `exc`.

        A StudioError keeps its sentence and hint (its own details win over the traceback);
        anything else is a failure of the worker itself, kind "export".
        """
        if isinstance(exc, StudioError | ProtocolError):
            error = Error.from_exception(exc, with_details=False)
            own = exc.details if isinstance(exc, StudioError) else ""
            return cls(id=job_id, error=error, details=own or details,
                       exit_code=_own_exit_code(error))
        error = Error(kind="export", message=plain(f"The worker failed: {exc}"),
                      hint="Open Details for the traceback.")
        return cls(id=job_id, error=error, details=details)

    def to_exception(self) -> StudioError:
        """A StudioError carrying the details, for code that raises (the CLI's client)."""
        error = self.error
        if self.exit_code is not None:
            error = dataclasses.replace(error, exit_code=self.exit_code)
        return error.to_exception(self.details)


def _own_exit_code(error: Error | None) -> int | None:
    """An error's exit status when it is not its kind's usual one (which needs no saying)."""
    if error is None or error.exit_code is None or error.exit_code == KINDS.get(error.kind):
        return None
    return error.exit_code


# ---------------------------------------------------------------------------- results


@dataclass(kw_only=True)
class FillChoice(Wire):
    """The fill an input got (onnx_studio.engine.source.inputs.ResolvedFill): never "auto"; `reason`
    says why it was chosen ("" when the recipe named it)."""

    fill: str
    low: int | float | None = None
    high: int | float | None = None
    reason: str = ""


@dataclass(kw_only=True)
class ExportResult(Result):
    """The end of an export job: the report (ok or failed), its details and the file's facts.

    `details` repeats the report's error details (the traceback) for the window's Details.
    """

    JOB = "export"
    KEY = "report"
    id: int | None
    report: ExportReport
    details: str = ""
    extra: ExportFacts = field(default_factory=ExportFacts)
    job_dir: str  # the job's folder: plot data and other large arrays
    # the fill each input got, in order, once the model was loaded (absent when it was not)
    fills: list[FillChoice] | None = field(default=None, metadata=OMIT)
    # the report's error's exit status, when it is not its kind's usual one
    exit_code: int | None = field(default=None, metadata=OMIT)

    @classmethod
    def from_report(cls, job_id: int | None, report: ExportReport, job_dir: str,
                    fills: list[FillChoice] | None = None) -> Self:
        """The result message of an export job that produced `report`.

        The error's details move beside the report (as the worker has always sent them), so
        the traceback travels once; `report` itself is left as it is.
        """
        details = ""
        exit_code = _own_exit_code(report.error)
        if report.error is not None and report.error.details is not None:
            details = report.error.details
            report = dataclasses.replace(report, error=dataclasses.replace(report.error,
                                                                           details=None))
        return cls(id=job_id, report=report, details=details, extra=report.extra,
                   job_dir=job_dir, fills=fills, exit_code=exit_code)


@dataclass(kw_only=True)
class ValidateFileResult(ExportResult):
    """The end of a validate_file job: the export document of the validation (ok or failed)."""

    JOB = "validate_file"
    KEY = "validated_file"  # told apart from an export's result, which has `report` too
    validated_file: bool = True


@dataclass(kw_only=True)
class ValidateResult(Result):
    """The end of a validation job: the validation of the file `onnx` (ok or not)."""

    JOB = "validate"
    KEY = "validation"
    id: int | None
    validation: Validation
    onnx: str
    job_dir: str


@dataclass(kw_only=True)
class DescribeResult(Result):
    """The end of a describe job."""

    JOB = "describe"
    KEY = "description"
    id: int | None
    description: SourceDescription


@dataclass(kw_only=True)
class DevicesResult(Result):
    """What the worker can do: devices, each exporter's [lowest, highest] and default opset,
    the newest opset the installed onnxruntime loads, and torch's version."""

    JOB = "devices"
    KEY = "devices"
    id: int | None
    devices: list[str]
    opsets: dict[str, list[int]]
    default_opset: dict[str, int]
    ort_max_opset: int | None
    torch: str


@dataclass(kw_only=True)
class Pong(Result):
    """The answer to a ping, with the worker's process id."""

    JOB = "ping"
    KEY = "pong"
    id: int | None
    pong: bool = True
    pid: int


# ---------------------------------------------------------------------------- analysis jobs


@dataclass(kw_only=True)
class CompareRequest(Request):
    """Compare the .onnx files `a` and `b` (onnx_studio.engine.analysis.compare); with `recipe`, on
    its inputs and against its PyTorch model too; `dims` sizes dynamic dimensions without one."""

    TAG = "compare"
    id: int | None = field(default=None, metadata=OMIT)
    a: str
    b: str
    recipe: str | None = field(default=None, metadata=OMIT)
    base_dir: str | None = field(default=None, metadata=OMIT)
    dims: dict[str, int] = field(default_factory=dict)
    runs: int = 10


@dataclass(kw_only=True)
class ProfileRequest(Request):
    """Profile the .onnx file `onnx` in ONNX Runtime (onnx_studio.engine.analysis.profile)."""

    TAG = "profile"
    id: int | None = field(default=None, metadata=OMIT)
    onnx: str
    recipe: str | None = field(default=None, metadata=OMIT)
    base_dir: str | None = field(default=None, metadata=OMIT)
    runs: int = 20
    provider: str = "CPUExecutionProvider"
    threads: int | None = field(default=None, metadata=OMIT)
    dims: dict[str, int] = field(default_factory=dict)
    warmup: int = 3
    optimization: str = "all"  # onnxruntime's graph optimization level for the session


@dataclass(kw_only=True)
class VariantRequest(Request):
    """Write the `kind` variant (optimized, fp16, int8) of `onnx` to `output` and validate it
    against the recipe's model (onnx_studio.engine.analysis.variants)."""

    TAG = "variant"
    id: int | None = field(default=None, metadata=OMIT)
    onnx: str
    recipe: str
    base_dir: str | None = field(default=None, metadata=OMIT)
    kind: str
    output: str
    rtol: float | None = field(default=None, metadata=OMIT)  # None: the kind's tolerance
    atol: float | None = field(default=None, metadata=OMIT)
    keep_io_types: bool = True  # fp16: inputs and outputs stay float32
    optimization: str = "extended"  # optimized: the onnxruntime level
    # fp16: "auto" (search) or node names joined by commas, kept in float32
    keep_fp32: str | None = field(default=None, metadata=OMIT)


@dataclass(kw_only=True)
class ExplainRequest(Request):
    """Name the first node of `onnx` (a Hugging Face recipe: the folder) that diverges from the
    recipe's model and write its repro into `repro_dir` (onnx_studio.engine.analysis.explain)."""

    TAG = "explain"
    id: int | None = field(default=None, metadata=OMIT)
    onnx: str
    recipe: str
    base_dir: str | None = field(default=None, metadata=OMIT)
    repro_dir: str | None = field(default=None, metadata=OMIT)  # None: beside the file
    # false: name the divergence only (the window's Why?; Save repro… asks again with a folder)
    write_repro: bool = True


@dataclass(kw_only=True)
class CompareResult(Result):
    """The end of a compare job: the document `onnx-studio compare --json` prints."""

    JOB = "compare"
    KEY = "comparison"
    id: int | None
    comparison: CompareDocument


@dataclass(kw_only=True)
class ProfileResult(Result):
    """The end of a profile job: the document `onnx-studio profile --json` prints."""

    JOB = "profile"
    KEY = "profile"
    id: int | None
    profile: ProfileDocument


@dataclass(kw_only=True)
class VariantResult(Result):
    """The end of a variant job: the document `onnx-studio variant --json` prints (a variant
    outside its tolerance is a result too, with ok false)."""

    JOB = "variant"
    KEY = "variant_report"
    id: int | None
    variant_report: VariantReport


@dataclass(kw_only=True)
class ExplainResult(Result):
    """The end of an explain job: the document `onnx-studio explain --json` prints."""

    JOB = "explain"
    KEY = "explanation"
    id: int | None
    explanation: ExplainDocument


REQUESTS: Final[dict[str, type[Request]]] = {cls.TAG: cls for cls in (
    ExportRequest, ValidateRequest, ValidateFileRequest, DescribeRequest, DevicesRequest,
    PingRequest, QuitRequest, AbortRequest, CompareRequest, ProfileRequest, VariantRequest,
    ExplainRequest)}
EVENTS: Final[dict[str, type[Event]]] = {cls.TAG: cls for cls in (
    Ready, Progress, LogLine, WarningEvent, Committing, ErrorEvent)}
RESULTS: Final[dict[str, type[Result]]] = {cls.JOB: cls for cls in (
    ValidateFileResult, ExportResult, ValidateResult, DescribeResult, DevicesResult, Pong,
    CompareResult, ProfileResult, VariantResult, ExplainResult)}


# ---------------------------------------------------------------------------- encoder, decoder


def _plain(value: Any) -> Any:
    """json.dumps fallback: a NumPy scalar becomes its number, a path its text."""
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:
        return value.item()
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"{type(value).__name__} is not a protocol value")


def encode(message: Wire) -> str:
    """One JSON line (without its newline) for a message or a document.

    NaN and infinities are written as JavaScript literals (json's `allow_nan`), as both the
    worker and the CLI have; the validation itself reports non-finite metrics as null.
    """
    return json.dumps(message.to_dict(), allow_nan=True, default=_plain)


@overload
def decode(line: str | bytes, expected: type[W]) -> W: ...


@overload
def decode(line: str | bytes, expected: str | None = None) -> Message: ...


def decode(line: str | bytes, expected: type[Wire] | str | None = None) -> Wire:
    """The message on one line; ProtocolError when it is not JSON or does not fit its class.

    `expected` may be a class (a document such as ExportReport, the one message the line must
    be, or `Request`: any request, by its `job`) or the job name of the request the line
    answers, which picks its result class. Without it, the line's `job` or `type` says what it
    is.
    """
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProtocolError("message", "", f"is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ProtocolError("message", "", "is not a JSON object")
    cls = _message_class(data, expected)
    return from_dict(cls, data)


def _message_class(data: dict[str, Any], expected: type[Wire] | str | None) -> type[Wire]:
    if expected is Request and "job" not in data:
        raise ProtocolError("request", "job", "is missing")
    if isinstance(expected, type) and expected is not Request:
        tag_key = expected.TAG_KEY
        if tag_key is not None and data.get(tag_key) != expected.TAG:
            raise ProtocolError(expected.__name__, tag_key,
                                f"is {data.get(tag_key)!r}, not {expected.TAG!r}")
        return expected
    if "job" in data:
        request = REQUESTS.get(data["job"]) if isinstance(data["job"], str) else None
        if request is None:
            raise ProtocolError("request", "job", f"names no job this worker runs "
                                f"({data['job']!r}; it runs {', '.join(REQUESTS)})")
        return request
    kind = data.get("type")
    if kind is None:
        raise ProtocolError("message", "type", "is missing (a request has `job` instead)")
    if kind != "result":
        event = EVENTS.get(kind) if isinstance(kind, str) else None
        if event is None:
            raise ProtocolError("message", "type", f"is {kind!r}, which this version does "
                                f"not know ({', '.join([*EVENTS, 'result'])})")
        return event
    if isinstance(expected, str):
        if expected not in RESULTS:
            raise ProtocolError("result", "", f"answers the job {expected!r}, which has no "
                                "result class")
        return RESULTS[expected]
    for result in RESULTS.values():
        if result.KEY in data:
            return result
    keys = ", ".join(repr(r.KEY) for r in RESULTS.values())
    raise ProtocolError("result", "", f"has none of the keys {keys}, so its job is unknown")


def decode_reply(data: dict[str, Any], jobs: Mapping[int, str]) -> Event:
    """What a worker said, as its typed event, from the JSON object of one line: a result by
    the job its `id` was sent as (`jobs`: id -> the request's `job`), else by its
    distinguishing key.

    ProtocolError when it is no event or does not fit its class; its `message_id` is the
    line's `id` when it had one, so a client can end that job with the error.
    """
    job_id = data.get("id")
    try:
        if "job" in data:
            raise ProtocolError("event", "job", "is a request's key: a worker sends events")
        expected = jobs.get(job_id) if isinstance(job_id, int) else None
        message = from_dict(_message_class(data, expected), data)
    except ProtocolError as exc:
        exc.message_id = job_id if isinstance(job_id, int) and not isinstance(job_id, bool) \
            else None
        raise
    assert isinstance(message, Event)
    return message
