"""Recipe -> a standalone Python script that makes the same export with `torch.onnx.export`.

The script is what a user would have written by hand; the window shows it in the Python tab so
an export made by clicking can move into a build script. Only the `example:` source needs this
package at run time. No torch import here: the GUI calls this function.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

from engine.recipe import InputSpec, OutputSpec, Recipe

_TRAINING = {"eval": "EVAL", "preserve": "PRESERVE", "train": "TRAINING"}
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16",
                  "short": "int16", "int": "int32", "long": "int64"}


def _py(value: Any) -> str:
    """A Python literal for a TOML value (repr is exact for str/int/float/bool/list/dict)."""
    return repr(value)


def _dtype(name: str) -> str:
    return f"torch.{_DTYPE_ALIASES.get(name, name)}"


def is_torchscript_archive(path: Path) -> bool:
    """TorchScript archives are zips with a code/ folder; a pickled module has none."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile:
        return False  # the legacy torch.save format is a bare pickle
    except OSError:
        return True  # unreadable here: torch.jit.load gives the clearer error
    return any("/code/" in n or n.endswith("/constants.pkl") for n in names)


def _path_expr(recipe: Recipe, path: str) -> str:
    p = Path(path).expanduser()
    return _py(str(p)) if p.is_absolute() else f"str(BASE / {_py(path)})"


def _model_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    """(imports, lines) that bind `model` to the recipe's module."""
    spec = recipe.model
    source = spec.source.strip()
    imports: list[str] = []
    lines: list[str] = []
    if source.startswith("example:"):
        name = source.split(":", 1)[1]
        imports.append("from engine.examples import EXAMPLES  # ONNX Export Studio's examples")
        lines.append(f"model = EXAMPLES[{_py(name)}].build()")
    elif source.startswith("torchvision:"):
        name = source.split(":", 1)[1]
        imports.append("import torchvision")
        kwargs = {"weights": None, **spec.kwargs}
        lines.append(f"model = torchvision.models.get_model({_py(name)}, **{_py(kwargs)})")
    elif source.endswith(".pt2"):
        lines.append(f"model = torch.export.load({_path_expr(recipe, source)}).module()")
    elif source.endswith((".pt", ".pth")) and ":" not in Path(source).name:
        if is_torchscript_archive(recipe.resolve(source)):
            lines.append(f"model = torch.jit.load({_path_expr(recipe, source)}, "
                         "map_location='cpu')")
        else:
            lines.append("# A pickled whole module runs code from the file: load only files "
                         "you trust.")
            lines.append(f"model = torch.load({_path_expr(recipe, source)}, map_location='cpu', "
                         "weights_only=False)")
    else:
        file, _, name = source.rpartition(":")
        if not file:  # "net.py" without a name: the sources module picks the only class
            file, name = source, "Model"
        imports.append("import importlib.util")
        lines += [
            f"spec = importlib.util.spec_from_file_location('user_model', "
            f"{_path_expr(recipe, file)})",
            "module = importlib.util.module_from_spec(spec)",
            "spec.loader.exec_module(module)",
            f"model = module.{name}(**{_py(spec.kwargs)})" if spec.kwargs
            else f"model = module.{name}()",
        ]
    if spec.checkpoint:
        ckpt = _path_expr(recipe, spec.checkpoint)
        if spec.checkpoint.endswith(".safetensors"):
            imports.append("from safetensors.torch import load_file")
            lines.append(f"state = load_file({ckpt})")
        else:
            lines.append(f"state = torch.load({ckpt}, map_location='cpu', weights_only=True)")
            lines.append("state = state.get('state_dict', state)")
        lines.append("model.load_state_dict(state)")
    mode = recipe.export.training
    lines.append("model.train()" if mode == "train" else "model.eval()" if mode == "eval"
                 else "# training = preserve: the module keeps the mode it was loaded in")
    if spec.script:
        lines.append("model = torch.jit.script(model)")
    if recipe.export.device != "cpu":
        lines.append(f"model = model.to({_py(recipe.export.device)})")
    return imports, lines


def _input_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    imports: list[str] = []
    lines = [f"torch.manual_seed({recipe.export.seed})"]
    device = recipe.export.device
    for spec in recipe.inputs:
        shape = _py(tuple(spec.shape))
        dt = _dtype(spec.dtype)
        low = spec.low if spec.low is not None else 0
        if spec.fill == "randn":
            expr = f"torch.randn({shape}).to({dt})"
        elif spec.fill == "rand":
            high = spec.high if spec.high is not None else 1
            expr = f"(torch.rand({shape}) * ({high} - {low}) + {low}).to({dt})"
        elif spec.fill in ("zeros", "ones"):
            expr = f"torch.{spec.fill}({shape}, dtype={dt})"
        elif spec.fill == "randint":
            expr = f"torch.randint({int(low)}, {int(spec.high or 1)}, {shape}).to({dt})"
        elif spec.fill == "full":
            expr = f"torch.full({shape}, {spec.value}, dtype={dt})"
        elif spec.fill == "file" and spec.file and spec.file.endswith(".npy"):
            if "import numpy as np" not in imports:
                imports.append("import numpy as np")
            expr = f"torch.from_numpy(np.load({_path_expr(recipe, spec.file)}))"
        elif spec.fill == "file" and spec.file:
            expr = f"torch.load({_path_expr(recipe, spec.file)}, weights_only=True)"
        else:
            expr = f"torch.randn({shape}).to({dt})"
        if device != "cpu":
            expr = f"{expr}.to({_py(device)})"
        lines.append(f"{spec.name} = {expr}")
    return imports, lines


def _dynamic_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    """(lines, export kwargs) for the recipe's dynamic axes."""
    items: list[InputSpec | OutputSpec] = [*recipe.inputs, *recipe.outputs]
    if not any(item.dynamic for item in items):
        return [], []
    if recipe.export.exporter == "dynamo":
        names = sorted({n for s in recipe.inputs for n in s.dynamic.values()})
        lines = ["# One Dim per name: a name shared by several inputs is one dimension."]
        lines += [f"{n} = torch.export.Dim({_py(n)})" for n in names]
        shapes = []
        for spec in recipe.inputs:
            pairs = ", ".join(f"{a}: {n}" for a, n in sorted(spec.dynamic.items()))
            shapes.append("{" + pairs + "}" if spec.dynamic else "None")
        tuple_text = "(" + ", ".join(shapes) + ("," if len(shapes) == 1 else "") + ")"
        lines.append(f"dynamic_shapes = {tuple_text}")
        return lines, ["dynamic_shapes=dynamic_shapes"]
    axes: dict[str, dict[int, str]] = {}
    for item in items:
        if item.dynamic:
            axes[item.name] = dict(sorted(item.dynamic.items()))
    return [f"dynamic_axes = {_py(axes)}"], ["dynamic_axes=dynamic_axes"]


def generate(recipe: Recipe) -> str:
    """Return a runnable script that exports `recipe`'s model the way the studio would."""
    opts = recipe.export
    dynamo = opts.exporter == "dynamo"
    model_imports, model_lines = _model_lines(recipe)
    input_imports, input_lines = _input_lines(recipe)
    dyn_lines, dyn_kwargs = _dynamic_lines(recipe)
    stdlib = {"from pathlib import Path"} | ({"import runpy"} if opts.extensions else set())
    third = {"import torch"}
    for extra in [*model_imports, *input_imports]:
        (stdlib if extra.startswith("import importlib") else third).add(extra)
    imports = [*sorted(stdlib), "", *sorted(third, key=lambda s: (s.startswith("from"), s))]

    body: list[str] = [f"BASE = Path({_py(str(recipe.base_dir.resolve()))})  "
                       "# the recipe's folder; relative paths start here", ""]
    body += ["# The model", *model_lines, "", "# Example inputs, in forward() order",
             *input_lines, ""]
    export_kwargs: list[str] = []
    if opts.extensions:
        body.append("# Extensions: custom symbolics / translations registered before export")
        if dynamo:
            body.append("custom_translation_table = {}")
        for ext in opts.extensions:
            if dynamo:
                body.append(f"custom_translation_table.update(runpy.run_path("
                            f"{_path_expr(recipe, ext)}).get('custom_translation_table', {{}}))")
            else:
                body.append(f"runpy.run_path({_path_expr(recipe, ext)})")
        body.append("")
        if dynamo:
            export_kwargs.append("custom_translation_table=custom_translation_table or None")
    if dyn_lines:
        body += [*dyn_lines, ""]
    if dynamo and opts.external_data == "auto":
        body += ["# external_data = auto: weights go beside the file only near ONNX's 2 GB limit",
                 "weight_bytes = sum(t.numel() * t.element_size() for t in "
                 "model.state_dict().values())",
                 "external_data = weight_bytes > 1_800_000_000", ""]

    out = _path_expr(recipe, opts.output)
    body.append(f"output = Path({out})")
    body.append("output.parent.mkdir(parents=True, exist_ok=True)")
    args = ", ".join(s.name for s in recipe.inputs) + ("," if len(recipe.inputs) == 1 else "")
    export_kwargs = [
        f"input_names={_py([s.name for s in recipe.inputs])}",
        *([f"output_names={_py([s.name for s in recipe.outputs])}"] if recipe.outputs else []),
        *([f"opset_version={opts.opset}"] if opts.opset is not None else []),
        f"dynamo={dynamo}",
        *dyn_kwargs,
        *export_kwargs,
    ]
    if dynamo:
        external = {"auto": "external_data", "always": "True", "never": "False"}
        export_kwargs.append(f"external_data={external[opts.external_data]}")
        export_kwargs.append(f"optimize={opts.optimize}")
    else:
        export_kwargs.append(f"training=torch.onnx.TrainingMode.{_TRAINING[opts.training]}")
        if opts.operator_export_type != "ONNX":
            export_kwargs.append("operator_export_type=torch.onnx.OperatorExportTypes."
                                 f"{opts.operator_export_type}")
        export_kwargs.append(f"do_constant_folding={opts.do_constant_folding}")
        if opts.custom_opsets:
            export_kwargs.append(f"custom_opsets={_py(opts.custom_opsets)}")
    if not opts.export_params:
        export_kwargs.append("export_params=False")
    if opts.keep_initializers_as_inputs:
        export_kwargs.append("keep_initializers_as_inputs=True")
    body.append("torch.onnx.export(")
    body.append("    model,")
    body.append(f"    ({args}),")
    body.append("    str(output),")
    body += [f"    {kw}," for kw in export_kwargs]
    body.append(")")
    body.append("print(f'wrote {output}')")

    header = [
        '"""Export generated by ONNX Export Studio from a recipe; runs on its own."""',
        "",
    ]
    return "\n".join(header + imports + ["", ""] + body) + "\n"
