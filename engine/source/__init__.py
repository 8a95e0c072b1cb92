"""Model sources: what a recipe's [model] names, described without running it (`source.describe`),
loaded into a callable module (`load_model`, where user code runs), and the example inputs
it takes (`make_inputs`). The built-in examples live in `engine.source.examples`."""

from engine.source.device import check_device
from engine.source.inputs import make_inputs
from engine.source.load import LoadedModel, load_model

__all__ = ["LoadedModel", "check_device", "load_model", "make_inputs"]
