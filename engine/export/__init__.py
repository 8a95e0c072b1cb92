"""Export: a loaded model converted to ONNX by either exporter, checked against the request
and written atomically (`export_model`); the diagnoses of what could not convert; the
equivalent stand-alone script (`codegen.generate`)."""

from engine.export.exporter import export_model, exporter_opsets, torchscript_default_opset

__all__ = ["export_model", "exporter_opsets", "torchscript_default_opset"]
