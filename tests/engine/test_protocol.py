"""onnx_studio.engine.protocol: every message round-trips, the contract's example decodes, and the
lines the real worker and CLI print today decode into the classes and encode back unchanged."""

from __future__ import annotations

import json
import math
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.protocol import (
    EVENTS,
    PROTOCOL_VERSION,
    REQUESTS,
    RESULTS,
    UNSET,
    AbortRequest,
    Candidate,
    Committing,
    DescribeRequest,
    DescribeResult,
    DevicesRequest,
    DevicesResult,
    Error,
    ErrorEvent,
    ExportFacts,
    ExportReport,
    ExportRequest,
    ExportResult,
    FillChoice,
    Graph,
    InspectDocument,
    Intermediates,
    LogLine,
    NodeMetrics,
    OutputMetrics,
    PingRequest,
    Pong,
    Progress,
    ProtocolError,
    QuitRequest,
    Ready,
    Request,
    SourceDescription,
    TensorInfo,
    Trial,
    TrialOutput,
    ValidateFileRequest,
    ValidateFileResult,
    ValidateRequest,
    ValidateResult,
    Validation,
    WarningEvent,
    WarningItem,
    Wire,
    decode,
    encode,
    known,
)
from tests.conftest import REPO
from tests.engine.analysis_samples import ANALYSIS_SAMPLES

NET = '''
import torch


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x))
'''

RECIPE = '''
version = 1

[model]
source = "net.py:Net"

[[inputs]]
name = "x"
shape = [2, 4]

[export]
output = "out/model.onnx"
exporter = "torchscript"
'''

# ---------------------------------------------------------------------------- samples


def _graph() -> Graph:
    return Graph(nodes=3,
                 inputs=[TensorInfo(name="x", dtype="float32", shape=["batch", 4])],
                 outputs=[TensorInfo(name="y", dtype="float32", shape=None)])


def _trial_output(**changes: Any) -> TrialOutput:
    values: dict[str, Any] = dict(
        name="y", shape=[2, 3], dtype="float32", onnx_shape=[2, 3], onnx_dtype="float32",
        passed=True, message="", max_abs_diff=1e-7, max_rel_diff=2e-6, mean_abs_diff=1e-8,
        cosine_similarity=1.0, mismatched=0, mismatched_fraction=0.0, nan_mismatch=0,
        inf_mismatch=0, matched_nans=0, elements=6, exact=False)
    return TrialOutput(**{**values, **changes})


def _validation() -> Validation:
    return Validation(
        ok=False, message="1 of 2 trials failed; first: at batch=3: ...", rtol=1e-3, atol=1e-5,
        outputs=[
            OutputMetrics(name="y", max_abs_diff=0.5, max_rel_diff=0.25, passed=False,
                          mean_abs_diff=0.1, mismatched=2, mismatched_fraction=0.5,
                          nan_mismatch=0, inf_mismatch=0, matched_nans=1,
                          cosine_similarity=0.99, message="2 of 6 elements differ",
                          dtype="float32", trials=2),
            # an output no trial produced: only its name, verdict and reason
            OutputMetrics(name="z", max_abs_diff=None, max_rel_diff=None, passed=False,
                          message="no trial produced this output"),
        ],
        trials=[
            Trial(kind="export-inputs", seed=0, sizes={"batch": 2}, ok=True,
                  outputs=[_trial_output()], message="", seconds=0.0016),
            Trial(kind="dynamic-size", seed=1002, sizes={"batch": 3}, ok=False,
                  outputs=[_trial_output(shape=[3, 3], onnx_shape=[2, 3], passed=False,
                                         max_abs_diff=None, max_rel_diff=None,
                                         mean_abs_diff=None, cosine_similarity=None,
                                         mismatched=None, mismatched_fraction=None,
                                         nan_mismatch=None, inf_mismatch=None,
                                         matched_nans=None, exact=None)],
                  message="at batch=3: ...", changed="batch", details="Traceback ...",
                  seconds=0.002),
        ],
        warnings=[WarningItem(category="ValidationWarning", message="w", source="")],
        providers=["CPUExecutionProvider"], optimization="all",
        intermediates=Intermediates(
            nodes={"/fc/Gemm": NodeMetrics(max_abs_diff=0.0, max_rel_diff=0.0, passed=True,
                                           mismatched=0, value="linear"),
                   "/Relu": NodeMetrics(max_abs_diff=None, max_rel_diff=None, passed=False,
                                        message="shape [2] in ONNX, [3] in PyTorch",
                                        value="relu")},
            first_divergent="/Relu", compared=2),
        plots="/cache/jobs/1-7/validation.npz", seconds=0.2263)


def _report() -> ExportReport:
    return ExportReport(
        ok=True, output="/out/model.onnx", exporter="dynamo",
        exporter_reason="the default exporter for a PyTorch module", opset=18,
        seconds={"load": 0.4, "export": 5.1}, graph=_graph(),
        warnings=[WarningItem(category="TracerWarning", message="m", source="net.py:41",
                              hint="Use torch.where.",
                              details="TracerWarning: m\n\nRaised at ...")],
        validation=_validation())


def _failed_report() -> ExportReport:
    return ExportReport(output="/out/model.onnx", exporter="torchscript").fail(StudioError(
        "unsupported_operator", "2 operators cannot be converted.", "Register a symbolic.",
        ["aten::foo", "aten::bar"], details="Traceback (most recent call last): ..."))


EXPORTED = ExportResult(id=7, report=_report(), details="", job_dir="/cache/jobs/1-7",
                        extra=ExportFacts(file_bytes=1234, external_data=None,
                                          opset_imports={"": 18, "pkg.onnxscript.torch_lib": 1}))
VALIDATED = ValidateResult(id=12, validation=_validation(), onnx="/dir/out/model.onnx",
                           job_dir="/cache/jobs/1-12")
SAMPLES: list[Wire] = [
    ExportRequest(id=7, recipe=RECIPE, base_dir="/dir", validate=True),
    ExportRequest(id=7, recipe=RECIPE),
    ValidateRequest(id=12, recipe=RECIPE, base_dir="/dir", onnx="/dir/out/model.onnx"),
    DescribeRequest(id=8, source="net.py", base_dir="/dir"),
    DevicesRequest(id=9),
    PingRequest(id=10),
    QuitRequest(),
    AbortRequest(),
    Ready(protocol=PROTOCOL_VERSION, pid=123, torch="2.13.0", import_s=2.1),
    Ready(protocol=PROTOCOL_VERSION, pid=123, torch="2.14.0", import_s=2.1, torch_tested=False),
    Progress(id=7, fraction=0.4, stage="export"),
    LogLine(id=7, line="[torch.onnx] Obtain model graph"),
    WarningEvent(id=7, warning=WarningItem(category="TracerWarning", message="m",
                                           source="f.py:3")),
    WarningEvent(id=7, warning=WarningItem(category="DynamicShape", message="m", hint="h",
                                           details="d")),
    ErrorEvent(id=7, error=Error(kind="source", message="No such file.", hint="Check it."),
               details="Traceback ..."),
    ErrorEvent(error=Error(kind="recipe", message="Unreadable request: ..."), details="{"),
    EXPORTED,
    ExportResult(id=7, report=_failed_report(), details="Traceback ...",
                 job_dir="/cache/jobs/1-7"),
    # the CLI's worker jobs (onnx_studio.engine.job_client): plots beside the file, the report of a
    # validation, the fills chosen, an exit status other than the kind's, the commit point
    ExportRequest(id=7, recipe=RECIPE, base_dir="/dir", plots_beside_onnx=True),
    ValidateFileRequest(id=13, recipe=RECIPE, base_dir="/dir", onnx="/dir/out/model.onnx"),
    Committing(id=7, output="/dir/out/model.onnx"),
    ExportResult(id=7, report=_failed_report(), job_dir="/cache/jobs/1-7", exit_code=2,
                 fills=[FillChoice(fill="randint", low=0, high=99, reason="token ids")]),
    ValidateFileResult(id=13, report=_failed_report(), job_dir=""),
    ErrorEvent(id=7, error=Error(kind="write", message="Cannot write."), exit_code=2),
    VALIDATED,
    DescribeResult(id=8, description=SourceDescription(
        kind="python", candidates=[Candidate(name="Net", kind="class", params=["x"],
                                             doc="A net."),
                                   Candidate(name="build", kind="factory", params=[])],
        forward_params=["x"])),
    DescribeResult(id=8, description=SourceDescription(kind="unknown", error="No source.")),
    DevicesResult(id=9, devices=["cpu", "cuda:0"], opsets={"dynamo": [18, 23],
                                                           "torchscript": [7, 20]},
                  default_opset={"dynamo": 20, "torchscript": 20}, ort_max_opset=23,
                  torch="2.13.0"),
    Pong(id=10, pid=123),
    *ANALYSIS_SAMPLES,  # compare, profile, variant (tests/engine/analysis_samples.py)
    _report(),
    _failed_report(),
    ExportReport(error=Error(kind="recipe", message="Bad.")),
    _validation(),
    _graph(),
    InspectDocument(nodes=3, inputs=_graph().inputs, outputs=_graph().outputs,
                    opset_imports={"": 18}, graph=_graph()),
]


