"""engine.codegen: the generated script runs on its own and writes the same kind of file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from engine import codegen
from engine import recipe as recipes

NET = '''
import torch


class Net(torch.nn.Module):
    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, hidden)

    def forward(self, x, mask):
        return torch.relu(self.fc(x)) * mask
'''

RECIPE = '''version = 1
[model]
source = "net.py:Net"
kwargs = {{ hidden = 6 }}
[[inputs]]
name = "x"
shape = [2, 4]
dynamic = {{ 0 = "batch" }}
[[inputs]]
name = "mask"
shape = [2, 6]
fill = "ones"
dynamic = {{ 0 = "batch" }}
[[outputs]]
name = "y"
dynamic = {{ 0 = "batch" }}
[export]
output = "out/{name}.onnx"
exporter = "{exporter}"
{extra}
'''


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    # Run from another folder: the script must not depend on the working directory.
    env = {**os.environ, "PYTHONPATH": ""}
    return subprocess.run([sys.executable, str(script)], cwd="/", env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("exporter,extra", [
    ("dynamo", "opset = 18"),
    ("torchscript", 'opset = 17\ndo_constant_folding = false\ntraining = "eval"'),
])
def test_generated_script_exports(tmp_path: Path, exporter: str, extra: str) -> None:
    (tmp_path / "net.py").write_text(NET, encoding="utf-8")
    recipe = recipes.loads(RECIPE.format(name=exporter, exporter=exporter, extra=extra),
                           base_dir=tmp_path)
    code = codegen.generate(recipe)
    compile(code, "generated.py", "exec")
    script = tmp_path / "elsewhere" / "export_model.py"
    script.parent.mkdir()
    script.write_text(code, encoding="utf-8")
    result = _run(script)
    assert result.returncode == 0, result.stderr[-3000:]
    output = tmp_path / "out" / f"{exporter}.onnx"
    model = onnx.load(str(output))
    onnx.checker.check_model(model)
    assert [i.name for i in model.graph.input] == ["x", "mask"]
    assert [o.name for o in model.graph.output] == ["y"]
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert not batch.HasField("dim_value"), "the batch axis stays dynamic"
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    assert opset == (18 if exporter == "dynamo" else 17)


def test_script_reflects_every_option(tmp_path: Path) -> None:
    recipe = recipes.loads(RECIPE.format(
        name="x", exporter="torchscript",
        extra='operator_export_type = "ONNX_ATEN_FALLBACK"\ntraining = "preserve"\n'
              'custom_opsets = { my_domain = 2 }\nextensions = ["sym.py"]\n'
              'export_params = false\nkeep_initializers_as_inputs = true\nseed = 7'),
        base_dir=tmp_path)
    recipe.model.checkpoint = "weights.safetensors"
    code = codegen.generate(recipe)
    for piece in ("operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK",
                  "training=torch.onnx.TrainingMode.PRESERVE", "custom_opsets={'my_domain': 2}",
                  "runpy.run_path(str(BASE / 'sym.py'))", "export_params=False",
                  "keep_initializers_as_inputs=True", "torch.manual_seed(7)",
                  "load_file(str(BASE / 'weights.safetensors'))", "dynamic_axes = ",
                  "dynamo=False", "'y': {0: 'batch'}"):
        assert piece in code, piece
    assert "model.eval()" not in code, "preserve keeps the loaded mode"


def test_example_and_exported_program_sources(tmp_path: Path) -> None:
    recipe = recipes.loads('version = 1\n[model]\nsource = "example:alexnet"\n'
                           '[[inputs]]\nname = "x"\nshape = [1, 3, 224, 224]\n',
                           base_dir=tmp_path)
    assert "EXAMPLES['alexnet'].build()" in codegen.generate(recipe)
    recipe.model.source = "prog.pt2"
    assert "torch.export.load(str(BASE / 'prog.pt2')).module()" in codegen.generate(recipe)
    recipe.model.source = "/abs/scripted.pt"
    assert "torch.jit.load('/abs/scripted.pt'" in codegen.generate(recipe)
