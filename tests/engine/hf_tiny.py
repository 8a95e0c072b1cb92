"""Tiny random-weight builds of real transformers architectures, from their config classes,
saved with save_pretrained (no hub): the architectures the derivation tests run on. Each entry
is (config class, model class, config fields); hidden 32, 2 layers, 2 heads in each config's
own spelling. Also a folder with its own model code (`auto_map`), as a Hub repository with
custom code is."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

TEXT = {"vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64}
VISION = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
          "intermediate_size": 64, "image_size": 32, "patch_size": 8}
AUDIO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
         "intermediate_size": 64, "conv_dim": [16, 16], "conv_stride": [5, 2],
         "conv_kernel": [10, 3], "num_conv_pos_embeddings": 16,
         "num_conv_pos_embedding_groups": 2}
DECODER = {**TEXT, "num_key_value_heads": 2, "max_position_embeddings": 64}
SEQ2SEQ = {"vocab_size": 99, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
           "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
           "decoder_ffn_dim": 64, "max_position_embeddings": 64, "decoder_start_token_id": 0,
           "pad_token_id": 0, "eos_token_id": 1}

ARCHITECTURES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "clip": ("CLIPConfig", "CLIPModel", {
        "text_config": {**TEXT, "max_position_embeddings": 32}, "vision_config": VISION,
        "projection_dim": 16}),
    "siglip": ("SiglipConfig", "SiglipModel", {
        "text_config": {**TEXT, "max_position_embeddings": 32}, "vision_config": VISION}),
    "wavlm": ("WavLMConfig", "WavLMModel", {**AUDIO, "num_buckets": 16,
                                              "max_bucket_distance": 32}),
    "hubert": ("HubertConfig", "HubertModel", AUDIO),
    "sew": ("SEWConfig", "SEWModel", {**AUDIO, "squeeze_factor": 2}),
    "wav2vec2-ctc": ("Wav2Vec2Config", "Wav2Vec2ForCTC", {**AUDIO, "vocab_size": 20}),
    "marian": ("MarianConfig", "MarianMTModel", SEQ2SEQ),
    "ast": ("ASTConfig", "ASTForAudioClassification", {
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "num_mel_bins": 16, "max_length": 32, "patch_size": 8,
        "frequency_stride": 8, "time_stride": 8, "num_labels": 3}),
    "funnel": ("FunnelConfig", "FunnelModel", {
        "vocab_size": 99, "d_model": 32, "n_head": 2, "d_head": 16, "d_inner": 64,
        "block_sizes": [1, 1], "num_decoder_layers": 1}),
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", {
        **DECODER, "num_local_experts": 4, "num_experts_per_tok": 2}),
    "qwen2moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM", {
        **DECODER, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
        "shared_expert_intermediate_size": 32}),
    "llama": ("LlamaConfig", "LlamaForCausalLM", DECODER),
    "bert": ("BertConfig", "BertModel", {**TEXT, "max_position_embeddings": 64}),
    "vit": ("ViTConfig", "ViTForImageClassification", {**VISION, "num_labels": 3}),
    "whisper": ("WhisperConfig", "WhisperForConditionalGeneration", {
        "vocab_size": 99, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
        "encoder_attention_heads": 2, "decoder_attention_heads": 2, "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64, "num_mel_bins": 16, "max_source_positions": 16,
        "max_target_positions": 32, "decoder_start_token_id": 1, "pad_token_id": 0,
        "bos_token_id": 1, "eos_token_id": 2}),
    # beyond the corpus: a recurrent state for a cache or none returned, no vocabulary name,
    # an exporter failure inside transformers' code, a forward() without position_ids,
    # random numbers drawn in forward()
    "mamba": ("MambaConfig", "MambaForCausalLM", {
        "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "state_size": 8,
        "expand": 2, "conv_kernel": 4, "bos_token_id": 1, "eos_token_id": 2,
        "pad_token_id": 0}),
    "canine": ("CanineConfig", "CanineModel", {
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "intermediate_size": 64, "downsampling_rate": 2, "num_hash_buckets": 64,
        "num_hash_functions": 2}),
    "xlnet": ("XLNetConfig", "XLNetModel", {
        "vocab_size": 99, "d_model": 32, "n_layer": 2, "n_head": 2, "d_inner": 64}),
    "recurrentgemma": ("RecurrentGemmaConfig", "RecurrentGemmaForCausalLM", {
        "vocab_size": 99, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 16, "lru_width": 32,
        "attention_window_size": 8, "block_types": ["recurrent", "attention"],
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}),
    "vitmae": ("ViTMAEConfig", "ViTMAEModel", {**VISION, "mask_ratio": 0.0}),
    "mpt": ("MptConfig", "MptForCausalLM", {
        "vocab_size": 99, "d_model": 32, "n_layers": 2, "n_heads": 2, "max_seq_len": 64,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}),
    # ALiBi computed in bfloat16 (no ONNX Runtime CPU kernel); a loop over the sequence and
    # an attention mask forward() names but does not read
    "falcon-alibi": ("FalconConfig", "FalconForCausalLM", {
        "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
        "alibi": True, "max_position_embeddings": 64}),
    "rwkv": ("RwkvConfig", "RwkvForCausalLM", {
        "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2,
        "attention_hidden_size": 32, "intermediate_size": 64, "context_length": 64}),
}


def build(name: str, folder: Path) -> Path:
    """Save the tiny model `name` into folder/name (once) and return that folder."""
    import torch
    import transformers

    target = folder / name
    if (target / "config.json").exists():
        return target
    config_class, model_class, fields = ARCHITECTURES[name]
    torch.manual_seed(0)
    config = getattr(transformers, config_class)(**fields)
    getattr(transformers, model_class)(config).eval().save_pretrained(target)
    return target


def config_of(name: str) -> Any:
    """The tiny config of `name`, with `architectures` as save_pretrained writes it."""
    import transformers

    config_class, model_class, fields = ARCHITECTURES[name]
    config = getattr(transformers, config_class)(**fields)
    config.architectures = [model_class]
    return config


CUSTOM_CONFIG = '''
from transformers import PretrainedConfig


class TinyConfig(PretrainedConfig):
    model_type = "tiny-studio-custom"

    def __init__(self, vocab_size=50, hidden_size=8, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        super().__init__(**kwargs)
'''
CUSTOM_MODEL = '''
import torch
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from .configuration_tiny import TinyConfig


class TinyModel(PreTrainedModel):
    config_class = TinyConfig
    main_input_name = "input_ids"

    def __init__(self, config):
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.vocab_size, config.hidden_size)
        self.proj = torch.nn.Linear(config.hidden_size, config.hidden_size)
        self.post_init()

    def forward(self, input_ids, attention_mask=None, **kwargs):
        hidden = self.proj(self.embed(input_ids))
        if attention_mask is not None:
            hidden = hidden * attention_mask[..., None].to(hidden.dtype)
        return BaseModelOutput(last_hidden_state=hidden)
'''


def custom_code_folder(folder: Path) -> Path:
    """A save_pretrained folder whose model type transformers does not know, with its own
    configuration_tiny.py and modeling_tiny.py named by config.json's auto_map (written by
    hand, as a Hub repository with custom code holds them), and random weights."""
    import torch
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "configuration_tiny.py").write_text(textwrap.dedent(CUSTOM_CONFIG), "utf-8")
    (folder / "modeling_tiny.py").write_text(textwrap.dedent(CUSTOM_MODEL), "utf-8")
    config = {"model_type": "tiny-studio-custom", "architectures": ["TinyModel"],
              "auto_map": {"AutoConfig": "configuration_tiny.TinyConfig",
                           "AutoModel": "modeling_tiny.TinyModel"},
              "vocab_size": 50, "hidden_size": 8}
    (folder / "config.json").write_text(json.dumps(config), "utf-8")
    generator = torch.Generator().manual_seed(0)
    save_file({"embed.weight": torch.randn(50, 8, generator=generator),
               "proj.weight": torch.randn(8, 8, generator=generator),
               "proj.bias": torch.randn(8, generator=generator)},
              str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder
