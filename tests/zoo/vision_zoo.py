"""The vision zoo: timm image classifiers drawn by a fixed seed from timm.list_models() (not picked
by hand), plus torchvision's classifiers, each written as a user writes it (a batch-1 example of
the model's own input size, a dynamic batch, validation on), and an independent check of a
written file at another batch against eager PyTorch.

The draw: timm.list_models() shuffled by `random.Random(SEED)`, then taken in that order while
a model passes the filter (`fits`): it builds with random weights, has at most MAX_PARAMS
parameters, its own input size is at most MAX_SIDE pixels a side, and one image gives
[1, num_classes] logits. The filter keeps the zoo a size two cores can export in a sitting; it
looks at what a model is, never at its name.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np

SEED = 35  # the number: a seed chosen before any model was looked at
COUNT = 40
MAX_PARAMS = 12_000_000
MAX_SIDE = 256
CHECK_BATCH = 3  # the independent check runs the file at a batch the example never had


def timm_input_size(name: str) -> tuple[int, int, int]:
    """(channels, height, width) a timm model's own config gives for its input."""
    import timm

    config = timm.get_pretrained_cfg(name) or {}
    size = config.input_size if hasattr(config, "input_size") else None
    return tuple(size) if size else (3, 224, 224)  # type: ignore[return-value]


def fits(name: str) -> bool:
    """Whether timm's `name` is an image classifier of the zoo's size (see the module's
    docstring); never raises."""
    import timm
    import torch

    try:
        channels, height, width = timm_input_size(name)
        if max(height, width) > MAX_SIDE:
            return False
        with torch.device("meta"):  # counting parameters allocates nothing
            model = timm.create_model(name, pretrained=False)
        if sum(p.numel() for p in model.parameters()) > MAX_PARAMS:
            return False
        classes = getattr(model, "num_classes", 0)
        model = timm.create_model(name, pretrained=False).eval()
        with torch.no_grad():
            out = model(torch.randn(1, channels, height, width))
        return isinstance(out, torch.Tensor) and list(out.shape) == [1, classes] and classes > 0
    except Exception:
        return False


def draw(count: int = COUNT, seed: int = SEED) -> list[str]:
    """The first `count` models of timm.list_models(), shuffled by `seed`, that `fits`."""
    import timm

    names = list(timm.list_models())
    random.Random(seed).shuffle(names)
    drawn: list[str] = []
    for name in names:
        if fits(name):
            drawn.append(name)
            if len(drawn) == count:
                break
    return drawn


def torchvision_classifiers() -> list[str]:
    """torchvision's classification models of the zoo's size ([] without torchvision)."""
    try:
        from onnx_studio.engine.source.vision import import_torchvision

        torchvision, _ = import_torchvision()
    except Exception:
        return []
    import torch

    found = []
    for name in torchvision.models.list_models(module=torchvision.models):
        try:
            with torch.device("meta"):
                model = torchvision.models.get_model(name, weights=None)
            if sum(p.numel() for p in model.parameters()) <= MAX_PARAMS:
                found.append(name)
        except Exception:
            continue
    return found


def recipe_text(source: str, size: tuple[int, int, int], output: str) -> str:
    """A recipe as a user writes it: a batch-1 example, the batch dynamic, validation on."""
    channels, height, width = size
    return f'''version = 1

[model]
source = "{source}"

[[inputs]]
name = "x"
shape = [1, {channels}, {height}, {width}]
dynamic = {{ 0 = "batch" }}

[[outputs]]
name = "logits"
dynamic = {{ 0 = "batch" }}

[export]
output = "{output}"

[validate]
enabled = true
'''


def write_zoo(folder: Path, timm_names: list[str], torchvision_names: list[str]) -> list[Path]:
    """One recipe per model in `folder` (outputs under folder/out); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for kind, names in (("timm", timm_names), ("torchvision", torchvision_names)):
        for name in names:
            size = timm_input_size(name) if kind == "timm" else (3, 224, 224)
            path = folder / f"{kind}-{name}.toml"
            path.write_text(recipe_text(f"{kind}:{name}", size, f"out/{kind}-{name}.onnx"))
            paths.append(path)
    return paths


def independent_check(recipe_path: Path, onnx_path: Path, batch: int = CHECK_BATCH
                      ) -> dict[str, Any]:
    """The file run by ONNX Runtime at `batch` against the eager model built as the studio
    builds it (its seed, random weights), compared with numpy alone: {"ok", "max_abs_diff",
    "scale", "message"}. Independent of the studio's validation and its rules."""
    import onnxruntime as ort
    import torch

    from onnx_studio.engine.recipe import load
    from onnx_studio.engine.source.load import load_model

    recipe = load(recipe_path)
    module = load_model(recipe).module.eval()
    shape = [batch, *recipe.inputs[0].shape[1:]]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1234))
    with torch.no_grad():
        expected = module(x).numpy()
    try:
        session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    except Exception as exc:
        return {"ok": False, "max_abs_diff": None, "scale": None,
                "message": f"ONNX Runtime failed at batch {batch}: {str(exc)[:200]}"}
    if got.shape != expected.shape:
        return {"ok": False, "max_abs_diff": None, "scale": None,
                "message": f"shape {list(got.shape)} against {list(expected.shape)}"}
    diff = float(np.max(np.abs(got - expected)))
    scale = float(np.max(np.abs(expected)))
    # numpy's allclose with atol at 1e-5 of the output's own scale (float32 rounding), no
    # absolute floor: logits of 1e-14 (zero-initialised heads) are judged at their scale,
    # where a fixed atol would pass anything
    ok = bool(np.allclose(got, expected, rtol=1e-3, atol=1e-5 * scale))
    return {"ok": ok, "max_abs_diff": diff, "scale": scale,
            "message": "" if ok else f"max |diff| {diff:.3g} at scale {scale:.3g}"}


def run_zoo(folder: Path, count: int = COUNT, seed: int = SEED, *, workers: int = 2,
            timeout: float = 900.0, with_torchvision: bool = True
            ) -> list[tuple[str, Any, dict[str, Any] | None]]:
    """Draw, write the recipes into `folder`, run them through `onnx-studio batch` (resuming
    what an earlier run of the same folder recorded), and check every written file at
    CHECK_BATCH: (name, its BatchRecord, the independent check or None) per model."""
    from onnx_studio.engine.batch import BatchOptions, read_items, run_batch

    timm_names = draw(count, seed)
    torchvision_names = torchvision_classifiers() if with_torchvision else []
    recipes = write_zoo(folder / "recipes", timm_names, torchvision_names)
    jobs = read_items([str(p) for p in recipes], None, folder / "report")
    summary = run_batch(jobs, folder / "report",
                        BatchOptions(workers=workers, timeout=timeout, resume=True))
    rows = []
    for record in summary.records:
        report = record.report
        output = Path(report.output) if report.output else None
        check = None
        if report.ok and output is not None and output.is_file():
            check = independent_check(Path(record.recipe), output)
        rows.append((Path(record.recipe).stem, record, check))
    return rows