def _ids(sample: Wire) -> str:
    return type(sample).__name__


def _is_message(sample: Wire) -> bool:
    return sample.TAG_KEY is not None


# ---------------------------------------------------------------------------- round trips


def test_every_message_class_has_a_sample() -> None:
    sampled = {type(s) for s in SAMPLES}
    every = {*REQUESTS.values(), *EVENTS.values(), *RESULTS.values()}
    assert every <= sampled, every - sampled


@pytest.mark.parametrize("sample", SAMPLES, ids=_ids)
def test_round_trip(sample: Wire) -> None:
    line = encode(sample)
    assert "\n" not in line
    again = decode(line, type(sample))
    assert again == sample and type(again) is type(sample)
    assert encode(again) == line
    if _is_message(sample):  # told apart by its `job` / `type` (results: by their key)
        assert decode(line) == sample
        assert decode(line.encode()) == sample


@pytest.mark.parametrize("sample", [s for s in SAMPLES if _is_message(s)], ids=_ids)
def test_unknown_fields_are_ignored(sample: Wire) -> None:
    data = sample.to_dict()
    data["added_by_a_newer_worker"] = {"anything": [1, 2]}
    for key, value in data.items():  # and one level down, inside nested documents
        if isinstance(getattr(sample, key, None), Wire):
            value["also_new"] = None
    assert decode(json.dumps(data)) == sample


# shapes onnx_studio.engine.worker writes on paths the subprocess tests below do not take
TODAYS_LINES = [
    # onnx_studio.engine.worker.main: an unreadable request (no id)
    '{"type": "error", "error": {"kind": "worker_protocol", "message": "Unreadable request: x", '
    '"hint": "h", "unsupported_ops": []}, "details": "{oops"}',
    # onnx_studio.engine.worker.handle: a failed export, its error details beside the report, no
    # facts
    '{"id": 7, "type": "result", "report": {"ok": false, "output": "/o/m.onnx", "exporter": '
    '"dynamo", "opset": null, "seconds": {"load": 0.2}, "graph": null, "warnings": [{"category": '
    '"ExportPitfall", "message": "m", "source": "net.py:3", "hint": "h"}], "error": {"kind": '
    '"unsupported_operator", "message": "m", "hint": "h", "unsupported_ops": ["aten::foo"]}, '
    '"validation": null}, "details": "Traceback", "extra": {}, "job_dir": "/c/jobs/1-7"}',
    # onnx_studio.engine.validation: plot data that could not be saved, and an output no trial
    # produced
    '{"id": 12, "type": "result", "validation": {"ok": false, "message": "2 of 2 trials '
    'failed; first: m", "rtol": 0.001, "atol": 1e-05, "outputs": [{"name": "y", '
    '"max_abs_diff": null, "max_rel_diff": null, "passed": false, "message": "no trial produced '
    'this output"}], "trials": [{"kind": "export-inputs", "seed": 0, "sizes": {}, "ok": false, '
    '"outputs": [], "message": "m", "details": "tb", "seconds": 0.01}], "warnings": [], '
    '"providers": ["CPUExecutionProvider"], "optimization": "all", "intermediates": {"nodes": '
    '{}, "first_divergent": null, "compared": 0, "message": "no values matched"}, "plots": '
    'null, "seconds": 0.02}, "onnx": "/o/m.onnx", "job_dir": "/c/jobs/1-12"}',
]


@pytest.mark.parametrize("line", TODAYS_LINES)
def test_todays_worker_lines_encode_back_to_the_same_text(line: str) -> None:
    assert encode(decode(line)) == line


def test_results_are_told_apart_by_the_job_asked_for() -> None:
    line = encode(Pong(id=3, pid=5))
    assert decode(line, "ping") == Pong(id=3, pid=5)
    assert decode(encode(Progress(id=3, fraction=1.0, stage="x")), "export") == Progress(
        id=3, fraction=1.0, stage="x")
    with pytest.raises(ProtocolError, match="'report' is missing"):
        decode(line, "export")


# ---------------------------------------------------------------------------- errors


