"""Model sources: every kind loads, every mistake is a one-sentence `source` error."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import ModelSpec, Recipe
from onnx_studio.engine.source.describe import describe
from onnx_studio.engine.source.load import load_model
from tests.conftest import REPO

NET = textwrap.dedent('''
    import torch
    from torch import nn


    class Net(nn.Module):
        """A two-layer net."""

        def __init__(self, width: int = 4, classes: int = 3) -> None:
            super().__init__()
            self.fc1 = nn.Linear(5, width)
            self.drop = nn.Dropout(0.5)
            self.fc2 = nn.Linear(width, classes)

        def forward(self, x, mask=None):
            return self.fc2(self.drop(torch.relu(self.fc1(x))))


    class Wider(Net):
        pass


    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            raise ValueError("no weights for you")


    class NotAModel:
        def forward(self, x):
            return x


    def build_net(width: int = 4) -> nn.Module:
        """Factory."""
        return Net(width=width)


    def helper(a, b):
        return 3


    instance = Net()
''')


class PickledNet(torch.nn.Module):
    """Pickled by reference as tests.engine.test_sources.PickledNet, importable on load."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def _recipe(tmp_path: Path, source: str, **model: object) -> Recipe:
    return Recipe(model=ModelSpec(source=source, **model), base_dir=tmp_path)  # type: ignore[arg-type]


def _error(recipe: Recipe) -> StudioError:
    with pytest.raises(StudioError) as info:
        load_model(recipe)
    assert info.value.kind == "source", info.value.message
    assert "\n" not in info.value.message and "Traceback" not in info.value.message
    return info.value


@pytest.fixture
def net_file(tmp_path: Path) -> Path:
    path = tmp_path / "net.py"
    path.write_text(NET)
    return path


# ---------------------------------------------------------------------------- python sources


def test_class_with_kwargs_loads_in_eval_mode(tmp_path: Path, net_file: Path) -> None:
    loaded = load_model(_recipe(tmp_path, "net.py:Net", kwargs={"width": 7, "classes": 2}))
    assert loaded.kind == "python"
    assert loaded.exported_program is None
    assert loaded.source_file == net_file.resolve()
    assert loaded.forward_params == ["x", "mask"]
    assert loaded.module.fc1.out_features == 7 and loaded.module.fc2.out_features == 2
    assert not loaded.module.training  # dropout off: two runs agree
    x = torch.randn(3, 5)
    assert torch.equal(loaded.module(x), loaded.module(x))


def test_random_weights_are_the_same_on_every_load(tmp_path: Path, net_file: Path) -> None:
    """Without a checkpoint the weights come from the recipe's seed, so `validate` can rebuild
    the model the export used; torch's global RNG is left alone."""
    recipe = _recipe(tmp_path, "net.py:Net")
    torch.manual_seed(5)
    state = torch.get_rng_state()
    first = load_model(recipe).module.fc1.weight
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(load_model(recipe).module.fc1.weight, first)
    recipe.export.seed = 1
    assert not torch.equal(load_model(recipe).module.fc1.weight, first)


def test_factory_function_and_module_instance(tmp_path: Path, net_file: Path) -> None:
    built = load_model(_recipe(tmp_path, "net.py:build_net", kwargs={"width": 6}))
    assert built.module.fc1.out_features == 6
    assert built.forward_params == ["x", "mask"]
    instance = load_model(_recipe(tmp_path, "net.py:instance"))
    assert isinstance(instance.module, torch.nn.Module) and not instance.module.training


def test_absolute_path_and_subclass(tmp_path: Path, net_file: Path) -> None:
    loaded = load_model(_recipe(tmp_path / "elsewhere", f"{net_file}:Wider"))
    assert type(loaded.module).__name__ == "Wider"


def test_sibling_imports_work_and_sys_path_is_restored(tmp_path: Path) -> None:
    (tmp_path / "layers_for_test_a.py").write_text("SCALE = 3.0\n")
    (tmp_path / "model.py").write_text(textwrap.dedent("""
        import torch
        from layers_for_test_a import SCALE

        class Scale(torch.nn.Module):
            def forward(self, x):
                return x * SCALE
    """))
    before = list(sys.path)
    loaded = load_model(_recipe(tmp_path, "model.py:Scale"))
    assert torch.equal(loaded.module(torch.ones(2)), torch.full((2,), 3.0))
    assert sys.path == before


