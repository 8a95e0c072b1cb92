"""Are the weights stored in the ONNX file the PyTorch model's? The validation's weight check.

`weight_warnings(proto, onnx_path, module)` returns at most one warning, naming every
parameter whose value reaches the graph different from the model's. Its purpose is to explain
large output differences before the numbers are read: a model built again without the
checkpoint the export used (two random initializations), or a file changed after the export.

Exporters change weights legitimately, so a name match with other values is not enough:
- the dynamo exporter's `optimize` folds a BatchNorm into the Conv, ConvTranspose or Gemm
  before it and keeps the weight's name (W' = W * gamma / sqrt(var + eps) along the output
  channels, b' = (b - mean) * gamma / sqrt(var + eps) + beta); TorchScript's constant folding
  does the same under new names (`onnx::Conv_25`);
- constant folding stores a parameter transposed (Gemm with transB, MatMul), reshaped or cast.

The rules, per initializer (precision over recall: a false alarm is the worst outcome here):
1. Only initializers named like a state-dict entry and consumed by a node of the graph (or of
   a subgraph) are looked at: a value no node reads does not reach the computation. A
   parameter absent from the graph under its name (folded, renamed) is not a finding by
   itself: nothing shows where its value went.
2. The parameter as is, transposed (any axis permutation: Gemm, MatMul), reshaped (same
   element count) or cast to the stored dtype (compared at the lower precision): fine. So is
   the parameter rounded to float16 on its way and stored wider again (an fp16 variant keeps
   some weights in float32 after its conversion rounded them): a weight of another model
   differs by far more than float16's rounding. Another element count cannot be set side by
   side: no verdict.
3. Otherwise, each BatchNorm that the graph lacks (its running statistics are not among the
   initializers: folded) and whose channel count fits is tried, the module's next sibling
   first (a Conv2d followed by its BatchNorm2d in the same parent); the fold is recomputed from
   the PyTorch parameters and buffers, with the module's eps. A match: fine (folded).
4. Otherwise a finding. When the module's next sibling is such a BatchNorm, the finding names
   both ("neither the parameter nor it with the BatchNorm 'bn' folded into it") and gives the
   largest difference from that fold; else the largest difference from the parameter.
Running statistics of a module in training mode are skipped (its forward updates them), and
any error while comparing one tensor (an exotic dtype or layout) skips that tensor.

A difference this check misses is still caught by the numeric comparison, which is the
verdict; this warning only names the cause. Evenly spaced samples (at most `SAMPLES` elements
per tensor) are compared, so the check costs little even on a large model.
torch is imported inside the function; onnx too.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from onnx_studio.engine.validation.metrics import validation_warning

SAMPLES = 65536  # elements compared per tensor: weights that are not the same differ everywhere
_NAMED = 5  # parameters named in the message; the rest are counted (all are in details)
_EPS_GUESSES = (1e-5, 1e-3)  # BatchNorm eps when the module does not say (an exported program)
_STAT_BUFFERS = ("running_mean", "running_var", "num_batches_tracked")


def weight_warnings(proto: Any, onnx_path: Path, module: Any) -> list[dict[str, Any]]:
    """A warning naming the parameters whose value in the ONNX file is not the model's.

    See the module docstring for the rules. Returns [] when every weight matches (as stored,
    transposed, reshaped, cast or with a BatchNorm folded in), when nothing can be compared
    (a callable that is not an nn.Module, an .onnx made elsewhere with other names), or on any
    problem reading a tensor: this check never fails a validation by itself.
    """
    import torch

    try:
        state = {k: v for k, v in module.state_dict().items() if isinstance(v, torch.Tensor)}
    except Exception:  # a callable that is not an nn.Module
        return []
    graph = _Graph(proto)
    if not state or not any(name in state for name in graph.initializers):
        return []
    owners = _Owners(module, state, graph)
    findings: list[str] = []
    for name, init in graph.initializers.items():
        tensor = state.get(name)
        if tensor is None or owners.mutable(name) or not graph.consumed(name):
            continue  # rule 1, and the running statistics of a module in training mode
        try:
            finding = _check_initializer(name, init, tensor, onnx_path, owners)
        except Exception:  # an unforeseen layout or dtype: no verdict, and no alarm
            continue
        if finding:
            findings.append(finding)
    if not findings:
        return []
    return [_warning(findings)]


# ---------------------------------------------------------------------------- one initializer


def _check_initializer(name: str, init: Any, tensor: Any, onnx_path: Path, owners: _Owners
                       ) -> str | None:
    stored = _stored_array(init, onnx_path)
    ours = _numpy(tensor)
    if stored is None or ours is None or stored.size == 0:
        return None
    rtol = max(_rtol(stored.dtype), _rtol(tensor.dtype))
    stored, ours = _standard(stored), _standard(ours)
    if stored is None or ours is None:
        return None
    return _check(name, stored, ours, rtol, owners)


def _check(name: str, stored: np.ndarray, ours: np.ndarray, rtol: float, owners: _Owners
           ) -> str | None:
    """None when `stored` is explained by the parameter `ours`; else a sentence saying why not."""
    stored, ours = stored.reshape(stored.shape or (1,)), ours.reshape(ours.shape or (1,))
    picks = _sample(stored)
    got = stored.reshape(-1)[picks].astype(np.float64)
    views = list(_views(stored.shape, ours.shape, picks))
    if not views:
        return None  # another element count: the values cannot be set side by side
    raw = _Expected(ours)
    if any(_close(got, raw, coords, rtol) for coords in views):
        return None  # rule 2: as is, transposed, reshaped or cast
    half = max(rtol, _rtol("float16"))
    if half > rtol and any(_close(got, raw, coords, half) for coords in views):
        return None  # rule 2: rounded through float16 on its way (an fp16 variant's weights)
    folds = owners.folds(name, ours)
    for fold in folds:  # rule 3
        expected = fold.expected(ours, owners.state)
        if expected is not None and any(_close(got, expected, coords, max(4 * rtol, 1e-5))
                                        for coords in views):
            return None  # a BatchNorm folded into it: the export is right
    # a BatchNorm right after the module that the graph lacks: the file should hold the fold
    follows = next((f for f in folds if f.follows), None)
    if follows is not None:
        folded = follows.expected(ours, owners.state)
        diff = _largest_difference(got, folded or raw, views)
        return (f"{name!r} is neither the PyTorch parameter {name!r} nor that parameter with "
                f"the BatchNorm {follows.bn!r} folded into it{diff}")
    diff = _largest_difference(got, raw, views)
    return f"{name!r} differs from the PyTorch parameter {name!r}{diff}"


def _warning(findings: list[str]) -> dict[str, Any]:
    first = findings[0]
    more = ""
    if len(findings) > 1:
        others = findings[1:_NAMED]
        names = ", ".join(f.split(" ", 1)[0] for f in others)
        rest = len(findings) - 1 - len(others)
        more = f" Also {names}" + (f" and {rest} more" if rest else "") + "."
    warning = validation_warning(
        f"A weight in the ONNX file is not the model's: {first}.{more} The file does not hold "
        "the weights of the model being validated (a model built without the checkpoint the "
        "export used, i.e. a fresh random initialization, or a file changed after the "
        "export), so its outputs are expected to differ.")
    warning["hint"] = ("Give the recipe the checkpoint the export used (model.checkpoint), or "
                       "export the file again from this model.")
    warning["details"] = "\n".join(findings)
    return warning


def _stored_array(init: Any, onnx_path: Path) -> np.ndarray | None:
    from onnx import numpy_helper

    try:
        return np.asarray(numpy_helper.to_array(init, base_dir=str(Path(onnx_path).parent)))
    except Exception:  # unreadable external data, an exotic dtype: not this check's business
        return None


def _numpy(tensor: Any) -> np.ndarray | None:
    try:
        tensor = tensor.detach().cpu()
        if tensor.is_floating_point() and tensor.dtype.itemsize <= 2 \
                and str(tensor.dtype) != "torch.float16":
            tensor = tensor.float()  # NumPy has no bfloat16 nor float8 (their eps is kept)
        return np.asarray(tensor.numpy())
    except Exception:  # a quantized or sparse tensor, a meta tensor
        return None


def _standard(array: np.ndarray) -> np.ndarray | None:
    """The array in a NumPy dtype that arithmetic understands (bfloat16 from ml_dtypes ->
    float32); None for strings and other non-numbers."""
    if array.dtype.kind in "biuf":
        return array
    if array.dtype.kind != "V":  # complex, strings, objects
        return None
    try:
        converted = array.astype(np.float32)
    except (TypeError, ValueError):
        return None
    return converted


# ---------------------------------------------------------------------------- comparing


def _sample(stored: np.ndarray) -> np.ndarray:
    step = max(1, stored.size // SAMPLES)
    return np.arange(0, stored.size, step)


def _rtol(dtype: Any) -> float:
    """Relative tolerance for a value stored in `dtype` (a NumPy or torch dtype): two roundings
    at its precision, at least 1e-6; 0 (exact) for integers and booleans."""
    name = str(dtype).replace("torch.", "")
    if name == "bool" or name.startswith(("int", "uint")):
        return 0.0
    try:
        eps = float(np.finfo(np.dtype(name)).eps)
    except (TypeError, ValueError):  # bfloat16 (torch, ml_dtypes), float8: 8 bits or fewer
        eps = 2.0 ** -7 if "bfloat16" in name else 2.0 ** -2
    return max(1e-6, 2 * eps)


class _Expected:
    """The parameter's values (or a fold's) at given coordinates of the PyTorch layout."""

    def __init__(self, ours: np.ndarray) -> None:
        self.ours = ours

    def at(self, coords: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Values and their magnitudes (the scale of the rounding errors), as float64."""
        values = self.ours[coords].astype(np.float64)
        return values, np.abs(values)


def _views(stored_shape: tuple[int, ...], ours_shape: tuple[int, ...], picks: np.ndarray
           ) -> Iterator[tuple[np.ndarray, ...]]:
    """For the sampled flat positions of the stored tensor, the parameter's coordinates under
    each way the exporter may have stored it: as is, with its axes permuted, reshaped."""
    stored_shape, ours_shape = tuple(stored_shape), tuple(ours_shape)
    if int(np.prod(stored_shape, dtype=np.int64)) != int(np.prod(ours_shape, dtype=np.int64)):
        return
    if stored_shape == ours_shape:
        yield np.unravel_index(picks, ours_shape)
    if len(ours_shape) == len(stored_shape) and 2 <= len(ours_shape) <= 4:
        where = np.unravel_index(picks, stored_shape)
        for perm in itertools.permutations(range(len(ours_shape))):
            # stored = ours.transpose(perm): stored axis j is ours' axis perm[j]
            if perm == tuple(range(len(perm))):
                continue
            if all(stored_shape[j] == ours_shape[perm[j]] for j in range(len(perm))):
                coords: list[np.ndarray] = [np.empty(0, np.intp)] * len(perm)
                for j, axis in enumerate(perm):
                    coords[axis] = where[j]
                yield tuple(coords)
    if stored_shape != ours_shape:
        yield np.unravel_index(picks, ours_shape)  # a reshape keeps the element order


def _close(got: np.ndarray, expected: _Expected, coords: tuple[np.ndarray, ...], rtol: float
           ) -> bool:
    want, magnitude = expected.at(coords)
    if want.shape != got.shape:
        return False
    both_nan = np.isnan(got) & np.isnan(want)
    with np.errstate(invalid="ignore", over="ignore"):
        ok = np.abs(got - want) <= rtol * magnitude + 1e-30
    return bool(np.all(ok | both_nan | (got == want)))


def _largest_difference(got: np.ndarray, raw: _Expected, views: list[tuple[np.ndarray, ...]]
                        ) -> str:
    """The largest difference from the parameter as it is laid out in the file, in words."""
    want, _ = raw.at(views[0])
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.abs(got - want)
    diff = diff[np.isfinite(diff)]
    return f" (largest difference {float(diff.max()):.3g})" if diff.size else ""


# ---------------------------------------------------------------------------- BatchNorm folds


@dataclass
class _Fold:
    """A BatchNorm `bn` folded into the weight or bias of the module before it."""

    bn: str  # the BatchNorm's state-dict prefix
    eps: float
    kind: str  # "weight" or "bias"
    axis: int  # output-channel axis of the weight (0: Conv, Linear; 1: ConvTranspose)
    follows: bool  # the BatchNorm is the module's next sibling (else a fallback candidate)

    def expected(self, ours: np.ndarray, state: dict[str, Any]) -> _Folded | None:
        p = self.bn + "."
        mean = _numpy(state[p + "running_mean"])
        var = _numpy(state[p + "running_var"])
        if mean is None or var is None:
            return None
        mean, var = mean.astype(np.float64), var.astype(np.float64)
        gamma = _numpy(state[p + "weight"]) if p + "weight" in state else None
        beta = _numpy(state[p + "bias"]) if p + "bias" in state else None
        gamma = np.ones_like(mean) if gamma is None else gamma.astype(np.float64)
        beta = np.zeros_like(mean) if beta is None else beta.astype(np.float64)
        with np.errstate(all="ignore"):
            scale = gamma / np.sqrt(var + self.eps)
        return _Folded(ours, self, scale, mean, beta)


class _Folded(_Expected):
    def __init__(self, ours: np.ndarray, fold: _Fold, scale: np.ndarray, mean: np.ndarray,
                 beta: np.ndarray) -> None:
        super().__init__(ours)
        self.fold, self.scale, self.mean, self.beta = fold, scale, mean, beta

    def at(self, coords: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
        values = self.ours[coords].astype(np.float64)
        with np.errstate(all="ignore"):
            if self.fold.kind == "bias":
                channel = coords[0]
                scale = self.scale[channel]
                folded = (values - self.mean[channel]) * scale + self.beta[channel]
                magnitude = ((np.abs(values) + np.abs(self.mean[channel])) * np.abs(scale)
                             + np.abs(self.beta[channel]))
                return folded, magnitude
            if self.fold.axis == 0:
                channel = coords[0]
            else:  # ConvTranspose (in, out / groups, *kernel): channel of group g, column o
                per_group_in = self.ours.shape[0] * self.ours.shape[1] // len(self.scale)
                channel = (coords[0] // per_group_in) * self.ours.shape[1] + coords[1]
            folded = values * self.scale[channel]
            return folded, np.abs(folded)


class _Owners:
    """The state dict's modules: which are BatchNorms, which BatchNorm follows which module."""

    def __init__(self, module: Any, state: dict[str, Any], graph: _Graph) -> None:
        self.module = module
        self.state = state
        self.graph = graph
        prefixes: list[str] = []
        for key in state:  # state-dict order is registration order, parents first
            prefix = key.rsplit(".", 1)[0] if "." in key else ""
            if prefix not in prefixes:
                prefixes.append(prefix)
        self.prefixes = prefixes
        self.bns = [p for p in prefixes if _entry(p, "running_mean") in state
                    and _entry(p, "running_var") in state
                    and state[_entry(p, "running_var")].ndim == 1]

    def _submodule(self, prefix: str) -> Any:
        """The module at `prefix`, read by attributes (ScriptModules lack get_submodule)."""
        sub = self.module
        try:
            for part in prefix.split(".") if prefix else ():
                sub = getattr(sub, part)
        except Exception:
            return None
        return sub

    def mutable(self, name: str) -> bool:
        """A running statistic of a module in training mode: forward changes it."""
        prefix, _, leaf = name.rpartition(".")
        if leaf not in _STAT_BUFFERS:
            return False
        sub = self._submodule(prefix)
        return bool(getattr(sub, "training", False))

    def _eps(self, bn: str) -> list[float]:
        eps = getattr(self._submodule(bn), "eps", None)
        if isinstance(eps, (int, float)) and not isinstance(eps, bool):
            return [float(eps)]
        return list(_EPS_GUESSES)

    def _next_sibling(self, prefix: str) -> str | None:
        parent = prefix.rsplit(".", 1)[0] if "." in prefix else ""
        siblings = [p for p in self.prefixes if p != parent and
                    (p.rsplit(".", 1)[0] if "." in p else "") == parent]
        if prefix in siblings and siblings.index(prefix) + 1 < len(siblings):
            return siblings[siblings.index(prefix) + 1]
        return None

    def folds(self, name: str, ours: np.ndarray) -> list[_Fold]:
        """BatchNorms that may have been folded into the weight or bias `name`: the module's
        next sibling when it is one, then any whose running statistics the graph lacks; only
        those whose channel count fits."""
        prefix, _, leaf = name.rpartition(".")
        if leaf not in ("weight", "bias") or not prefix or prefix in self.bns:
            return []
        weight = self.state.get(_entry(prefix, "weight"))
        if weight is None or weight.ndim < 2:
            return []  # not a Conv, ConvTranspose or Linear
        # only BatchNorms the graph lacks: one whose statistics are there was not folded
        folded = [bn for bn in self.bns
                  if _entry(bn, "running_mean") not in self.graph.initializers]
        following = self._next_sibling(prefix)
        candidates = sorted(folded, key=lambda bn: bn != following)  # the sibling first
        folds: list[_Fold] = []
        for bn in candidates:
            channels = self.state[_entry(bn, "running_mean")].shape[0]
            if leaf == "bias":
                axes = [0] if ours.ndim == 1 and ours.shape[0] == channels else []
            else:
                axes = [0] if ours.shape[0] == channels else []
                if ours.ndim >= 3 and ours.shape[1] and channels % ours.shape[1] == 0 \
                        and ours.shape[0] % (channels // ours.shape[1]) == 0:
                    axes.append(1)  # ConvTranspose, groups = channels / (out per group)
            for axis in axes:
                folds += [_Fold(bn, eps, leaf, axis, bn == following) for eps in self._eps(bn)]
        return folds


def _entry(prefix: str, leaf: str) -> str:
    return f"{prefix}.{leaf}" if prefix else leaf


class _Graph:
    """The file's initializers by name (subgraphs included) and the names nodes consume."""

    def __init__(self, proto: Any) -> None:
        self.initializers: dict[str, Any] = {}
        self._consumed: set[str] = set()
        self._walk(proto.graph)

    def _walk(self, graph: Any) -> None:
        for init in graph.initializer:
            self.initializers.setdefault(init.name, init)
        for node in graph.node:
            self._consumed.update(node.input)
            for attr in node.attribute:
                if attr.HasField("g"):
                    self._walk(attr.g)
                for sub in attr.graphs:
                    self._walk(sub)

    def consumed(self, name: str) -> bool:
        return name in self._consumed