@pytest.mark.parametrize(("sample", "path", "message_type", "field"), [
    (Progress(id=1, fraction=0.5, stage="s"), ["stage"], "Progress", "stage"),
    (Ready(protocol=1, pid=2, torch="t", import_s=1.0), ["protocol"], "Ready", "protocol"),
    (WarningEvent(id=1, warning=WarningItem(category="C", message="m")), ["category"],
     "WarningEvent", "category"),
    (ErrorEvent(id=1, error=Error(kind="export", message="m")), ["error", "kind"],
     "ErrorEvent", "error.kind"),
    (ExportRequest(id=1, recipe=RECIPE), ["recipe"], "ExportRequest", "recipe"),
    (EXPORTED, ["report", "ok"], "ExportResult", "report.ok"),
    (EXPORTED, ["report", "graph", "inputs", 0, "dtype"], "ExportResult",
     "report.graph.inputs[0].dtype"),
    (VALIDATED, ["validation", "trials", 1, "kind"], "ValidateResult",
     "validation.trials[1].kind"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_a_missing_field_is_a_protocol_error_naming_it(
        sample: Wire, path: list[str | int], message_type: str, field: str) -> None:
    data: Any = sample.to_dict()
    holder = data
    for key in path[:-1]:
        holder = holder[key]
    del holder[path[-1]]
    with pytest.raises(ProtocolError) as caught:
        decode(json.dumps(data))
    error = caught.value
    assert (error.message_type, error.field, error.kind) == (message_type, field,
                                                             "worker_protocol")
    assert str(error) == f"{message_type}: field {field!r} is missing"
    assert Error.from_exception(error).kind == "worker_protocol"


@pytest.mark.parametrize(("line", "match"), [
    ('{"id": 1, "type": "progress", "fraction": "half", "stage": "s"}',
     "Progress: field 'fraction' must be a number, not a string"),
    ('{"id": 1, "type": "progress", "fraction": true, "stage": "s"}', "must be a number"),
    ('{"id": 1, "type": "log", "line": null}', "field 'line' must be a string, not null"),
    ('{"id": 1, "type": "result", "pong": true, "pid": 2.5}', "'pid' must be an integer"),
    ('{"id": 1, "type": "result", "report": [], "job_dir": ""}',
     "'report' must be a JSON object, not a list"),
    ("not json", "message: is not JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"id": 1}', "'type' is missing"),
    ('{"id": 1, "type": "telepathy"}', "'telepathy', which this version does not know"),
    ('{"id": 1, "job": "teleport"}', "names no job this worker runs"),
    ('{"id": 1, "type": "result", "answer": 42}', "so its job is unknown"),
])
def test_bad_lines_are_protocol_errors(line: str, match: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(match)):
        decode(line)


@pytest.mark.parametrize(("line", "match"), [
    ('{"id": 1, "type": "progress", "fraction": 0.5, "stage": "s"}',
     "request: field 'job' is missing"),
    ('{"id": 1}', "request: field 'job' is missing"),
    ('{"id": 1, "job": "fly"}', "request: field 'job' names no job this worker runs"),
    ('{"id": 1, "job": "export"}', "ExportRequest: field 'recipe' is missing"),
])
def test_the_worker_reads_requests_only(line: str, match: str) -> None:
    with pytest.raises(ProtocolError, match=re.escape(match)):
        decode(line, Request)
    assert decode(encode(AbortRequest()), Request) == AbortRequest()
    assert decode('{"id": 4, "job": "ping", "new": 1}', Request) == PingRequest(id=4)


def test_ready_says_whether_torch_is_tested_and_older_workers_do_not() -> None:
    old = '{"type": "ready", "protocol": 1, "pid": 3, "torch": "2.13.0", "import_s": 1.0}'
    assert decode(old, Ready).torch_tested is None and encode(decode(old)) == old
    ready = Ready(protocol=1, pid=3, torch="2.13.0", import_s=1.0, torch_tested=True)
    assert encode(ready) == old[:-1] + ', "torch_tested": true}'


def test_an_export_result_carries_the_traceback_once() -> None:
    report = _failed_report()
    result = ExportResult.from_report(7, report, "/j")
    assert result.details == "Traceback (most recent call last): ..."
    assert result.report.error is not None and result.report.error.details is None
    assert "details" not in result.to_dict()["report"]["error"]  # beside it, as always
    assert report.error is not None and report.error.details  # the caller's report unchanged


def test_an_expected_class_checks_the_tag() -> None:
    with pytest.raises(ProtocolError, match="Ready: field 'type' is 'progress'"):
        decode(encode(Progress(id=1, fraction=0.1, stage="s")), Ready)


# ---------------------------------------------------------------------------- omission rules


def test_none_is_null_unless_the_key_is_left_out_when_unset() -> None:
    warning = WarningItem(category="C", message="m", source="")
    assert list(warning.to_dict()) == ["category", "message", "source"]  # no hint, no details
    assert WarningItem.from_dict({**warning.to_dict(), "hint": "h"}).hint == "h"
    report = ExportReport()
    assert report.to_dict() == {"ok": False, "output": None, "exporter": None, "opset": None,
                                "seconds": {}, "graph": None, "warnings": [], "error": None,
                                "validation": None}
    base = dict(ok=True, rtol=0.001, atol=1e-05)
    assert "plots" not in Validation(**base).to_dict()  # UNSET: left out
    assert Validation(**base, plots=None).to_dict()["plots"] is None  # null: not saved
    assert ExportFacts().to_dict() == {}  # a failed export's `extra`
    assert ExportFacts(file_bytes=5, external_data=None, opset_imports={"": 18}).to_dict() == {
        "file_bytes": 5, "external_data": None, "opset_imports": {"": 18}}
    assert known(OutputMetrics(name="y", max_abs_diff=None, max_rel_diff=None, passed=False
                               ).mean_abs_diff) is None


def test_output_metrics_keep_both_of_todays_shapes() -> None:
    none_ran = OutputMetrics(name="z", max_abs_diff=None, max_rel_diff=None, passed=False,
                             message="no trial produced this output")
    assert list(none_ran.to_dict()) == ["name", "max_abs_diff", "max_rel_diff", "passed",
                                        "message"]
    shapes_differ = OutputMetrics(name="z", max_abs_diff=None, max_rel_diff=None,
                                  passed=False, mean_abs_diff=None, mismatched=None,
                                  mismatched_fraction=None, nan_mismatch=None,
                                  inf_mismatch=None, matched_nans=None,
                                  cosine_similarity=None, message="shape", dtype="float32",
                                  trials=1)
    data = shapes_differ.to_dict()
    assert data["mean_abs_diff"] is None and data["cosine_similarity"] is None
    assert OutputMetrics.from_dict(data) == shapes_differ
    assert OutputMetrics.from_dict(none_ran.to_dict()).mismatched is UNSET


def test_seconds_are_written_to_the_millisecond_and_extra_stays_out() -> None:
    report = ExportReport(ok=True, seconds={"load": 0.123456, "export": 2})
    report.extra = ExportFacts(file_bytes=1)
    data = report.to_dict()
    assert data["seconds"] == {"load": 0.123, "export": 2}
    assert "extra" not in data
    assert ExportResult.from_report(1, report, "/j").to_dict()["extra"] == {"file_bytes": 1}


def test_non_finite_numbers_are_written_as_today() -> None:
    # NaN only where a producer sends it (json's allow_nan, as the worker and CLI had);
    # the validation's metrics are None for non-finite values and so null
    line = encode(Progress(id=1, fraction=math.nan, stage="s"))
    assert '"fraction": NaN' in line
    assert math.isnan(decode(line, Progress).fraction)
    assert '"max_abs_diff": null' in encode(_trial_output(max_abs_diff=None))


# ---------------------------------------------------------------------------- conversions


def test_errors_convert_from_and_to_studio_errors() -> None:
    exc = StudioError("write", "Cannot write.", "Free some space.", details="OSError 28",
                      exit_code=2)
    error = Error.from_exception(exc)
    assert error.to_dict() == {"kind": "write", "message": "Cannot write.",
                               "hint": "Free some space.", "details": "OSError 28",
                               "unsupported_ops": []}
    assert error.exit_status() == 2
    back = error.to_exception()
    assert (back.kind, back.message, back.hint, back.details, back.exit_code) == (
        "write", "Cannot write.", "Free some space.", "OSError 28", 2)
    newer = Error(kind="model_error", message="The model raised.").to_exception("tb")
    assert (newer.kind, newer.exit_code, newer.details) == ("model_error", 1, "tb")
    assert Error(kind="recipe", message="m").exit_status() == 2


def test_error_events_have_the_workers_shape() -> None:
    exc = StudioError("source", "No file.", "Check the path.", details="")
    event = ErrorEvent.from_exception(7, exc, "Traceback ...")
    assert event.to_dict() == {"id": 7, "type": "error", "error": {
        "kind": "source", "message": "No file.", "hint": "Check the path.",
        "unsupported_ops": []}, "details": "Traceback ..."}
    assert event.to_exception().details == "Traceback ..."
    bug = ErrorEvent.from_exception(8, ZeroDivisionError("division by zero"), "tb")
    assert bug.error.to_dict() == {"kind": "export",
                                   "message": "The worker failed: division by zero",
                                   "hint": "Open Details for the traceback.",
                                   "unsupported_ops": []}


def test_warnings_from_the_events_dicts() -> None:
    item = {"category": "TracerWarning", "message": "m", "source": "net.py:3", "hint": "h"}
    warning = WarningItem.from_dict(item)
    assert warning.to_dict() == item and list(warning.to_dict()) == list(item)
    assert WarningEvent(id=2, warning=warning).to_dict() == {"id": 2, "type": "warning", **item}


def test_the_exporter_reason_follows_the_exporter_and_is_left_out_when_unknown() -> None:
    data = json.loads(encode(_report()))
    assert list(data)[:4] == ["ok", "output", "exporter", "exporter_reason"]
    assert data["exporter_reason"] == "the default exporter for a PyTorch module"
    assert data["warnings"][0]["details"].startswith("TracerWarning: m")
    assert decode(json.dumps(data), ExportReport) == _report()
    assert "exporter_reason" not in json.loads(encode(_failed_report()))


def test_a_failed_report_has_the_contracts_error_shape() -> None:
    data = json.loads(encode(_failed_report()))
    assert list(data) == ["ok", "output", "exporter", "opset", "seconds", "graph", "warnings",
                          "error", "validation"]
    assert data["ok"] is False
    assert list(data["error"]) == ["kind", "message", "hint", "details", "unsupported_ops"]
    assert data["error"]["unsupported_ops"] == ["aten::foo", "aten::bar"]
    assert decode(json.dumps(data), ExportReport) == _failed_report()


# ---------------------------------------------------------------------------- the contract


def _contract_examples() -> list[tuple[str, str]]:
    """The `--json` example document of the "Command line" contract, from the files that hold
    it (the architecture document beside the repository, and the documentation's JSON page)."""
    candidates = [Path(os.environ.get("ONNX_STUDIO_ARCHITECTURE", "/work/shared/"
                                      "ARCHITECTURE.md")), REPO / "ARCHITECTURE.md",
                  REPO.parent / "shared" / "ARCHITECTURE.md", REPO / "docs" / "json.md"]
    found: dict[Path, tuple[str, str]] = {}
    for path in candidates:
        if not path.is_file() or path.resolve() in found:
            continue
        text = path.read_text(encoding="utf-8")
        section = text.partition("Command line")[2]
        for block in re.findall(r"```json\n(.*?)```", section, flags=re.S):
            if block.lstrip().startswith('{"ok": true, "output"'):
                found[path.resolve()] = (path.name, block)
                break
    return list(found.values())


EXAMPLES = _contract_examples()


@pytest.mark.skipif(not EXAMPLES, reason="no file with the contract's example document found")
@pytest.mark.parametrize(("name", "block"), EXAMPLES, ids=[n for n, _ in EXAMPLES])
def test_the_contract_example_decodes_and_encodes_back_unchanged(name: str, block: str
                                                                 ) -> None:
    report = decode(block, ExportReport)
    assert report.ok and report.graph is not None and report.validation is not None
    assert report.validation.trials[2].sizes == {"batch": 3}
    # same keys, same order, same values: the example's own text, re-serialized
    assert encode(report) == json.dumps(json.loads(block))


# ---------------------------------------------------------------------------- today's producers


def _contract_order(line: str) -> str:
    """`line` with each `validation.outputs` entry in the contract's key order.

    onnx_studio.engine.validation writes `passed` right after `name`; the contract (and
    OutputMetrics) put it after `max_rel_diff`. The only difference in today's documents; a no-op
    once validate builds OutputMetrics.
    """
    data = json.loads(line)
    lead = ("name", "max_abs_diff", "max_rel_diff", "passed")
    validation = data.get("validation") or {}
    validation["outputs"] = [{**{k: o[k] for k in lead if k in o}, **o}
                             for o in validation.get("outputs", [])]
    return json.dumps(data)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("protocol-model")
    (folder / "net.py").write_text(NET, encoding="utf-8")
    return folder


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(cache)}


def test_the_clis_documents_decode_and_encode_back_unchanged(model_dir: Path,
                                                             tmp_path: Path) -> None:
    def cli(*args: str) -> str:
        result = subprocess.run([sys.executable, "-m", "onnx_studio.engine.cli", *args],
                                cwd=model_dir,
                                env=_env(tmp_path), capture_output=True, text=True,
                                timeout=300)
        assert result.returncode == 0, result.stderr
        return result.stdout.splitlines()[-1]

    line = cli("export", "net.py:Net", "-o", "cli.onnx", "--input", "x=2x4", "--exporter",
               "torchscript", "--validate", "--json")
    report = decode(line, ExportReport)
    assert report.ok and report.validation is not None and report.validation.ok
    assert report.validation.trials and report.validation.trials[0].outputs
    assert encode(report) == _contract_order(line)

    line = cli("inspect", "cli.onnx", "--json")
    document = decode(line, InspectDocument)
    assert document.graph.nodes == document.nodes and document.opset_imports[""] >= 7
    assert encode(document) == line
    from onnx_studio.engine.graph.summary import summarize

    assert InspectDocument.from_summary(summarize(model_dir / "cli.onnx")) == document


class _Worker:
    """A real `python -m onnx_studio.engine.worker`, its stdout read on a thread, every read with a
    deadline."""

    def __init__(self, cwd: Path, cache: Path, timeout: float = 300.0) -> None:
        self.deadline = time.monotonic() + timeout
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "onnx_studio.engine.worker"], cwd=cwd, env=_env(cache),
            text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name="worker-stdout", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, request: Request) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(encode(request) + "\n")
        self.proc.stdin.flush()

    def line(self) -> str:
        try:
            line = self.lines.get(timeout=max(0.0, self.deadline - time.monotonic()))
        except queue.Empty:
            self.kill()
            pytest.fail("the worker did not answer in time")
        if line is None:
            pytest.fail(f"the worker closed its stdout (exit status {self.proc.wait(5)})")
        return line

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def worker(model_dir: Path, tmp_path: Path) -> Iterator[_Worker]:
    w = _Worker(model_dir, tmp_path / "cache")
    yield w
    w.kill()


def _decoded(line: str, job: str | None = None) -> Wire:
    """The line as a protocol message, checked to encode back to the very same object."""
    message = decode(line, job)
    assert message.to_dict() == json.loads(line), line
    return message


def test_the_workers_lines_decode_and_encode_back_unchanged(worker: _Worker,
                                                            model_dir: Path) -> None:
    ready = _decoded(worker.line())
    assert isinstance(ready, Ready) and ready.protocol == PROTOCOL_VERSION
    assert ready.torch_tested is True  # the test command installs a tested torch

    requests: list[Request] = [
        PingRequest(id=1),
        DevicesRequest(id=2),
        DescribeRequest(id=3, source="net.py", base_dir=str(model_dir)),
        ExportRequest(id=4, recipe=RECIPE, base_dir=str(model_dir), validate=True),
    ]
    seen: dict[int, list[Wire]] = {}
    for request in requests:
        worker.send(request)
        assert request.id is not None
        while True:
            message = _decoded(worker.line(), request.TAG)
            assert getattr(message, "id", None) == request.id
            seen.setdefault(request.id, []).append(message)
            if isinstance(message, ErrorEvent):
                pytest.fail(f"{request.TAG} failed: {message.error} {message.details}")
            if message.TAG == "result":
                assert decode(encode(message)) == message  # found by its key alone, too
                break

    pong, devices, described = seen[1][-1], seen[2][-1], seen[3][-1]
    assert isinstance(pong, Pong) and pong.pid == worker.proc.pid
    assert isinstance(devices, DevicesResult) and "cpu" in devices.devices
    assert isinstance(described, DescribeResult)
    assert [c.name for c in described.description.candidates] == ["Net"]
    *events, result = seen[4]
    assert isinstance(result, ExportResult)
    assert result.report.ok and result.report.validation and result.report.validation.ok
    assert result.extra.file_bytes and result.extra.external_data is None
    assert {type(e) for e in events} <= {Progress, LogLine, WarningEvent, Committing}
    assert any(isinstance(e, Progress) for e in events)

    worker.send(QuitRequest())
    assert worker.proc.wait(timeout=30) == 0
