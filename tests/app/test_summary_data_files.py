"""The Summary of a Hugging Face folder export lists each file with the data files it reads
(issue 24, 8), from the export document's `files[].data_files`."""

from __future__ import annotations

from pathlib import Path

from onnx_studio.app.jobs import JobRunner
from onnx_studio.app.outcomes import ExportOutcome, Stamp
from onnx_studio.app.results.summary import SummaryView
from onnx_studio.app.session import ExportSession
from onnx_studio.engine.protocol import ExportReport, ExportResult


def test_the_summary_lists_each_files_data_files(qapp, tmp_path: Path) -> None:
    runner = JobRunner()  # never started: the view only reads the session's export
    session = ExportSession(runner=runner)
    view = SummaryView(session)
    graph = {"nodes": 12, "inputs": [], "outputs": []}
    report = {"ok": True, "output": str(tmp_path), "exporter": "dynamo", "opset": 18,
              "task": "text2text-generation-with-past", "graph": graph,
              "files": [{"name": "encoder_model.onnx", "path": str(tmp_path / "e"),
                         "graph": graph, "data_files": ["encoder_model.onnx.data"]},
                        {"name": "decoder_model.onnx", "path": str(tmp_path / "d"),
                         "graph": graph, "data_files": []}]}
    final = ExportResult(id=1, report=ExportReport.from_dict(report), job_dir=str(tmp_path))
    stamp = Stamp(recipe="", export="", run="", onnx=None)
    session.results.set_export(ExportOutcome(1, final, stamp, 0.1, validates=False), "")
    facts = view.facts.toPlainText()
    assert "encoder_model.onnx 12 nodes, data: encoder_model.onnx.data" in facts
    assert "decoder_model.onnx 12 nodes" in facts
    assert "decoder_model.onnx 12 nodes, data" not in facts
    session.shutdown()
    runner.deleteLater()
