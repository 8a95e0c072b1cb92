"""The Validation tab: does the ONNX file compute what the PyTorch model computes?

Owns the view of one validation (`ValidationTab`: verdict, worst numbers per output, trials),
its parity plots (`ParityPlots`, pyqtgraph loaded on first draw), its per-node errors
(`NodesPanel`, which can colour the Graph tab) and the number formats and pass/fail colours
they share (`common`). The session runs the validations; the tab shows the session's.
"""

from onnx_studio.app.validation.common import texts
from onnx_studio.app.validation.nodes import NodesPanel
from onnx_studio.app.validation.plots import ParityPlots
from onnx_studio.app.validation.tab import ValidationTab

__all__ = ["NodesPanel", "ParityPlots", "ValidationTab", "texts"]
