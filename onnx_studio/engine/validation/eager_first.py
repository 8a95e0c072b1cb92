"""PyTorch's side of a Hugging Face validation, computed before ONNX Runtime opens any file.

Holding the eager model and an ONNX Runtime session (its own copy of every weight) at once
costs twice the weights; a model whose float32 weights are more than half the machine's
memory cannot be validated that way. So every trial's inputs and eager outputs (twice: a model
that is not the same twice is told apart) and the generation's reference are computed first
and kept (small arrays), the model is freed (`release_model`), and only then are the files
opened, one session at a time.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

Eager = Callable[[Any, dict[str, Any]], list[np.ndarray]]
RUNS = 2  # the eager outputs of a trial and a second run of the same inputs


@dataclass
class GenerationReference:
    """PyTorch's side of the generation check: what transformers' generate gave on the
    prompt (the raw logits of every step, [steps, vocab], and the tokens fed after it), the
    fixed random continuation with the eager logits over it (or the sentence saying the model
    fails on it), and what the ONNX loop needs to start (the prompt: a decoder's input_ids or
    an encoder's inputs; an encoder-decoder's start token; a decoder's empty cache)."""

    expected: np.ndarray
    fed: list[int]
    prompt: dict[str, Any]
    start: int | None
    continuation: tuple[list[int], np.ndarray | str]
    empty_past: dict[str, np.ndarray] | None = None


class EagerRuns:
    """Each trial's inputs and eager outputs by (file, trial kind): computed on the first ask
    while the model lives, the same arrays (or the same error) on every later ask, also after
    the model is freed."""

    def __init__(self, eager: Eager) -> None:
        self._eager = eager
        self._inputs: dict[tuple[str, str], dict[str, Any] | BaseException] = {}
        self._runs: dict[tuple[str, str, int], list[np.ndarray] | BaseException] = {}

    def inputs(self, part: Any, kind: str, size: tuple[int, int, int] | None,
               seed: int) -> dict[str, Any]:
        """The trial's inputs (torch tensors by ONNX input name): the export's own for None."""
        key = (part.file, kind)
        if key not in self._inputs:
            try:
                self._inputs[key] = part.inputs if size is None else part.make_inputs(seed,
                                                                                      *size)
            except Exception as exc:  # raised again on every ask, as the model raised it
                self._inputs[key] = exc
        found = self._inputs[key]
        if isinstance(found, BaseException):
            raise found
        return found

    def outputs(self, part: Any, kind: str, run: int = 0) -> list[np.ndarray]:
        """The eager outputs of the trial's `run`-th run (0, or 1 for the repeat); raises
        what the model raised on these inputs (asked after `inputs`)."""
        key = (part.file, kind, run)
        if key not in self._runs:
            inputs = self._inputs[(part.file, kind)]
            if isinstance(inputs, BaseException):
                raise inputs
            try:
                self._runs[key] = self._eager(part, inputs)
            except Exception as exc:
                self._runs[key] = exc
        found = self._runs[key]
        if isinstance(found, BaseException):
            raise found
        return found

    def compute(self, part: Any, trials: list[tuple[str, tuple[int, int, int] | None]],
                seed: int) -> None:
        """Every run of every trial of `part`, so that none needs the model later; a trial
        whose inputs cannot be made is left to fail when it runs."""
        for kind, size in trials:
            try:
                self.inputs(part, kind, size, seed)
            except Exception:  # the trial reports it, as before
                continue
            for run in range(RUNS):
                try:
                    self.outputs(part, kind, run)
                except Exception:  # kept: raised again when the trial asks
                    break


def _released(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("the PyTorch model was freed after its reference outputs were computed")


def release_model(hf: Any) -> None:
    """Drop every reference the HfModel `hf` holds to its PyTorch model (the model, each
    part's module and input maker, which run it) and give the memory back to the system."""
    hf.model = None
    for part in hf.parts:
        part.module = _released
        part.make_inputs = _released
    gc.collect()
    return_freed_memory()


def return_freed_memory() -> None:
    """Ask the C allocator to hand freed heap pages back to the system (glibc keeps freed
    blocks under its mmap threshold, tens of MB, for reuse: a freed model's smaller weights
    would stay in the process's resident memory)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):  # not glibc (musl): nothing to ask
        ctypes.CDLL("libc.so.6").malloc_trim(0)
