"""onnx_studio.engine.export.codegen: the generated script runs on its own and makes the studio's
export.

Each script runs in a subprocess from another folder; its ONNX file is checked, run in ONNX Runtime
on the studio's own inputs (onnx_studio.engine.source.inputs.make_inputs) and compared with the
studio's own model (onnx_studio.engine.source.load.load_model): same seed, same weights, same
inputs, same numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from onnx_studio.engine import recipe as recipes
from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.export import codegen
from onnx_studio.engine.source import load as sources
from onnx_studio.engine.source.inputs import make_inputs
from tests.conftest import REPO

NET = '''
import torch


class Net(torch.nn.Module):
    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, hidden)

    def forward(self, x, mask):
        return torch.relu(self.fc(x)) * mask


def make_net(hidden: int = 8, scale: float = 1.0) -> torch.nn.Module:
    net = Net(hidden)
    with torch.no_grad():
        net.fc.weight.mul_(scale)
    return net
'''

EMBED = '''
import torch


class Tagger(torch.nn.Module):
    """Token ids in, scores out: the int64 input must hold valid indices (0..9)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(10, 3)
        self.head = torch.nn.Linear(3, 2)

    def forward(self, tokens):
        return self.head(self.embed(tokens))
'''

TWO_INPUTS = '''
[[inputs]]
name = "x"
shape = [2, 4]
dynamic = { 0 = "batch" }
[[inputs]]
name = "mask"
shape = [2, 6]
fill = "ones"
dynamic = { 0 = "batch" }
[[outputs]]
name = "y"
dynamic = { 0 = "batch" }
'''

ONE_INPUT = '''
[[inputs]]
name = "x"
shape = [3, 4]
[[outputs]]
name = "y"
'''


def _write_net(tmp: Path) -> None:
    (tmp / "net.py").write_text(NET, encoding="utf-8")


def _write_program(tmp: Path) -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.Tanh()).eval()
    program = torch.export.export(model, (torch.randn(3, 4),))
    torch.export.save(program, str(tmp / "prog.pt2"))


def _write_pickle(tmp: Path) -> None:
    # Built-in layers only, so the unpickling subprocess can import every class.
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU())
    torch.save(model, str(tmp / "whole.pkl"))


def _write_embed(tmp: Path) -> None:
    (tmp / "tagger.py").write_text(EMBED, encoding="utf-8")


# (id, setup, [model] table, inputs/outputs, [export] table, expected input names)
CASES: list[tuple[str, Callable[[Path], None], str, str, str, list[str]]] = [
    ("py-class", _write_net, 'source = "net.py:Net"\nkwargs = { hidden = 6 }', TWO_INPUTS,
     'exporter = "dynamo"\nopset = 18', ["x", "mask"]),
    ("py-factory-kwargs", _write_net,
     'source = "net.py:make_net"\nkwargs = { hidden = 6, scale = 0.5 }', TWO_INPUTS,
     'exporter = "torchscript"\nopset = 17\ndo_constant_folding = false', ["x", "mask"]),
    ("pt2-dynamo", _write_program, 'source = "prog.pt2"', ONE_INPUT,
     'exporter = "dynamo"\ntraining = "eval"', ["x"]),
    ("pt2-torchscript", _write_program, 'source = "prog.pt2"', ONE_INPUT,
     'exporter = "torchscript"\ntraining = "train"', ["x"]),
    ("pickle-trusted", _write_pickle, 'source = "whole.pkl"\ntrust_pickle = true', ONE_INPUT,
     'exporter = "torchscript"', ["x"]),
    ("example-kwargs", lambda tmp: None,
     'source = "example:lstm"\nkwargs = { input_size = 4, hidden_size = 3, layer_count = 1, '
     'bidirectional = false }',
     '[[inputs]]\nname = "input"\nshape = [5, 2, 4]\ndynamic = { 0 = "sequence" }\n'
     '[[inputs]]\nname = "h0"\nshape = [1, 2, 3]\n[[inputs]]\nname = "c0"\nshape = [1, 2, 3]\n'
     '[[outputs]]\nname = "output"\ndynamic = { 0 = "sequence" }\n'
     '[[outputs]]\nname = "hn"\n[[outputs]]\nname = "cn"\n',
     'exporter = "torchscript"', ["input", "h0", "c0"]),
    # A bare .py: the file's only model class, the rule load_model applies.
    ("int64-embedding", _write_embed, 'source = "tagger.py"',
     '[[inputs]]\nname = "tokens"\nshape = [2, 7]\ndtype = "int64"\nfill = "randn"\n'
     '[[outputs]]\nname = "scores"\n', 'exporter = "torchscript"\nseed = 3', ["tokens"]),
]


def _recipe(tmp: Path, model: str, io: str, export: str, name: str) -> recipes.Recipe:
    text = (f'version = 1\n[model]\n{model}\n{io}\n[export]\noutput = "out/{name}.onnx"\n'
            f'{export}\n')
    return recipes.loads(text, base_dir=tmp)


def _run(script: Path, with_studio: bool) -> subprocess.CompletedProcess[str]:
    # Run from another folder: the script must not depend on the working directory. Only the
    # example: source needs the studio's package importable.
    env = {**os.environ, "PYTHONPATH": str(REPO) if with_studio else ""}
    return subprocess.run([sys.executable, str(script)], cwd="/", env=env,
                          capture_output=True, text=True, timeout=100)


SLOW_CASES = {"pt2-dynamo"}  # over 10 s


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c[0], marks=[pytest.mark.slow] if c[0] in SLOW_CASES else [])
    for c in CASES])
def test_generated_script_exports_what_the_studio_would(
        tmp_path: Path, case: tuple[str, Callable[[Path], None], str, str, str, list[str]]
) -> None:
    name, setup, model, io, export, input_names = case
    setup(tmp_path)
    recipe = _recipe(tmp_path, model, io, export, name)
    code = codegen.generate(recipe)
    compile(code, "generated.py", "exec")
    script = tmp_path / "elsewhere" / "export_model.py"
    script.parent.mkdir()
    script.write_text(code, encoding="utf-8")
    result = _run(script, with_studio=name.startswith("example"))
    assert result.returncode == 0, result.stderr[-3000:]

    output = tmp_path / "out" / f"{name}.onnx"
    onnx_model = onnx.load(str(output))
    onnx.checker.check_model(onnx_model, full_check=True)
    assert [i.name for i in onnx_model.graph.input] == input_names
    if recipe.outputs:
        assert [o.name for o in onnx_model.graph.output] == [o.name for o in recipe.outputs]
    opset = next(o.version for o in onnx_model.opset_import if o.domain in ("", "ai.onnx"))
    if recipe.export.opset is not None:
        assert opset == recipe.export.opset
    for spec, value in zip(recipe.inputs, onnx_model.graph.input, strict=True):
        dims = value.type.tensor_type.shape.dim
        for axis in spec.dynamic:
            assert not dims[axis].HasField("dim_value"), f"{spec.name} axis {axis} stays dynamic"

    # The studio's model on the studio's inputs gives what ONNX Runtime computes from the file.
    loaded = sources.load_model(recipe)
    args = make_inputs(recipe)
    with torch.no_grad():
        expected = loaded.module(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    session = ort.InferenceSession(str(output), providers=["CPUExecutionProvider"])
    feeds = {i.name: a.numpy() for i, a in zip(session.get_inputs(), args, strict=True)}
    got = session.run(None, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e.numpy(), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------- inputs

FILLS = '''
[[inputs]]
name = "a"
shape = [3, 4]
[[inputs]]
name = "b"
shape = [5]
dtype = "float16"
fill = "rand"
low = -2
high = 3
[[inputs]]
name = "ids"
shape = [2, 6]
dtype = "int64"
fill = "randn"
[[inputs]]
name = "i32"
shape = [4]
dtype = "int"
fill = "rand"
[[inputs]]
name = "u8"
shape = [9]
dtype = "uint8"
fill = "randint"
low = 100
high = 200
[[inputs]]
name = "flags"
shape = [2, 3]
dtype = "bool"
fill = "randn"
[[inputs]]
name = "counts"
shape = [4]
dtype = "float32"
fill = "randint"
low = -3
high = 3
[[inputs]]
name = "z"
shape = [2]
dtype = "complex64"
fill = "randn"
[[inputs]]
name = "seven"
shape = [2]
dtype = "int8"
fill = "full"
value = 7
[[inputs]]
name = "on"
shape = [2]
dtype = "bool"
fill = "full"
value = 1
[[inputs]]
name = "halfs"
shape = [3]
dtype = "double"
fill = "full"
value = 0.5
[[inputs]]
name = "zero"
shape = [2, 2]
dtype = "int32"
fill = "zeros"
[[inputs]]
name = "one"
shape = []
fill = "ones"
[[inputs]]
name = "from_npy"
shape = []
dtype = "float64"
fill = "file"
file = "x.npy"
[[inputs]]
name = "from_pt"
shape = []
dtype = "int64"
fill = "file"
file = "data/t.pt"
'''


@pytest.mark.parametrize("seed", [0, 11])
def test_script_inputs_are_the_studios_inputs(tmp_path: Path, seed: int) -> None:
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3).T)  # F-order
    (tmp_path / "data").mkdir()
    torch.save(torch.tensor([[1, 2], [3, 4]], dtype=torch.int32), tmp_path / "data" / "t.pt")
    recipe = recipes.loads(f"version = 1\n[model]\nsource = \"example:unbind\"\n{FILLS}\n"
                           f"[export]\nseed = {seed}\n", base_dir=tmp_path)
    _, lines = codegen._input_lines(recipe)
    namespace: dict[str, object] = {"torch": torch, "np": np, "BASE": tmp_path}
    exec("\n".join(lines), namespace)  # the generated code under test
    got = namespace["args"]
    assert isinstance(got, tuple)
    want = make_inputs(recipe)
    assert len(got) == len(want)
    for spec, g, w in zip(recipe.inputs, got, want, strict=True):
        assert g.dtype == w.dtype, spec.name
        assert torch.equal(g, w), spec.name
    ids = got[2]
    assert ids.dtype == torch.int64 and int(ids.min()) >= 0 and int(ids.max()) < 10, \
        "integers drawn for randn are indices 0..9, never negative"
    assert int(got[4].min()) >= 100 and int(got[4].max()) < 200


def test_integer_fills_use_randint_not_a_cast(tmp_path: Path) -> None:
    recipe = recipes.loads('version = 1\n[model]\nsource = "example:unbind"\n'
                           '[[inputs]]\nname = "ids"\nshape = [2, 6]\ndtype = "long"\n'
                           '[[inputs]]\nname = "m"\nshape = [2]\ndtype = "bool"\nfill = "rand"\n',
                           base_dir=tmp_path)
    code = codegen.generate(recipe)
    assert "torch.randint(0, 10, [2, 6], generator=generator, dtype=torch.int64)" in code
    assert "torch.randint(0, 2, [2], generator=generator).bool()" in code
    assert "torch.Generator().manual_seed(0)" in code
    assert ".to(torch.int64)" not in code and ".to(torch.bool)" not in code


# ---------------------------------------------------------------------------- sources


def _src(tmp: Path, source: str, extra: str = "", export: str = "") -> recipes.Recipe:
    return recipes.loads(f'version = 1\n[model]\nsource = "{source}"\n{extra}\n'
                         f'[[inputs]]\nname = "x"\nshape = [3, 4]\n[export]\n{export}\n',
                         base_dir=tmp)


def test_exported_program_is_exported_itself_and_never_switched(tmp_path: Path) -> None:
    for training in ("eval", "train", "preserve"):
        code = codegen.generate(_src(tmp_path, "prog.pt2",
                                     export=f'exporter = "dynamo"\ntraining = "{training}"'))
        assert "program = torch.export.load(str(BASE / 'prog.pt2'))" in code
        assert "    program,\n    args," in code, "dynamo gets the ExportedProgram itself"
        assert "program.module()" not in code
        assert "model.eval()" not in code and "model.train()" not in code
        code = codegen.generate(_src(tmp_path, "prog.pt2",
                                     export=f'exporter = "torchscript"\ntraining = "{training}"'))
        assert "model = program.module()" in code
        assert "training=torch.onnx.TrainingMode.PRESERVE" in code, training
        assert ".eval()" not in code and ".train()" not in code
    with pytest.raises(StudioError, match="checkpoint cannot be applied"):
        codegen.generate(_src(tmp_path, "prog.pt2", 'checkpoint = "w.pt"'))


def test_saved_modules_by_what_the_file_holds(tmp_path: Path) -> None:
    scripted = torch.jit.script(torch.nn.Linear(4, 2))
    torch.jit.save(scripted, str(tmp_path / "scripted.pt"))
    for suffix in (".pkl", ".bin", ".pth"):
        torch.save(torch.nn.Linear(4, 2), str(tmp_path / f"whole{suffix}"))
    code = codegen.generate(_src(tmp_path, "scripted.pt", "script = true"))
    assert "model = torch.jit.load(str(BASE / 'scripted.pt'), map_location='cpu')" in code
    assert "torch.jit.script" not in code, "a TorchScript archive is not scripted again"
    for suffix in (".pkl", ".bin", ".pth"):
        code = codegen.generate(_src(tmp_path, f"whole{suffix}", "trust_pickle = true"))
        assert (f"model = torch.load(str(BASE / 'whole{suffix}'), map_location='cpu', "
                "weights_only=False)") in code, suffix
        assert "importlib" not in code and "user_model" not in code, suffix
        with pytest.raises(StudioError, match="trust_pickle = true") as info:
            codegen.generate(_src(tmp_path, f"whole{suffix}"))
        assert info.value.kind == "source"
    with pytest.raises(StudioError, match="kwargs only apply"):
        codegen.generate(_src(tmp_path, "scripted.pt", "kwargs = { a = 1 }"))
    # Not on disk (yet): TorchScript, the kind describe() reports, so no trust is demanded.
    assert "torch.jit.load('/abs/scripted.pt'" in codegen.generate(
        _src(tmp_path, "/abs/scripted.pt"))


def test_python_sources_name_rule_and_kwargs(tmp_path: Path) -> None:
    _write_net(tmp_path)
    code = codegen.generate(_src(tmp_path, "net.py", "kwargs = { hidden = 6 }"))
    assert "model = user_model.Net(hidden=6)" in code, "bare .py: the file's only class"
    code = codegen.generate(_src(tmp_path, "net.py:make_net", "kwargs = { scale = 0.5 }"))
    assert "model = user_model.make_net(scale=0.5)" in code
    (tmp_path / "inst.py").write_text("import torch\nmodel = torch.nn.Linear(4, 2)\n",
                                      encoding="utf-8")
    code = codegen.generate(_src(tmp_path, "inst.py:model"))
    assert "model = user_model.model\nif not isinstance(model, torch.nn.Module):" in code, \
        "a module instance is used, not called"
    ns: dict[str, object] = {"torch": torch, "BASE": tmp_path}
    model_part = code.split("# The model", 1)[1].split("# Example inputs", 1)[0]
    try:
        exec("import sys, importlib.util\nfrom pathlib import Path\n" + model_part, ns)
    finally:  # the generated lines register the module and its folder: undo that here
        sys.modules.pop("user_model", None)
        if str(tmp_path) in sys.path:
            sys.path.remove(str(tmp_path))
    assert isinstance(ns["model"], torch.nn.Linear)
    (tmp_path / "two.py").write_text("import torch\nclass A(torch.nn.Module): pass\n"
                                     "class B(torch.nn.Module): pass\n", encoding="utf-8")
    with pytest.raises(StudioError, match="does not say which model"):
        codegen.generate(_src(tmp_path, "two.py"))
    with pytest.raises(StudioError, match="already an ONNX file"):
        codegen.generate(_src(tmp_path, "model.onnx"))
    with pytest.raises(StudioError, match="not a Python class or function name"):
        codegen.generate(_src(tmp_path, "net.py:1bad"))


def test_example_and_torchvision_keep_kwargs(tmp_path: Path) -> None:
    code = codegen.generate(_src(tmp_path, "example:alexnet", "kwargs = { num_classes = 7 }"))
    assert "model = EXAMPLES['alexnet'].build(num_classes=7)" in code
    assert "EXAMPLES['unbind'].build()" in codegen.generate(_src(tmp_path, "example:unbind"))
    code = codegen.generate(_src(tmp_path, "torchvision:resnet18", "kwargs = { num_classes = 3 }"))
    assert "torchvision.models.get_model('resnet18', weights=weights, num_classes=3)" in code
    compile(code, "generated.py", "exec")
    code = codegen.generate(_src(tmp_path, "timm:resnet10t", "kwargs = { num_classes = 3 }"))
    assert "import timm" in code
    assert "timm.create_model('resnet10t', pretrained=False, num_classes=3)" in code
    compile(code, "generated.py", "exec")


def test_training_modes_match_the_studio(tmp_path: Path) -> None:
    _write_net(tmp_path)

    def code_for(training: str) -> str:
        return codegen.generate(_src(tmp_path, "net.py:Net", "script = true",
                                     f'exporter = "torchscript"\ntraining = "{training}"'))

    # load_model puts the module in eval mode except for "preserve" (the module keeps its own
    # mode); export then calls train(True) only for "train".
    for training, mode in (("eval", "EVAL"), ("preserve", "PRESERVE"), ("train", "TRAINING")):
        code = code_for(training)
        assert f"training=torch.onnx.TrainingMode.{mode}" in code
        assert ("model.eval()" in code) == (training != "preserve")
        if training != "preserve":
            assert code.index("model.eval()") < code.index("model = torch.jit.script(model)")
        assert ("model.train()" in code) == (training == "train")
        if training == "train":
            assert code.index("model.train()") > code.index("torch.jit.script")


def test_script_reflects_every_option(tmp_path: Path) -> None:
    _write_net(tmp_path)
    recipe = recipes.loads(
        'version = 1\n[model]\nsource = "net.py:Net"\ncheckpoint = "weights.safetensors"\n'
        + TWO_INPUTS + '[export]\nexporter = "torchscript"\n'
        'operator_export_type = "ONNX_ATEN_FALLBACK"\ntraining = "preserve"\n'
        'custom_opsets = { my_domain = 2 }\nextensions = ["sym.py"]\n'
        'export_params = false\nkeep_initializers_as_inputs = true\nseed = 7\n',
        base_dir=tmp_path)
    code = codegen.generate(recipe)
    for piece in ("operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK",
                  "training=torch.onnx.TrainingMode.PRESERVE", "custom_opsets={'my_domain': 2}",
                  "runpy.run_path(str(BASE / 'sym.py'), run_name='onnx_studio_extension_sym')",
                  "export_params=False", "keep_initializers_as_inputs=True",
                  "torch.manual_seed(7)", "torch.Generator().manual_seed(7)",
                  "load_file(str(BASE / 'weights.safetensors'), device='cpu')",
                  "dynamic_axes = ", "dynamo=False", "'y': {0: 'batch'}"):
        assert piece in code, piece
    assert code.index("runpy.run_path") < code.index("# The model"), "extensions run first"
    recipe.export.exporter = "dynamo"
    recipe.inputs[0].dynamic = {-2: "batch"}
    code = codegen.generate(recipe)
    assert "dynamic_shapes = ({0: dims['batch']}, {0: dims['batch']})" in code
    assert "custom_translation_table=custom_translation_table or None" in code
    assert "external_data=False" in code
    recipe.export.external_data = "always"
    assert "external_data=True" in codegen.generate(recipe)


def test_the_script_names_the_exporter_auto_resolves_to(tmp_path: Path) -> None:
    (tmp_path / "net.py").write_text("import torch\n\n\nclass Net(torch.nn.Linear):\n"
                                     "    def __init__(self):\n        super().__init__(4, 2)\n")
    recipe = recipes.Recipe(base_dir=tmp_path)
    recipe.model.source = "net.py:Net"
    recipe.inputs = [recipes.InputSpec(name="x", shape=[2, 4])]
    assert recipe.export.exporter == "auto"
    assert "dynamo=True" in codegen.generate(recipe)
    recipe.model.script = True
    assert "dynamo=False" in codegen.generate(recipe)


def _document(*command: str) -> tuple[int, dict]:
    """Run `command` from another folder with this checkout importable: (exit status, the JSON
    document its last standard output line holds)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(list(command), cwd="/", env=env, capture_output=True, text=True,
                          timeout=280)
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr[-3000:]
    return done.returncode, json.loads(lines[-1])


def _verdict(doc: dict) -> tuple:
    """What the script and the CLI must agree on: the outcome, the files, the verdict and the
    names of the outputs checked."""
    validation = doc["validation"] or {}
    return (doc["ok"], doc["error"], doc["output"],
            sorted(f["path"] for f in doc.get("files") or []), validation.get("ok"),
            [o["name"] for o in validation.get("outputs", [])],
            [o["name"] for o in (doc["graph"] or {}).get("outputs", [])])


@pytest.mark.slow  # a tiny BERT traced and validated twice, a module recipe twice
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["module", "hf"])
def test_the_python_tab_s_code_does_what_the_cli_does(tmp_path: Path, kind: str) -> None:
    """The Python tab's script, run on its own, answers with the CLI's document for the same
    recipe (`onnx-studio export --recipe R --json`): the same outcome, files, verdict and
    output names; its code imports onnx_studio's public API, never the engine's modules."""
    if kind == "module":
        _write_net(tmp_path)
        text = (f'version = 1\n[model]\nsource = "net.py:Net"\nkwargs = {{ hidden = 6 }}\n'
                f'{TWO_INPUTS}\n[export]\noutput = "out/net.onnx"\nopset = 18\n'
                '[validate]\nenabled = true\n')
    else:
        from tests.engine.hf_tiny import build

        folder = build("bert", tmp_path / "models")
        # traced by TorchScript: what is tried is the script against the CLI, not the
        # exporter (the window's and the CLI's Hugging Face exports try dynamo)
        text = (f'version = 1\n[model]\nsource = "hf:{folder}"\n'
                'kwargs = { task = "feature-extraction" }\n'
                '[export]\noutput = "out/bert_onnx"\nopset = 18\nexporter = "torchscript"\n'
                '[validate]\nenabled = true\n')
    path = tmp_path / "recipe.toml"
    path.write_text(text, encoding="utf-8")
    code = codegen.generate(recipes.load(path))
    assert "import onnx_studio" in code and "onnx_studio.engine" not in code, code
    assert "from engine" not in code and "import engine" not in code
    script = tmp_path / "elsewhere" / "export_model.py"
    script.parent.mkdir()
    script.write_text(code, encoding="utf-8")
    cli_status, cli = _document(sys.executable, "-m", "onnx_studio", "export", "--recipe",
                                str(path), "--json")
    assert cli_status == 0 and cli["ok"], cli["error"]
    assert cli["validation"] and cli["validation"]["ok"]
    status, doc = _document(sys.executable, str(script))
    assert status == cli_status
    assert _verdict(doc) == _verdict(cli)
