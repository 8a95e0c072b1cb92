"""Example inputs for a task and a config: token ids within the vocabulary, an all-ones
attention mask, pixel values at the config's image size, audio features of the right length."""

from __future__ import annotations

from typing import Any

import torch

# the sizes the files are exported with (none is 0 or 1, so no axis is specialized)
EXPORT_SIZES = {"batch_size": 2, "sequence_length": 5, "past_sequence_length": 3,
                "encoder_sequence_length": 6}


def text_config(config: Any) -> Any:
    """The decoder's text config (the config itself for most models)."""
    get = getattr(config, "get_text_config", None)
    return get(decoder=True) if get is not None else config


def token_ids(config: Any, batch: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """Token ids drawn within the vocabulary, never a special token below 3 where it fits."""
    vocab = int(text_config(config).vocab_size)
    low = 3 if vocab > 8 else 0
    return torch.randint(low, vocab, (batch, length), generator=generator, dtype=torch.int64)


def pixel_values(config: Any, batch: int, generator: torch.Generator) -> torch.Tensor:
    """Images at the config's size and channel count."""
    size = getattr(config, "image_size", 224)
    height, width = (size, size) if isinstance(size, int) else tuple(size)
    channels = int(getattr(config, "num_channels", 3))
    return torch.randn((batch, channels, height, width), generator=generator)


def input_features(config: Any, batch: int, generator: torch.Generator) -> torch.Tensor:
    """Log-mel features of the length the encoder expects (twice its positions for Whisper)."""
    mels = int(getattr(config, "num_mel_bins", 80))
    frames = 2 * int(getattr(config, "max_source_positions", 1500))
    return torch.randn((batch, mels, frames), generator=generator)
