"""Sizes read from a config and its sub-configs, and example tensors of each kind of input:
token ids within the vocabulary, masks, images at the configured size, waveforms as long as the
feature extractor's convolutions need, spectrograms of the configured bins and frames.

Every size is looked up, never assumed: the config first, then its sub-configs
(`vision_config`, `text_config`, `audio_config`, `encoder`, ...), then a fallback (Optimum's
defaults) where a fallback is sound.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a tensor is made: the window reads names only
    import torch

# the sizes the files are exported with (none is 0 or 1, so no axis is specialized)
EXPORT_SIZES = {"batch_size": 2, "sequence_length": 5, "past_sequence_length": 3,
                "encoder_sequence_length": 6}
BATCH = "batch_size"
IMAGE_FALLBACK = 64  # Optimum's height and width when a config names no image size
WAVEFORM_PER_FRAME = 320  # samples per frame when a config names no convolutions (16 kHz, 20 ms)


def configs(config: Any, prefer: str = "") -> Iterator[Any]:
    """The config, then its sub-configs (those whose name holds `prefer` first), once each."""
    seen: list[Any] = []
    names = list(getattr(config, "sub_configs", None) or {})
    names += [n for n in ("encoder", "decoder") if n not in names]
    names.sort(key=lambda n: prefer not in n if prefer else False)
    for sub in [config, *(getattr(config, n, None) for n in names)]:
        if sub is not None and hasattr(sub, "to_dict") and not any(sub is s for s in seen):
            seen.append(sub)
            yield sub


def find(config: Any, *names: str, prefer: str = "") -> Any:
    """The first of `names` set (not None) on the config or one of its sub-configs."""
    for sub in configs(config, prefer):
        for name in names:
            value = getattr(sub, name, None)
            if value is not None:
                return value
    return None


def has_sub_config(config: Any, word: str) -> bool:
    """Whether the config holds a sub-config whose name holds `word` (text, vision, audio)."""
    return any(word in name and getattr(config, name, None) is not None
               for name in (getattr(config, "sub_configs", None) or {}))


def text_config(config: Any) -> Any:
    """The decoder's text config (the config itself for most models)."""
    get = getattr(config, "get_text_config", None)
    return get(decoder=True) if get is not None else config


def vocab_size(config: Any, model: Any = None) -> int | None:
    """The text vocabulary: the text config's, else the model's input embeddings'."""
    size = getattr(text_config(config), "vocab_size", None) or find(config, "vocab_size",
                                                                   prefer="text")
    if size is None and model is not None:
        size = getattr(input_embeddings(model), "num_embeddings", None)
    return int(size) if size else None


def input_embeddings(model: Any) -> Any:
    """The model's input embedding module, or None: transformers' `get_input_embeddings`
    raises NotImplementedError for a model whose embedding it cannot find by name (CANINE's
    hash embeddings), and models outside transformers may not have it."""
    get = getattr(model, "get_input_embeddings", None)
    if not callable(get):
        return None
    try:
        return get()
    except (NotImplementedError, AttributeError):
        return None


def image_size(config: Any) -> tuple[int, int]:
    """(height, width) from `image_size` (an int or a pair); Optimum's 64 when none is named."""
    size = find(config, "image_size", prefer="vision")
    if isinstance(size, int) and size > 0:
        return size, size
    if isinstance(size, (list, tuple)) and len(size) >= 2:
        return int(size[-2]), int(size[-1])
    return IMAGE_FALLBACK, IMAGE_FALLBACK


def num_channels(config: Any) -> int:
    value = find(config, "num_channels", prefer="vision")
    return int(value) if isinstance(value, int) and value > 0 else 3


def waveform_length(config: Any, frames: int) -> int:
    """The samples a waveform needs for the feature extractor's convolutions to give `frames`
    frames (`conv_kernel`, `conv_stride`), or WAVEFORM_PER_FRAME a frame when none are named."""
    kernels = find(config, "conv_kernel", prefer="audio")
    strides = find(config, "conv_stride", prefer="audio")
    if not isinstance(kernels, (list, tuple)) or not isinstance(strides, (list, tuple)) \
            or len(kernels) != len(strides) or not kernels:
        return max(frames, 1) * WAVEFORM_PER_FRAME
    length = max(frames, 1)
    for kernel, stride in zip(reversed(kernels), reversed(strides), strict=True):
        length = (length - 1) * int(stride) + int(kernel)
    return length


def mel_bins(config: Any) -> int | None:
    """The spectrogram's feature count: mel bins, or a projection's input width."""
    per_channel = find(config, "input_feat_per_channel", prefer="audio")
    if per_channel:
        return int(per_channel) * int(find(config, "input_channels", prefer="audio") or 1)
    value = find(config, "num_mel_bins", "feature_projection_input_dim", "feature_size",
                 prefer="audio")
    return int(value) if isinstance(value, int) and value > 0 else None


# ---------------------------------------------------------------------------- kinds of input


@dataclass(frozen=True)
class TokenIds:
    """Token ids drawn within the vocabulary, never a special token below 3 where it fits."""

    vocab: int
    length: str = "sequence_length"
    batch: str = BATCH

    def make(self, batch: int, seq: int, generator: torch.Generator) -> torch.Tensor:
        import torch

        low = 3 if self.vocab > 8 else 0
        return torch.randint(low, self.vocab, (batch, seq), generator=generator,
                             dtype=torch.int64)

    def axes(self) -> dict[int, str]:
        return {0: self.batch, 1: self.length}


@dataclass(frozen=True)
class Constant:
    """An all-`value` int64 tensor the shape of the token ids: an attention mask (ones) or
    token type ids (zeros)."""

    value: int
    length: str = "sequence_length"
    batch: str = BATCH

    def make(self, batch: int, seq: int, generator: torch.Generator) -> torch.Tensor:
        import torch

        return torch.full((batch, seq), self.value, dtype=torch.int64)

    def axes(self) -> dict[int, str]:
        return {0: self.batch, 1: self.length}


@dataclass(frozen=True)
class Image:
    """Images at the config's size and channel count; the batch is their only free axis."""

    channels: int
    height: int
    width: int
    batch: str = BATCH

    def make(self, batch: int, seq: int, generator: torch.Generator) -> torch.Tensor:
        import torch

        return torch.randn((batch, self.channels, self.height, self.width), generator=generator)

    def axes(self) -> dict[int, str]:
        return {0: self.batch}


@dataclass(frozen=True)
class Waveform:
    """A raw waveform in [-1, 1]: `seq` frames' worth of samples (config: the convolutions)."""

    config: Any

    def make(self, batch: int, seq: int, generator: torch.Generator) -> torch.Tensor:
        import torch

        samples = waveform_length(self.config, seq)
        return torch.rand((batch, samples), generator=generator) * 2 - 1

    def axes(self) -> dict[int, str]:
        return {0: BATCH, 1: "audio_sequence_length"}


@dataclass(frozen=True)
class Spectrogram:
    """Log-mel features, (batch, bins, frames) or (batch, frames, bins) as the model takes
    them; `frames` None: a length proportional to the sequence, and a dynamic axis."""

    bins: int
    frames: int | None
    bins_first: bool

    def make(self, batch: int, seq: int, generator: torch.Generator) -> torch.Tensor:
        import torch

        frames = self.frames if self.frames is not None else 8 * max(seq, 1)
        shape = (batch, self.bins, frames) if self.bins_first else (batch, frames, self.bins)
        return torch.randn(shape, generator=generator)

    def axes(self) -> dict[int, str]:
        if self.frames is not None:
            return {0: BATCH}
        return {0: BATCH, 2 if self.bins_first else 1: "audio_sequence_length"}


def spectrogram_layouts(config: Any) -> list[Spectrogram]:
    """The spectrogram shapes the config allows, the likeliest first: a fixed frame count
    where the config names one (`max_source_positions` read by a two-stride convolution
    over (bins, frames), as Whisper's encoder; `max_length` frames over (frames, bins), as
    AST's), then a free frame count either way round. The model's own forward picks."""
    bins = mel_bins(config)
    if bins is None:
        return []
    layouts: list[Spectrogram] = []
    positions = find(config, "max_source_positions", prefer="audio")
    if isinstance(positions, int) and positions > 0:
        layouts.append(Spectrogram(bins, 2 * positions, True))
    length = find(config, "max_length", prefer="audio")
    if isinstance(length, int) and length > 0:
        layouts.append(Spectrogram(bins, length, False))
    layouts += [Spectrogram(bins, None, False), Spectrogram(bins, None, True)]
    return layouts
