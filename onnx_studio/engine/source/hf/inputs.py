"""The inputs a Hugging Face model takes, derived from the model: its forward signature and
`main_input_name` choose the inputs, the config (and its sub-configs) sizes them.

- the main input (`input_ids`, `pixel_values`, `input_values`, `input_features`) always;
- token ids, with their attention mask (and token type ids where the config has types), when
  forward takes `input_ids` and the model reads text (its main input, or a text sub-config as
  a two-tower CLIP/SigLIP has); images likewise with a vision sub-config;
- `decoder_input_ids` for an encoder-decoder run as one file;
- a two-tower model (one that scores every text against every image: CLIP, SigLIP) takes texts
  and images in batches of their own, as Optimum names them (`Plan.apart`);
- a required argument nothing here can build is a kind `inputs` error naming it.

An input is made by its kind (onnx_studio.engine.source.hf.dummies); a spectrogram's layout has
several candidates, and the model's own forward picks one (`Plan.variants`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.source.hf import dummies
from onnx_studio.engine.source.hf.tasks import files_of, model_class_name, with_past

if TYPE_CHECKING:  # torch is imported where a tensor is made: the window reads names only
    import torch

Inputs = dict[str, "torch.Tensor"]
MAIN_INPUTS = ("input_ids", "pixel_values", "input_values", "input_features")
_SKIPPED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def forward_params(forward: Callable[..., Any]) -> list[inspect.Parameter]:
    """forward()'s named parameters, `self`, *args and **kwargs left out."""
    params = inspect.signature(forward).parameters.values()
    return [p for p in params if p.name != "self" and p.kind not in _SKIPPED]


def _reads_text(main: str, config: Any) -> bool:
    return main == "input_ids" or dummies.has_sub_config(config, "text")


def _reads_images(main: str, config: Any) -> bool:
    return main == "pixel_values" or dummies.has_sub_config(config, "vision")


def _is_mel(main: str, config: Any) -> bool:
    """input_features are always a spectrogram; input_values are one when the config names
    mel bins (AST), else a raw waveform (Wav2Vec2, HuBERT, WavLM)."""
    return main == "input_features" or (
        main == "input_values" and dummies.find(config, "num_mel_bins", prefer="audio")
        is not None)


def choose(params: list[str], main: str, config: Any, *, encoder_only: bool = False) -> list[str]:
    """The inputs fed to a forward taking `params` whose main input is `main`, in forward
    order. `encoder_only`: the encoder half of an encoder-decoder (no decoder inputs)."""
    wanted = {main} if main in params else set()
    if "input_ids" in params and _reads_text(main, config):
        wanted.add("input_ids")
        if "attention_mask" in params:
            wanted.add("attention_mask")
        types = getattr(dummies.text_config(config), "type_vocab_size", None)
        if "token_type_ids" in params and isinstance(types, int) and types > 0:
            wanted.add("token_type_ids")
    if "pixel_values" in params and _reads_images(main, config):
        wanted.add("pixel_values")
    if not encoder_only and "decoder_input_ids" in params and \
            bool(getattr(config, "is_encoder_decoder", False)):
        wanted.add("decoder_input_ids")
    return [name for name in params if name in wanted]


@dataclass
class Plan:
    """Which inputs a forward takes (in its order) and the kind of each; `make` draws them."""

    kinds: dict[str, Any] = field(default_factory=dict)  # name -> a kind of engine...dummies
    options: dict[str, Any] = field(default_factory=dict)  # constant keyword arguments
    # the spectrogram layouts still to try for `audio` (the first that runs is kept)
    audio: str = ""
    layouts: list[Any] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return list(self.kinds)

    def make(self, seed: int, batch: int, seq: int) -> Inputs:
        """Every input at `batch` x `seq` (the sequence: tokens, or audio frames), seeded."""
        import torch

        generator = torch.Generator().manual_seed(seed)
        return {name: kind.make(batch, seq, generator) for name, kind in self.kinds.items()}

    def dynamic(self) -> dict[str, dict[int, str]]:
        return {name: kind.axes() for name, kind in self.kinds.items()}

    def apart(self) -> Plan:
        """This plan with texts and images in batches of their own (`text_batch_size`,
        `image_batch_size`): for a model whose outputs score each text against each image."""
        kinds = {name: replace(kind, batch="image_batch_size" if isinstance(kind, dummies.Image)
                               else "text_batch_size") if hasattr(kind, "batch") else kind
                 for name, kind in self.kinds.items()}
        return replace(self, kinds=kinds)

    def variants(self) -> Iterator[Plan]:
        """This plan, then one per other spectrogram layout (the model's forward picks)."""
        yield self
        for layout in self.layouts[1:]:
            yield replace(self, kinds={**self.kinds, self.audio: layout}, layouts=[layout])


def plan(forward: Callable[..., Any], main: str, config: Any, *, model: Any = None,
         encoder_only: bool = False, owner: str = "the model",
         length: str = "sequence_length") -> Plan:
    """The inputs of `forward` (main input `main`) for `config`; `model` (the instance) gives
    the vocabulary when no config names one; `length` names the token axis. Raises kind
    `inputs` (exit 2) naming an input that cannot be built, or a required argument nothing
    here builds."""
    params = forward_params(forward)
    names = [p.name for p in params]
    chosen = choose(names, main, config, encoder_only=encoder_only)
    if main not in chosen:
        raise _cannot_build(main, owner, "it is not an argument of forward()" if main not in
                            names else "the studio makes " + ", ".join(MAIN_INPUTS) + " only")
    required = [p.name for p in params if p.default is inspect.Parameter.empty
                and p.name not in chosen]
    if required:
        raise _cannot_build(required[0], owner, "forward() requires it and the studio cannot "
                            "derive it from the config")
    result = Plan()
    for name in chosen:
        if name in ("input_ids", "decoder_input_ids"):
            vocab = dummies.vocab_size(config, model)
            if vocab is None:
                raise _cannot_build(name, owner, "neither the config nor the model names a "
                                    "vocabulary size (vocab_size)")
            axis = "decoder_sequence_length" if name.startswith("decoder") else length
            result.kinds[name] = dummies.TokenIds(vocab, axis)
        elif name in ("attention_mask", "token_type_ids"):
            result.kinds[name] = dummies.Constant(1 if name == "attention_mask" else 0, length)
        elif name == "pixel_values":
            height, width = dummies.image_size(config)
            result.kinds[name] = dummies.Image(dummies.num_channels(config), height, width)
        elif _is_mel(name, config):
            layouts = dummies.spectrogram_layouts(config)
            if not layouts:
                raise _cannot_build(name, owner, "the config names no mel bins "
                                    "(num_mel_bins, feature_size)")
            result.kinds[name], result.audio, result.layouts = layouts[0], name, layouts
        elif name == "input_values":  # without mel bins: a raw waveform
            result.kinds[name] = dummies.Waveform(config)
        else:
            raise _cannot_build(name, owner, "the studio makes " + ", ".join(MAIN_INPUTS) +
                                " only")
    if "use_cache" in names:  # one file without the cache
        result.options["use_cache"] = False
    return result


def _cannot_build(name: str, owner: str, why: str) -> StudioError:
    return StudioError(
        "inputs", f"The studio cannot build the input {name!r} of {owner}: {why}.",
        f"Choose a task whose inputs the studio can build (--task), or export the model "
        f"through a Python file whose factory returns it, giving {name} with --input "
        f"{name}=SHAPE:DTYPE.", exit_code=2)


def main_input(model_or_class: Any, fallback: str = "input_ids") -> str:
    """The model's `main_input_name` (transformers' own choice of its first input)."""
    name = getattr(model_or_class, "main_input_name", None)
    return name if isinstance(name, str) and name else fallback


def input_names(task: str, config: Any) -> list[str]:
    """The inputs of the first file `task` exports, from the config and the model's class
    alone (no weights): the names the window lists; [] when the class is the folder's own
    code and the folder is not trusted."""
    import transformers

    files = files_of(task, config)
    name = model_class_name(config, task) or ""
    if "." not in name:
        cls = getattr(transformers, name, None)
    elif type(config).__module__.startswith("transformers_modules"):  # its code already ran
        from transformers.dynamic_module_utils import get_class_from_dynamic_module

        cls = get_class_from_dynamic_module(name, config._name_or_path)
    else:
        cls = None
    if cls is None:
        return []
    params = [p.name for p in forward_params(cls.forward)]
    if files == "decoder" and with_past(task):  # as parts.DecoderWithPast takes them
        text = dummies.text_config(config)
        layers = int(getattr(text, "num_hidden_layers", 0) or getattr(text, "n_layer", 0) or 0)
        positions = ["position_ids"] if "position_ids" in params else []
        return ["input_ids", "attention_mask", *positions] + [
            f"past_key_values.{n}.{kv}" for n in range(layers) for kv in ("key", "value")]
    main = main_input(cls)
    return choose(params, main, config, encoder_only=files == "seq2seq")
