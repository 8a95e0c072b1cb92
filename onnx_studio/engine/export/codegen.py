"""Recipe -> a standalone Python script that makes the same export with `torch.onnx.export`.

The script is what a user would have written by hand; the window shows it in the Python tab so
an export made by clicking can move into a build script. It follows the studio step by step:
sources are classified by `onnx_studio.engine.source.describe` (the same parsing `load_model` uses),
models are built under the recipe's seed and put in eval mode as `load_model` does (not with
training = "preserve"), and inputs are drawn from a generator seeded like
`onnx_studio.engine.source.make_inputs`, so the script's model and inputs are the studio's. Only the
`example:` source needs this package at run time. No torch import here: the GUI calls this module
(onnx_studio.engine.source.describe is torch-free).
"""

from __future__ import annotations

import keyword
from pathlib import Path
from typing import Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.export.exporter import choose_exporter
from onnx_studio.engine.recipe import InputSpec, Recipe, is_folder_source, to_toml
from onnx_studio.engine.source import describe as source_info
from onnx_studio.engine.source import inputs as inputs_mod
from onnx_studio.engine.source import kinds

_TRAINING = {"eval": "EVAL", "preserve": "PRESERVE", "train": "TRAINING"}
_DTYPE_ALIASES = {"float": "float32", "double": "float64", "half": "float16",
                  "short": "int16", "int": "int32", "long": "int64"}
_INT_DTYPES = {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}


def _py(value: Any) -> str:
    """A Python literal for a TOML value (repr is exact for str/int/float/bool/list/dict)."""
    return repr(value)


def _dtype_name(name: str) -> str:
    return _DTYPE_ALIASES.get(name, name)


def _dtype(name: str) -> str:
    return f"torch.{_dtype_name(name)}"


def _path_expr(recipe: Recipe, path: str | Path) -> str:
    """`str(BASE / 'rel')` for paths inside the recipe's folder, the absolute path otherwise."""
    p = Path(path)
    if not p.is_absolute():
        p = recipe.resolve(p)  # also expands ~
    try:
        rel = p.resolve().relative_to(recipe.base_dir.resolve())
    except ValueError:
        return _py(str(p))
    return f"str(BASE / {_py(rel.as_posix())})"


def _call(func: str, kwargs: dict[str, Any], *args: str) -> str:
    """`func(*args, a=1, b='x')`, or `func(*args, **{...})` when a key is not a Python name."""
    if all(k.isidentifier() and not keyword.iskeyword(k) for k in kwargs):
        parts = [*args, *(f"{k}={_py(v)}" for k, v in kwargs.items())]
    else:
        parts = [*args, f"**{_py(kwargs)}"]
    return f"{func}({', '.join(parts)})"


# ---------------------------------------------------------------------------- the model


def _model_lines(recipe: Recipe) -> tuple[list[str], list[str], str, str]:
    """(imports, lines, name, kind): the lines bind `name` to what torch.onnx.export gets;
    kind is the source's kind as onnx_studio.engine.source.describe names it."""
    spec = recipe.model
    parsed = kinds.parse(spec.source, recipe.base_dir)  # StudioError for a malformed source
    if parsed.kind == "exported_program":
        return _program_lines(recipe, parsed)
    seed = recipe.export.seed
    imports: list[str] = []
    lines = [f"torch.manual_seed({seed})  # the studio builds the model under the recipe's "
             "seed: same weights"]
    kind = parsed.kind
    if kind == "example":
        imports.append(
            "from onnx_studio.engine.source.examples import EXAMPLES  # the studio's examples")
        lines.append("model = " + _call(f"EXAMPLES[{_py(parsed.name)}].build", spec.kwargs))
    elif kind == "torchvision":
        imports.append("import torchvision")
        lines += _torchvision_lines(parsed.name, spec.kwargs)
    elif kind == "python":
        imports += ["import importlib.util", "import sys"]
        lines += _python_lines(recipe, parsed)
    else:  # a saved module: .pt/.pth/.pkl/.bin, TorchScript or pickled
        assert parsed.path is not None
        kind = source_info.describe(spec.source, recipe.base_dir).kind
        if spec.kwargs:
            raise StudioError("source", f"model.kwargs only apply to Python sources, but "
                              f"{parsed.path.name} is a saved module.",
                              "Remove model.kwargs from the recipe.")
        path = _path_expr(recipe, parsed.path)
        if kind == "torchscript":
            lines.append(f"model = torch.jit.load({path}, map_location='cpu')")
        else:
            if not spec.trust_pickle:
                raise StudioError("source", f"{parsed.path.name} is a pickled model and "
                                  "loading it runs code from the file, so it needs "
                                  "trust_pickle = true.",
                                  "Set trust_pickle = true in [model] only if you trust "
                                  "this file.")
            lines += ["# A pickled whole module runs code from the file (trust_pickle = true): "
                      "load only files you trust.",
                      f"model = torch.load({path}, map_location='cpu', weights_only=False)"]
    if spec.checkpoint:
        lines += _checkpoint_lines(recipe, spec.checkpoint)
        if spec.checkpoint.lower().endswith(".safetensors"):
            imports.append("from safetensors.torch import load_file")
    if recipe.export.training != "preserve":
        lines.append("model.eval()  # the studio loads models in eval mode")
    if spec.script and kind != "torchscript":
        lines.append("model = torch.jit.script(model)")
    if recipe.export.device != "cpu":
        lines.append(f"model = model.to({_py(recipe.export.device)})")
    # the exporter sets the mode last: train(True) for "train", nothing for "preserve" (the
    # model keeps its own mode: no eval() above either), train(False) again for "eval".
    if recipe.export.training == "train":
        lines.append("model.train()  # training = \"train\"")
    elif recipe.export.training == "preserve":
        lines.append("# training = \"preserve\": the model keeps its own mode (a new "
                     "nn.Module trains; a saved one keeps the mode it was saved in)")
    return imports, lines, "model", kind


def _program_lines(recipe: Recipe,
                   parsed: kinds.ParsedSource) -> tuple[list[str], list[str], str, str]:
    """A .pt2: dynamo exports the ExportedProgram itself, TorchScript traces its .module()."""
    assert parsed.path is not None
    if recipe.model.checkpoint:
        raise StudioError("source", "A checkpoint cannot be applied to an ExportedProgram; its "
                          "weights are inside the .pt2.", "Remove model.checkpoint.")
    lines = [f"program = torch.export.load({_path_expr(recipe, parsed.path)})",
             "# An ExportedProgram keeps the mode it was captured in: no eval()/train()",
             "# (its .module() refuses them)."]
    if recipe.export.exporter == "dynamo":
        return [], lines, "program", parsed.kind
    lines.append("model = program.module()")
    if recipe.export.device != "cpu":
        lines.append(f"model = model.to({_py(recipe.export.device)})")
    return [], lines, "model", parsed.kind


def _python_lines(recipe: Recipe, parsed: kinds.ParsedSource) -> list[str]:
    """Import the user's file as the studio does and build the named class or factory."""
    assert parsed.path is not None
    desc = source_info.describe(recipe.model.source, recipe.base_dir)
    name = parsed.name
    if not name:  # "net.py": the same rule load_model applies (the file's only model class)
        if desc.error and not desc.candidates:
            raise StudioError("source", desc.error)
        name = source_info.default_name(parsed.path, desc.candidates)
    lines = [
        f"model_file = Path({_path_expr(recipe, parsed.path)})",
        "# The file's folder goes on sys.path so its own imports (sibling files) resolve.",
        "sys.path.insert(0, str(model_file.parent))",
        "spec = importlib.util.spec_from_file_location('user_model', model_file)",
        "user_model = importlib.util.module_from_spec(spec)",
        "sys.modules['user_model'] = user_model  # pickling and TorchScript look modules up here",
        "spec.loader.exec_module(user_model)",
    ]
    if name in {c.name for c in desc.candidates}:  # a class or a factory function
        lines.append("model = " + _call(f"user_model.{name}", recipe.model.kwargs))
    else:  # no def/class of that name (or unreadable here): decide at run time, as load_model
        lines += [f"model = user_model.{name}",
                  "if not isinstance(model, torch.nn.Module):  # a module instance is used as is",
                  "    model = " + _call("model", recipe.model.kwargs)]
    return lines


def _torchvision_lines(name: str, kwargs: dict[str, Any]) -> list[str]:
    return [
        "# Pretrained weights only when already downloaded: the studio never downloads.",
        "try:",
        f"    weights = torchvision.models.get_model_weights({_py(name)}).DEFAULT",
        "except Exception:",
        "    weights = None",
        "if weights is not None and not (Path(torch.hub.get_dir()) / 'checkpoints'",
        "                                / Path(weights.url).name).is_file():",
        "    weights = None",
        "model = " + _call("torchvision.models.get_model", kwargs, _py(name),
                           "weights=weights"),
    ]


def _checkpoint_lines(recipe: Recipe, checkpoint: str) -> list[str]:
    """Load a state_dict the way onnx_studio.engine.source.checkpoints.apply_checkpoint does
    (weights only)."""
    path = _path_expr(recipe, checkpoint)
    load = (f"state = load_file({path}, device='cpu')"
            if checkpoint.lower().endswith(".safetensors")
            else f"state = torch.load({path}, map_location='cpu', weights_only=True)")
    return [
        load,
        "for key in ('state_dict', 'model_state_dict', 'model'):  # common trainer layouts",
        "    if isinstance(state.get(key), dict):",
        "        state = state[key]",
        "        break",
        "if state and all(k.startswith('module.') for k in state) \\",
        "        and not set(model.state_dict()) & set(state):  # saved by DataParallel",
        "    state = {k[len('module.'):]: v for k, v in state.items()}",
        "model.load_state_dict(state, strict=True)",
    ]


# ---------------------------------------------------------------------------- the inputs


def _input_expr(recipe: Recipe, spec: InputSpec) -> tuple[str, str]:
    """(expression, import) drawing one input exactly as onnx_studio.engine.source.inputs._fill
    does."""
    shape = _py(list(spec.shape))
    name = _dtype_name(spec.dtype)
    dt = f"torch.{name}"
    # "auto" by the name and dtype rule; without the model, token ids keep the 0..10 default
    resolved = inputs_mod.resolve_fill(spec)
    fill = resolved.fill
    if fill == "file":
        if not spec.file:
            raise StudioError("inputs", f"{spec.name}: fill \"file\" needs file = \"x.npy\" "
                              "or \".pt\".")
        path = _path_expr(recipe, spec.file)
        if spec.file.lower().endswith(".npy"):
            return (f"torch.from_numpy(np.ascontiguousarray(np.load({path}, "
                    f"allow_pickle=False))).to({dt})", "import numpy as np")
        return f"torch.load({path}, map_location='cpu', weights_only=True).to({dt})", ""
    is_int = name in _INT_DTYPES
    if name == "bool" and fill in ("randn", "rand", "randint"):
        return f"torch.randint(0, 2, {shape}, generator=generator).bool()", ""
    if fill == "randint" or (fill in ("randn", "rand") and is_int):
        # Integers are drawn from low..high-1 (default 0..10) whatever the fill says.
        low = int(inputs_mod.DEFAULT_INT_LOW if resolved.low is None else resolved.low)
        high = int(inputs_mod.DEFAULT_INT_HIGH if resolved.high is None else resolved.high)
        drawn = f"torch.randint({low}, {high}, {shape}, generator=generator"
        return (f"{drawn}, dtype={dt})" if is_int
                else f"{drawn}, dtype=torch.int64).to({dt})"), ""
    if fill in ("randn", "rand"):
        wide = "torch.complex128" if name.startswith("complex") else "torch.float64"
        cast = "" if wide == dt else f".to({dt})"
        if fill == "randn":
            return f"torch.randn({shape}, generator=generator, dtype={wide}){cast}", ""
        low_f = 0.0 if resolved.low is None else float(resolved.low)
        high_f = 1.0 if resolved.high is None else float(resolved.high)
        drawn = f"torch.rand({shape}, generator=generator, dtype={wide})"
        if (low_f, high_f) != (0.0, 1.0):
            drawn = f"({_py(low_f)} + {_py(high_f - low_f)} * {drawn})"
        return f"{drawn}{cast}", ""
    if fill == "arange":
        if not spec.shape:
            return f"torch.zeros((), dtype={dt})", ""
        return (f"torch.arange({spec.shape[-1]}).expand({shape}).to({dt}).contiguous()", "")
    if fill in ("zeros", "ones"):
        return f"torch.{fill}({shape}, dtype={dt})", ""
    if fill == "full":
        if spec.value is None:
            raise StudioError("inputs", f"{spec.name}: fill \"full\" needs a value.")
        value: Any = (bool(spec.value) if name == "bool" else int(spec.value) if is_int
                      else spec.value)
        return f"torch.full({shape}, {_py(value)}, dtype={dt})", ""
    raise StudioError("inputs", f"{spec.name}: fill {fill!r} is unknown; use auto, randn, "
                      "rand, zeros, ones, randint, full, file or arange.")


def _input_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    """(imports, lines) binding `args`, the example inputs in forward() order."""
    imports: list[str] = []
    lines = [f"generator = torch.Generator().manual_seed({recipe.export.seed})  "
             "# the studio's own input generator", "args = ("]
    device = recipe.export.device
    for spec in recipe.inputs:
        expr, needed = _input_expr(recipe, spec)
        if needed and needed not in imports:
            imports.append(needed)
        if device != "cpu":
            expr = f"{expr}.to({_py(device)})"
        lines.append(f"    {expr},  # {spec.name}")
    lines.append(")")
    return imports, lines


def _dynamic_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    """(lines, export kwargs) for the recipe's dynamic axes, as onnx_studio.engine.source.inputs
    builds them."""
    if recipe.export.exporter == "dynamo":
        if not any(spec.dynamic for spec in recipe.inputs):
            return [], []
        names = list(recipe.dynamic_dims())
        lines = ["# One Dim per name: a name shared by several inputs is one dimension.",
                 f"dims = {{name: torch.export.Dim(name) for name in {_py(names)}}}"]
        shapes = []
        for spec in recipe.inputs:
            rank = len(spec.shape)
            pairs = ", ".join(f"{a % rank if rank and a < 0 else a}: dims[{_py(n)}]"
                              for a, n in sorted(spec.dynamic.items()))
            shapes.append("{" + pairs + "}" if spec.dynamic else "None")
        tuple_text = "(" + ", ".join(shapes) + ("," if len(shapes) == 1 else "") + ")"
        lines.append(f"dynamic_shapes = {tuple_text}")
        return lines, ["dynamic_shapes=dynamic_shapes"]
    axes = inputs_mod.dynamic_axes(recipe)
    if not axes:
        return [], []
    return [f"dynamic_axes = {_py(axes)}"], ["dynamic_axes=dynamic_axes"]


# ---------------------------------------------------------------------------- the script


def _extension_lines(recipe: Recipe) -> tuple[list[str], list[str]]:
    """(lines, export kwargs): run each extension as the exporter does, before the model."""
    opts = recipe.export
    if not opts.extensions:
        return [], []
    dynamo = opts.exporter == "dynamo"
    lines = ["# Extensions: custom symbolics / translations registered before export"]
    if dynamo:
        lines.append("custom_translation_table = {}")
    for ext in opts.extensions:
        run = (f"runpy.run_path({_path_expr(recipe, ext)}, "
               f"run_name={_py('onnx_studio_extension_' + Path(ext).stem)})")
        lines += ([f"namespace = {run}",
                   "custom_translation_table.update(namespace.get('custom_translation_table') "
                   "or {})"] if dynamo else [run])
    return lines, (["custom_translation_table=custom_translation_table or None"]
                   if dynamo else [])


def _export_kwargs(recipe: Recipe, kind_is_program: bool) -> list[str]:
    opts = recipe.export
    dynamo = opts.exporter == "dynamo"
    kwargs = [
        *([f"input_names={_py([s.name for s in recipe.inputs])}"] if recipe.inputs else []),
        *([f"output_names={_py([s.name for s in recipe.outputs])}"] if recipe.outputs else []),
        *([f"opset_version={opts.opset}"] if opts.opset is not None else []),
        f"dynamo={dynamo}",
    ]
    if dynamo:
        # "auto"/"never": torch itself moves weights beside the file only above ONNX's 2 GB.
        kwargs.append(f"external_data={opts.external_data == 'always'}")
        kwargs.append(f"optimize={opts.optimize}")
    else:
        # A program's .module() cannot switch modes, so the studio exports it as it is.
        mode = "preserve" if kind_is_program else opts.training
        kwargs.append(f"training=torch.onnx.TrainingMode.{_TRAINING[mode]}")
        if opts.operator_export_type != "ONNX":
            kwargs.append("operator_export_type=torch.onnx.OperatorExportTypes."
                          f"{opts.operator_export_type}")
        kwargs.append(f"do_constant_folding={opts.do_constant_folding}")
        if opts.custom_opsets:
            kwargs.append(f"custom_opsets={_py(opts.custom_opsets)}")
    if not opts.export_params:
        kwargs.append("export_params=False")
    if opts.keep_initializers_as_inputs:
        kwargs.append("keep_initializers_as_inputs=True")
    return kwargs


def generate(recipe: Recipe) -> str:
    """Return a runnable script that exports `recipe`'s model the way the studio would.

    Raises StudioError when the studio itself would refuse the recipe's model or inputs
    (a malformed source, an untrusted pickle, ...); the window shows that sentence instead.
    """
    from onnx_studio.engine.source.arguments import is_structured

    if is_folder_source(recipe.model.source):
        return _hf_script(recipe)
    if is_structured(recipe):
        raise StudioError("recipe", "The script is written for models that take positional "
                          "tensors; this recipe has keyword, dict/tuple or constant inputs.",
                          "Export from the window or the command line, which take them.")
    exporter, _ = choose_exporter(recipe)
    if exporter != recipe.export.exporter:  # "auto": the script names the one that runs
        recipe = recipe.copy()
        recipe.export.exporter = exporter
    opts = recipe.export
    ext_lines, ext_kwargs = _extension_lines(recipe)
    model_imports, model_lines, target, kind = _model_lines(recipe)
    input_imports, input_lines = _input_lines(recipe)
    dyn_lines, dyn_kwargs = _dynamic_lines(recipe)
    stdlib = {"from pathlib import Path"} | ({"import runpy"} if ext_lines else set())
    third = {"import torch"}
    for extra in [*model_imports, *input_imports]:
        (stdlib if extra in ("import importlib.util", "import sys") else third).add(extra)
    imports = [*sorted(stdlib, key=lambda s: (s.startswith("from"), s)), "",
               *sorted(third, key=lambda s: (s.startswith("from"), s))]

    body: list[str] = [f"BASE = Path({_py(str(recipe.base_dir.resolve()))})  "
                       "# the recipe's folder; relative paths start here", ""]
    if ext_lines:
        body += [*ext_lines, ""]
    body += ["# The model", *model_lines, "", "# Example inputs, in forward() order",
             *input_lines, ""]
    if dyn_lines:
        body += [*dyn_lines, ""]
    body.append(f"output = Path({_path_expr(recipe, opts.output)})")
    body.append("output.parent.mkdir(parents=True, exist_ok=True)")
    export_kwargs = [*_export_kwargs(recipe, kind == "exported_program"), *dyn_kwargs,
                     *ext_kwargs]
    body.append("torch.onnx.export(")
    body.append(f"    {target},")
    body.append("    args,")
    body.append("    str(output),")
    body += [f"    {kw}," for kw in export_kwargs]
    body.append(")")
    body.append("print(f'wrote {output}')")
    if recipe.validate.enabled:
        imports = [*imports[:imports.index("")], "import json", *imports[imports.index(""):],
                   "", "import onnx_studio"]
        checked = "model" if target == "program" else target
        if target == "program":
            body.append("model = program.module()")
        body += ["", "# The recipe asks for validation: the file against this very model on "
                 "these inputs,", "# in a worker process (onnx_studio's Python API).",
                 "report = " + _call("onnx_studio.validate", {}, checked, "str(output)",
                                     "args=args", f"rtol={_py(recipe.validate.rtol)}",
                                     f"atol={_py(recipe.validate.atol)}"),
                 "print(json.dumps(report.to_dict()))",
                 "raise SystemExit(report.error.exit_status() if report.error else 0)"]

    header = [
        '"""Export generated by ONNX Export Studio from a recipe; runs on its own'
        + (' (the validation needs onnx-export-studio)."""' if recipe.validate.enabled
           else '."""'),
        "",
    ]
    return "\n".join(header + imports + ["", ""] + body) + "\n"


# ---------------------------------------------------------------------------- Hugging Face


def _hf_script(recipe: Recipe) -> str:
    """A Hugging Face folder's export: its files (a model, or an encoder and decoders with and
    without their cache) are exported through the studio's task wrappers, so the script hands
    the recipe to onnx_studio's Python API, which exports and validates as the recipe says:
    what `onnx-studio export --recipe R --json` prints."""
    text = to_toml(recipe)
    literal = (f"r\'\'\'\n{text}\'\'\'" if "\'\'\'" not in text and not text.endswith("\\")
               else _py(text))
    body = [
        f"BASE = Path({_py(str(recipe.base_dir.resolve()))})  "
        "# the recipe's folder; relative paths start here",
        f"RECIPE = {literal}",
        "",
        "report = onnx_studio.export(onnx_studio.loads_recipe(RECIPE, base_dir=BASE))",
        "for file in report.files or []:",
        "    print(f\"wrote {file.path}\", file=sys.stderr)",
        "print(json.dumps(report.to_dict()))",
        "raise SystemExit(report.error.exit_status() if report.error else 0)",
    ]
    header = [
        '"""Export generated by ONNX Export Studio from a recipe.',
        "",
        "A Hugging Face model is exported file by file through the studio's task wrappers (for",
        "its task: the model, or an encoder and decoders with and without their cache), so this",
        "script hands the recipe to onnx_studio's Python API (onnx-export-studio installed),",
        "which exports and validates as the recipe says and prints the document the command line",
        "prints. The same from a shell, with this recipe saved:",
        "onnx-studio export --recipe recipe.toml --json",
        '"""',
        "",
        "import json",
        "import sys",
        "from pathlib import Path",
        "",
        "import onnx_studio",
        "",
        "",
    ]
    return "\n".join(header + body) + "\n"