def test_same_named_siblings_in_two_folders_do_not_collide(tmp_path: Path) -> None:
    for folder, scale in (("a", 2.0), ("b", 5.0)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "shared_layers.py").write_text(f"SCALE = {scale}\n")
        (tmp_path / folder / "model.py").write_text(textwrap.dedent("""
            import torch
            from shared_layers import SCALE

            class Scale(torch.nn.Module):
                def forward(self, x):
                    return x * SCALE
        """))
    first = load_model(_recipe(tmp_path, "a/model.py:Scale")).module
    second = load_model(_recipe(tmp_path, "b/model.py:Scale")).module
    assert first(torch.ones(1)).item() == 2.0
    assert second(torch.ones(1)).item() == 5.0


def test_edits_are_picked_up_on_reload(tmp_path: Path) -> None:
    path = tmp_path / "edit.py"
    body = ("import torch\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
            "        return x * {}\n")
    path.write_text(body.format(2))
    assert load_model(_recipe(tmp_path, "edit.py:M")).module(torch.ones(1)).item() == 2
    path.write_text(body.format(7))
    assert load_model(_recipe(tmp_path, "edit.py:M")).module(torch.ones(1)).item() == 7


def test_single_class_file_needs_no_name(tmp_path: Path) -> None:
    (tmp_path / "one.py").write_text(
        "import torch\nclass Only(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    )
    assert type(load_model(_recipe(tmp_path, "one.py")).module).__name__ == "Only"


def test_script_true_compiles_with_torchscript(tmp_path: Path, net_file: Path) -> None:
    loaded = load_model(_recipe(tmp_path, "net.py:Net", script=True))
    assert isinstance(loaded.module, torch.jit.ScriptModule)
    assert loaded.forward_params == ["x", "mask"]


def test_script_failure_is_a_source_error(tmp_path: Path) -> None:
    (tmp_path / "dyn.py").write_text(textwrap.dedent("""
        import torch

        class Dyn(torch.nn.Module):
            def forward(self, x):
                return {1: x}[1] if x.sum() > 0 else x ** (lambda: 2)()
    """))
    err = _error(_recipe(tmp_path, "dyn.py:Dyn", script=True))
    assert "torch.jit.script failed" in err.message
    assert "script = false" in err.hint


# ---------------------------------------------------------------------------- python errors


def test_missing_file(tmp_path: Path) -> None:
    err = _error(_recipe(tmp_path, "nowhere.py:Net"))
    assert "nowhere.py" in err.message and "does not exist" in err.message


def test_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("import torch\n\nclass Net(torch.nn.Module:\n    pass\n")
    err = _error(_recipe(tmp_path, "bad.py:Net"))
    assert err.message.startswith("bad.py:3: syntax error")
    assert err.details


def test_syntax_error_in_a_sibling_module(tmp_path: Path) -> None:
    (tmp_path / "broken_sibling_mod.py").write_text("x = (\n")
    (tmp_path / "top.py").write_text("import broken_sibling_mod\nclass Net:\n    pass\n")
    err = _error(_recipe(tmp_path, "top.py:Net"))
    assert "broken_sibling_mod.py:" in err.message and "syntax error" in err.message


def test_import_error_in_model_file(tmp_path: Path) -> None:
    (tmp_path / "needs.py").write_text("import not_a_real_package_xyz\n")
    err = _error(_recipe(tmp_path, "needs.py:Net"))
    assert "ModuleNotFoundError" in err.message and "needs.py:1" in err.message
    assert "not_a_real_package_xyz" in err.details


def test_missing_class_lists_candidates(tmp_path: Path, net_file: Path) -> None:
    err = _error(_recipe(tmp_path, "net.py:Nett"))
    assert "'Nett'" in err.message
    for name in ("Net", "Wider", "Broken", "build_net"):
        assert name in err.message


def test_constructor_raising_names_the_line(tmp_path: Path, net_file: Path) -> None:
    err = _error(_recipe(tmp_path, "net.py:Broken"))
    assert "ValueError: no weights for you" in err.message
    assert "net.py:" in err.message
    assert "ValueError" in err.details


def test_bad_kwargs_show_the_signature(tmp_path: Path, net_file: Path) -> None:
    err = _error(_recipe(tmp_path, "net.py:Net", kwargs={"depth": 3}))
    assert "depth" in err.message
    assert "width: int = 4" in err.hint and "classes: int = 3" in err.hint


def test_not_a_module(tmp_path: Path, net_file: Path) -> None:
    assert "not a torch.nn.Module" in _error(_recipe(tmp_path, "net.py:NotAModel")).message
    assert "returned a int" in _error(_recipe(tmp_path, "net.py:helper",
                                              kwargs={"a": 1, "b": 2})).message


def test_kwargs_on_an_instance_are_refused(tmp_path: Path, net_file: Path) -> None:
    assert "instance" in _error(_recipe(tmp_path, "net.py:instance", kwargs={"w": 1})).message


def test_ambiguous_file_without_name(tmp_path: Path, net_file: Path) -> None:
    err = _error(_recipe(tmp_path, "net.py"))
    assert "net.py:Name" in err.hint and "Wider" in err.hint


def test_unknown_kinds_of_source(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(b"")
    assert "already an ONNX file" in _error(_recipe(tmp_path, "m.onnx")).message
    assert "Cannot tell" in _error(_recipe(tmp_path, "model.h5")).message
    assert "No model source" in _error(_recipe(tmp_path, "  ")).message
    assert "not a Python class" in _error(_recipe(tmp_path, "net.py:My-Net")).message


# ---------------------------------------------------------------------------- checkpoints


def _trained_state(width: int = 4) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {
        "fc1.weight": torch.randn(width, 5), "fc1.bias": torch.randn(width),
        "fc2.weight": torch.randn(3, width), "fc2.bias": torch.randn(3),
    }


def test_checkpoint_pt(tmp_path: Path, net_file: Path) -> None:
    state = _trained_state()
    torch.save(state, tmp_path / "w.pt")
    loaded = load_model(_recipe(tmp_path, "net.py:Net", checkpoint="w.pt"))
    assert torch.equal(loaded.module.fc1.weight, state["fc1.weight"])


def test_checkpoint_nested_and_dataparallel_prefix(tmp_path: Path, net_file: Path) -> None:
    state = {f"module.{k}": v for k, v in _trained_state().items()}
    torch.save({"state_dict": state, "epoch": 3}, tmp_path / "w.pth")
    loaded = load_model(_recipe(tmp_path, "net.py:Net", checkpoint="w.pth"))
    assert torch.equal(loaded.module.fc2.bias, _trained_state()["fc2.bias"])


def test_checkpoint_safetensors(tmp_path: Path, net_file: Path) -> None:
    from safetensors.torch import save_file

    state = _trained_state()
    save_file(state, str(tmp_path / "w.safetensors"))
    loaded = load_model(_recipe(tmp_path, "net.py:Net", checkpoint="w.safetensors"))
    assert torch.equal(loaded.module.fc2.weight, state["fc2.weight"])


def test_checkpoint_missing_and_unexpected_keys(tmp_path: Path, net_file: Path) -> None:
    state = _trained_state()
    del state["fc2.bias"]
    state["fc3.weight"] = torch.zeros(1)
    torch.save(state, tmp_path / "w.pt")
    err = _error(_recipe(tmp_path, "net.py:Net", checkpoint="w.pt"))
    assert "missing fc2.bias" in err.message and "unexpected fc3.weight" in err.message


def test_checkpoint_size_mismatch(tmp_path: Path, net_file: Path) -> None:
    torch.save(_trained_state(width=8), tmp_path / "w.pt")
    err = _error(_recipe(tmp_path, "net.py:Net", checkpoint="w.pt"))
    assert "size mismatch" in err.message and "fc1.weight" in err.message
    assert "kwargs" in err.hint


def test_checkpoint_missing_file(tmp_path: Path, net_file: Path) -> None:
    err = _error(_recipe(tmp_path, "net.py:Net", checkpoint="gone.pt"))
    assert "Checkpoint" in err.message and "gone.pt" in err.message


def test_checkpoint_holding_a_whole_model_is_refused(tmp_path: Path, net_file: Path) -> None:
    torch.save(PickledNet(), tmp_path / "whole.pt")
    err = _error(_recipe(tmp_path, "net.py:Net", checkpoint="whole.pt"))
    assert "whole.pt" in err.message and "weights_only" in err.hint


# ---------------------------------------------------------------------------- saved modules


def test_exported_program_pt2(tmp_path: Path) -> None:
    model = PickledNet().eval()
    x = torch.randn(2, 5)
    torch.export.save(torch.export.export(model, (x,)), str(tmp_path / "m.pt2"))
    loaded = load_model(_recipe(tmp_path, "m.pt2"))
    assert loaded.kind == "exported_program"
    assert loaded.exported_program is not None
    assert loaded.forward_params == ["x"]
    assert torch.allclose(loaded.module(x), model(x))
    assert describe("m.pt2", tmp_path).forward_params == ["x"]  # read without torch.load


def test_broken_pt2_and_checkpoint_on_pt2(tmp_path: Path) -> None:
    (tmp_path / "junk.pt2").write_bytes(b"not a zip")
    assert "not a readable ExportedProgram" in _error(_recipe(tmp_path, "junk.pt2")).message
    assert "checkpoint" in _error(_recipe(tmp_path, "junk.pt2", checkpoint="w.pt")).message


def test_torchscript_pt(tmp_path: Path) -> None:
    model = PickledNet().eval()
    torch.jit.script(model).save(str(tmp_path / "scripted.pt"))
    loaded = load_model(_recipe(tmp_path, "scripted.pt"))
    assert loaded.kind == "torchscript"
    assert isinstance(loaded.module, torch.jit.ScriptModule)
    assert loaded.forward_params == ["x"]
    x = torch.randn(2, 5)
    assert torch.allclose(loaded.module(x), model(x))


def test_pickled_module_needs_trust(tmp_path: Path) -> None:
    torch.save(PickledNet(), tmp_path / "whole.pt")
    err = _error(_recipe(tmp_path, "whole.pt"))
    assert "pickled" in err.message and "runs code" in err.message
    assert "trust_pickle = true" in err.hint and "only if you trust" in err.hint


def test_pickled_module_with_trust(tmp_path: Path) -> None:
    model = PickledNet()
    torch.save(model, tmp_path / "whole.pth")
    loaded = load_model(_recipe(tmp_path, "whole.pth", trust_pickle=True))
    assert loaded.kind == "pickle"
    assert not loaded.module.training
    assert torch.equal(loaded.module.fc.weight, model.fc.weight)


def test_state_dict_given_as_model(tmp_path: Path) -> None:
    torch.save(_trained_state(), tmp_path / "weights.pt")
    err = _error(_recipe(tmp_path, "weights.pt", trust_pickle=True))
    assert "state_dict" in err.message and "checkpoint" in err.hint


def test_missing_pt(tmp_path: Path) -> None:
    assert "does not exist" in _error(_recipe(tmp_path, "nothing.pt")).message


# ---------------------------------------------------------------------------- examples, vision


def test_example_source(tmp_path: Path) -> None:
    loaded = load_model(_recipe(tmp_path, "example:lstm", kwargs={"layer_count": 1}))
    assert loaded.kind == "example"
    assert loaded.forward_params == ["input", "h0", "c0"]
    assert loaded.source_file is not None and loaded.source_file.name == "lstm.py"
    assert loaded.module.lstm.num_layers == 1


def test_unknown_example_lists_the_examples(tmp_path: Path) -> None:
    err = _error(_recipe(tmp_path, "example:alexnett"))
    assert "alexnett" in err.message and "alexnet" in err.hint and "lstm" in err.hint


def test_torchvision_absent_is_a_clear_error(tmp_path: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("torchvision") is not None:
        pytest.skip("torchvision is installed here")
    err = _error(_recipe(tmp_path, "torchvision:resnet18"))
    assert "torchvision is not installed" in err.message
    assert "example:alexnet" in err.hint
    assert describe("torchvision:resnet18", tmp_path).error


def test_torchvision_model_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("torchvision")
    loaded = load_model(_recipe(tmp_path, "torchvision:resnet18", kwargs={"num_classes": 4}))
    assert loaded.kind == "torchvision"
    assert loaded.module(torch.randn(1, 3, 64, 64)).shape == (1, 4)


def test_missing_cuda_fails_before_loading(tmp_path: Path) -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA is present")
    with pytest.raises(StudioError) as info:
        load_model(_recipe(tmp_path, "nowhere.py:Net"), device="cuda")
    assert info.value.kind == "inputs"
    assert info.value.message == 'CUDA is not available on this machine; set device = "cpu".'


# ---------------------------------------------------------------------------- describe


def test_describe_python_file(tmp_path: Path, net_file: Path) -> None:
    desc = describe("net.py", tmp_path)
    assert desc.kind == "python" and desc.error is None
    by_name = {c.name: c for c in desc.candidates}
    assert [c.name for c in desc.candidates][:3] == ["Net", "Wider", "Broken"]
    assert "NotAModel" in by_name  # has a forward, so it is offered
    assert by_name["Net"].params == ["x", "mask"] and by_name["Net"].doc == "A two-layer net."
    assert by_name["Wider"].params == ["x", "mask"]  # inherited forward
    assert by_name["build_net"].kind == "factory" and by_name["build_net"].params == ["width"]
    names = [c.name for c in desc.candidates]
    assert names.index("build_net") < names.index("helper")  # model-looking factories first
    assert desc.forward_params == ["x", "mask"]


def test_describe_named_candidates(tmp_path: Path, net_file: Path) -> None:
    assert describe("net.py:Wider", tmp_path).forward_params == ["x", "mask"]
    assert describe("net.py:build_net", tmp_path).forward_params == ["x", "mask"]
    missing = describe("net.py:Nope", tmp_path)
    assert missing.error is not None and "Nope" in missing.error and "Net" in missing.error


def test_describe_runs_no_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\nclass M:\n    def forward(self, a, b):\n"
        "        return a\n"
    )
    desc = describe("evil.py", tmp_path)
    assert desc.forward_params == ["a", "b"]
    assert not marker.exists()


def test_describe_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def f(:\n")
    assert describe("bad.py", tmp_path).error == "bad.py:1: syntax error: invalid syntax."
    assert "does not exist" in (describe("gone.py:X", tmp_path).error or "")
    assert describe("example:nope", tmp_path).error
    assert describe("", tmp_path).error


def test_describe_saved_files(tmp_path: Path) -> None:
    torch.jit.script(PickledNet()).save(str(tmp_path / "s.pt"))
    torch.save(PickledNet(), tmp_path / "p.pt")
    (tmp_path / "e.pt2").write_bytes(b"")
    assert describe("s.pt", tmp_path).kind == "torchscript"
    assert describe("p.pt", tmp_path).kind == "pickle"
    assert describe("e.pt2", tmp_path).kind == "exported_program"


def test_describe_example(tmp_path: Path) -> None:
    desc = describe("example:loop_scripted", tmp_path)
    assert desc.kind == "example" and desc.forward_params == ["x", "y"]


def test_describe_works_without_torch(tmp_path: Path, net_file: Path) -> None:
    """The window calls describe; it must not need (or import) torch."""
    code = textwrap.dedent(f"""
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] == 'torch':
                    raise ImportError('blocked: ' + name)
        sys.meta_path.insert(0, Block())
        from pathlib import Path
        from onnx_studio.engine.source.describe import describe
        d = describe('net.py:Net', Path({str(tmp_path)!r}))
        assert d.forward_params == ['x', 'mask'], d
        assert describe('example:alexnet', Path('.')).forward_params == ['x']
        assert 'torch' not in sys.modules
        print('ok')
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr
