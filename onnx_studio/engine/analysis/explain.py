"""Why an export differs from its model: the first divergent node, the module and source line
it comes from, and a folder that reproduces it (`onnx-studio explain`).

`explain(recipe, path, events, repro_dir)` returns the ExplainDocument as a dict. The model's
values are compared with ONNX Runtime's node by node on the recipe's export inputs (engine.
validation.nodes: streamed, the graph's outputs included). The first divergence is the
earliest node in graph order (ONNX graphs are topologically sorted) whose outputs exceed the
tolerance while all of its inputs are within it: every value PyTorch has is judged by its
numbers, a value it has not (the exporter's own intermediates) by the values it is computed
from, graph inputs and weights are given. Not the worst node, which is usually downstream.

What the dynamo exporter records on each node says where it came from: the module path
(`pkg.torch.onnx.name_scopes`, the innermost module, "layers.1.lin"), its class, and the
stack (`pkg.torch.onnx.stack_trace`) whose innermost frame in the model's code (not torch's,
not this studio's wrappers) is the source line. `downstream` counts the nodes after it, fed
by it, whose values are beyond the tolerance too. For a Hugging Face recipe, `path` is the
folder its export wrote and every file is explained (`files`), the first that diverges on top.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.analysis.model_file import ModelFile
from onnx_studio.engine.analysis.repro import Slice, slice_graph
from onnx_studio.engine.errors import StudioError, one_line
from onnx_studio.engine.events import Events
from onnx_studio.engine.export.onnx_file import with_data_files
from onnx_studio.engine.file_set import FolderWrite
from onnx_studio.engine.graph.source_frame import source_frame
from onnx_studio.engine.recipe import Recipe
from onnx_studio.engine.validation.nodes import downstream, first_divergent


@dataclass
class Subject:
    """One ONNX file and what its model gives: the decomposed exported program, its
    positional arguments, the feeds by ONNX input name, and the weights by name."""

    name: str
    file: ModelFile
    program: Any
    args: tuple[Any, ...]
    feeds: dict[str, np.ndarray]


def explain(recipe: Recipe, path: Path, events: Events | None = None,
            repro_dir: Path | None = None, *, write_repro: bool = True) -> dict[str, Any]:
    """The explain document of `path` against the recipe's model (see the module docstring);
    the repro goes to `repro_dir` (default: beside the file, `NAME.repro`) unless
    `write_repro` is false (then `repro` is null).

    Raises StudioError: exit 2 for a wrong request (no such file, not a dynamo export, inputs
    the capture cannot take, a repro folder holding other files), 1 when it cannot run.
    """
    from onnx_studio.engine.paths import repro_folder
    from onnx_studio.engine.source.hf import is_hf_source

    events = events or Events()
    path = Path(path)
    hf = is_hf_source(recipe.model.source)
    # the file (or folder) explained, its data files and what the recipe reads: a repro never
    # replaces one of them, whatever the spelling of the path (`..`, a symlink, a hard link)
    inputs = with_data_files(path)
    folder = repro_folder(recipe, path, repro_dir, inputs) if write_repro else None
    with contextlib.ExitStack() as stack:
        write = None if folder is None else stack.enter_context(
            FolderWrite(folder, output="repro", inputs=inputs, what="The repro folder"))
        doc = _explain_into(recipe, path, hf, events, write)
        if write is not None and write.staged():
            write.commit()
    return doc


def _explain_into(recipe: Recipe, path: Path, hf: bool, events: Events,
                  write: FolderWrite | None) -> dict[str, Any]:
    """The explain document; each diverging file's repro staged in `write` (a FolderWrite;
    None: no repro)."""
    rtol, atol = recipe.validate.rtol, recipe.validate.atol
    doc: dict[str, Any] = {"ok": True, "diverges": False, "first_divergence": None,
                           "downstream": 0, "repro": None, "model": str(path), "rtol": rtol,
                           "atol": atol, "compared": 0}
    subjects = _hf_subjects(recipe, path, events) if hf else _recipe_subjects(recipe, path,
                                                                               events)
    files = []
    for subject in subjects:
        into = None if write is None else (write.staging, write.folder)
        if into is not None and hf:  # a folder of repros, one per file
            into = (into[0] / Path(subject.name).stem, into[1] / Path(subject.name).stem)
        found = explain_one(subject, rtol, atol, recipe.validate.providers, into, events)
        files.append(found)
        doc["compared"] += found["compared"]
        if found["diverges"] and not doc["diverges"]:
            doc.update({k: found[k] for k in ("diverges", "first_divergence", "downstream",
                                               "repro")})
    if hf:
        doc["files"] = files
    elif files and files[0].get("message"):
        doc["message"] = files[0]["message"]
    events.progress(1.0, "Diverges" if doc["diverges"] else "No divergence")
    return doc


def _recipe_subjects(recipe: Recipe, path: Path, events: Events) -> Iterator[Subject]:
    from onnx_studio.engine.analysis.feeds import feeds_from_recipe
    from onnx_studio.engine.graph.file_check import check_file, refuse_unusable
    from onnx_studio.engine.source.arguments import is_structured
    from onnx_studio.engine.source.inputs import make_inputs
    from onnx_studio.engine.source.load import load_model
    from onnx_studio.engine.validation.nodes import recipe_program

    model_file = _read(path)
    refuse_unusable(path, check_file(path, model=model_file.proto))
    if is_structured(recipe):
        raise StudioError("inputs", "explain compares the values of models that take "
                          "positional tensors only; this recipe has keyword, dict/tuple or "
                          "constant inputs.", "Describe the inputs as positional tensors.",
                          exit_code=2)
    events.progress(0.0, "Loading the PyTorch model")
    loaded = load_model(recipe, device=recipe.export.device)
    names = [t["name"] for t in model_file.tensors("inputs")]
    feeds = feeds_from_recipe(recipe, names, loaded.module).arrays
    args = make_inputs(recipe, model=loaded.module, device=recipe.export.device)
    events.progress(0.2, "Capturing the model's values")
    program = _capturing(lambda: recipe_program(recipe, loaded, args))
    yield Subject(path.name, model_file, program, tuple(args), feeds)


def _hf_subjects(recipe: Recipe, folder: Path, events: Events) -> Iterator[Subject]:
    """Each file of a Hugging Face export with its part's module and inputs."""
    from onnx_studio.engine import torch_private
    from onnx_studio.engine.export.hf_files import _dims as part_dynamic_shapes
    from onnx_studio.engine.source.hf import load_for_recipe
    from onnx_studio.engine.validation.nodes import decompose_like_the_exporter

    events.progress(0.0, "Loading the model")
    hf = load_for_recipe(recipe)  # the task, model options and trust the export had
    missing = [p.file for p in hf.parts if not (folder / p.file).is_file()]
    if missing:
        raise StudioError("source", f"{folder} has no {', '.join(missing)} for the task "
                          f"{hf.task}.", "Name the folder the export wrote, and its recipe.",
                          exit_code=2)
    for part in hf.parts:
        args = tuple(part.inputs.values())
        events.log(f"explain {part.file}: capturing the model's values")

        def capture(part: Any = part, args: tuple[Any, ...] = args) -> Any:
            return decompose_like_the_exporter(torch_private.capture_like_the_exporter(
                part.module, args, part_dynamic_shapes(part)))

        yield Subject(part.file, _read(folder / part.file), _capturing(capture), args,
                      {k: v.detach().cpu().numpy() for k, v in part.inputs.items()})


def _read(path: Path) -> ModelFile:
    if not path.is_file():
        raise StudioError("source", f"The file {path} does not exist; check the path.",
                          exit_code=2)
    return ModelFile.read(path)


def _capturing(capture: Any) -> Any:
    try:
        return capture()
    except StudioError:
        raise
    except Exception as exc:
        raise StudioError("validation", f"The model could not be captured again to compare "
                          f"its values: {one_line(exc)}.", "The details hold torch.export's "
                          "message; `onnx-studio validate` still compares the outputs.") from exc


def explain_one(subject: Subject, rtol: float, atol: float, providers: list[str],
                repro_folder: tuple[Path, Path] | None, events: Events) -> dict[str, Any]:
    """The ExplainedFile dict of one file; when it diverges, its repro written into
    `repro_folder` (staging folder, the folder it is committed to; None: not written)."""
    from onnx_studio.engine.validation.nodes import OnnxRuntimeFailed, compare_values, fx_producers
    from onnx_studio.engine.validation.ort_session import session_settings

    proto = subject.file.proto
    out: dict[str, Any] = {"file": subject.name, "diverges": False, "first_divergence": None,
                           "downstream": 0, "repro": None, "compared": 0}
    if not fx_producers(proto):
        raise StudioError("validation", f"{subject.name} does not name the PyTorch values its "
                          "nodes compute, so they cannot be compared: explain needs a dynamo "
                          "export.", "Export with exporter = \"dynamo\" and explain that file.",
                          exit_code=2)
    events.progress(0.4, f"Comparing the values of {subject.name}")
    try:
        found = compare_values(subject.program, subject.args, subject.file.path, proto,
                               subject.feeds, rtol=rtol, atol=atol,
                               session_options=session_settings(providers, "all"))
    except OnnxRuntimeFailed as exc:
        raise StudioError("validation", f"ONNX Runtime could not compute the values of "
                          f"{subject.name}: {one_line(exc.cause)}.",
                          "Check that the file runs: onnx-studio validate.") from exc.cause
    except Exception as exc:
        raise StudioError("validation", f"Running the model again to compare its values "
                          f"failed: {one_line(exc)}.", "The details hold the cause.") from exc
    out["compared"] = len(found.metrics)
    if not found.metrics:
        out["message"] = "No value of the file matches one of the model's."
        return out
    metrics = found.metrics
    _check_same_model(subject.name, proto, metrics)
    index = first_divergent(proto.graph, metrics)
    if index is None:
        return out
    node = proto.graph.node[index]
    failed = [metrics[v] for v in node.output if v in metrics and not metrics[v]["passed"]]
    piece = slice_graph(proto.graph, index, set(metrics))
    out.update(diverges=True, downstream=downstream(proto.graph, index, metrics))
    out["first_divergence"] = {
        "node": node.name, "op_type": node.op_type, **node_origin(node),
        "max_abs_diff": _largest(f["max_abs_diff"] for f in failed),
        "tolerance_ratio": None if any(f["tolerance_ratio"] is None for f in failed)
        else _largest(f["tolerance_ratio"] for f in failed),
        "inputs": input_diffs(subject, piece.reads, metrics),
        "outputs": [v for v in node.output if v in metrics]}
    if repro_folder is None:
        return out
    events.progress(0.8, "Writing the repro")
    out["repro"] = write_repro(subject, index, piece, metrics, rtol, atol, repro_folder,
                               out["first_divergence"])
    return out


def _check_same_model(name: str, proto: Any, metrics: dict[str, dict[str, Any]]) -> None:
    """A `recipe` error (exit 2) when the recipe's model is not the file's: an output of the
    file has another shape than the model's (a file of another model, another recipe)."""
    for output in proto.graph.output:
        found = metrics.get(output.name)
        if found is not None and found.get("shape_mismatch"):
            raise StudioError(
                "recipe", f"The recipe's model does not compute {name}: its output "
                f"{output.name} has {found['message']}.",
                "Give explain the recipe the file was exported from (the same model, inputs "
                "and sizes).", exit_code=2)


def _largest(values: Iterator[float | None] | Any) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def node_origin(node: Any) -> dict[str, Any]:
    """{"module", "module_type", "source", "source_path"} from the exporter's metadata."""
    import ast

    meta = {p.key: p.value for p in node.metadata_props}
    scopes = _literal_list(meta.get("pkg.torch.onnx.name_scopes"), ast)
    classes = _literal_list(meta.get("pkg.torch.onnx.class_hierarchy"), ast)
    # the last scope is the operation itself ("linear_1"); the one before, its module
    module = scopes[-2] if len(scopes) >= 2 else ""
    out: dict[str, Any] = {"module": module, "source": ""}
    if len(classes) >= 2:
        out["module_type"] = classes[-2]
    # the same frame the graph's properties name (onnx_studio.engine.graph.source_frame's rules)
    frame = source_frame(meta.get("pkg.torch.onnx.stack_trace", ""))
    if frame is not None:
        out["source"] = f"{Path(frame.path).name}:{frame.line}"
        out["source_path"] = frame.path
    return out


def _literal_list(text: str | None, ast: Any) -> list[str]:
    if not text:
        return []
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return []
    return [str(v) for v in value] if isinstance(value, list | tuple) else []


def input_diffs(subject: Subject, reads: list[str], metrics: dict[str, dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """Each value the node reads (through the exporter's own intermediates, back to values
    PyTorch has: the repro's inputs and weights), PyTorch's against ONNX Runtime's."""
    graph = subject.file.proto.graph
    inputs = {v.name for v in graph.input}
    weights = subject.file.initializers()
    constants = {out for n in graph.node if n.op_type == "Constant" for out in n.output}
    out = []
    for name in reads:
        if name in metrics:
            out.append({"name": name, "max_abs_diff": metrics[name]["max_abs_diff"]})
        elif name in weights:
            out.append({"name": name, "kind": "initializer",
                        "max_abs_diff": _weight_diff(subject, name, weights[name])})
        elif name in inputs:
            out.append({"name": name, "kind": "graph_input", "max_abs_diff": 0.0})
        else:
            out.append({"name": name, "kind": "constant" if name in constants else "value",
                        "max_abs_diff": None})
    return out


def _weight_diff(subject: Subject, name: str, tensor: Any) -> float | None:
    """The file's weight against the model's parameter or buffer of the same name (same
    shape), None when the model has none such."""
    state = getattr(subject.program, "state_dict", {}) or {}
    ours = state.get(name)
    if ours is None:
        constants = getattr(subject.program, "constants", {}) or {}
        ours = constants.get(name)
    if ours is None or not hasattr(ours, "detach"):
        return None
    try:
        stored = subject.file.array(tensor).astype(np.float64)
        mine = ours.detach().float().cpu().numpy().astype(np.float64)
    except Exception:  # an exotic dtype: no number
        return None
    if stored.shape != mine.shape:
        return None
    return float(np.abs(stored - mine).max()) if stored.size else 0.0


def write_repro(subject: Subject, index: int, piece: Slice,
                metrics: dict[str, dict[str, Any]], rtol: float, atol: float,
                folder: tuple[Path, Path], divergence: dict[str, Any]) -> dict[str, Any]:
    """Write the repro of node `index` (the model `piece`) into the staging folder
    `folder[0]`: {"folder", "files", "command"} of the folder it is committed to, `folder[1]`."""
    from onnx_studio.engine.analysis import repro
    from onnx_studio.engine.analysis.ranges import run_values, value_types
    from onnx_studio.engine.validation.nodes import capture_values

    node = subject.file.proto.graph.node[index]
    outputs = [v for v in node.output if v in metrics]
    wanted = {v for v in piece.inputs if v in metrics} | set(outputs)
    values = capture_values(subject.program, subject.args, subject.file.proto, wanted)
    inputs = {v: subject.feeds[v] if v in subject.feeds else values.get(v)
              for v in piece.inputs}
    missing = [v for v, a in inputs.items() if a is None]
    if missing:  # beyond the expansion: ONNX Runtime's own values
        run_values(subject.file.path, missing, [subject.feeds],
                   lambda name, _i, value: inputs.__setitem__(name, value))
    types = value_types(subject.file.proto)
    case = repro.ReproCase(
        node=node.name, op_type=node.op_type, module=divergence["module"],
        source=divergence["source"], rtol=rtol, atol=atol,
        inputs={v: _typed(a, types.get(v)) for v, a in inputs.items() if a is not None},
        expected={v: _typed(values[v], types.get(v)) for v in outputs if v in values})
    model = repro.build_model(subject.file, piece, case)
    files = repro.write(folder[0], model, case, sorted(set(missing) | set(piece.unknown)))
    return {"folder": str(folder[1]), "files": files, "command": repro.command(folder[1])}



def _typed(array: Any, elem_type: int | None) -> np.ndarray:
    """`array` in the ONNX value's element type (PyTorch's may be wider or narrower)."""
    from onnx import helper

    array = np.asarray(array)
    if not elem_type:
        return array
    try:
        dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError, TypeError):
        return array
    if dtype.kind not in "biufc" or dtype == array.dtype:
        return array
    return array.astype(dtype)
