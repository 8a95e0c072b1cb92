"""The corpus: tiny random-weight Hugging Face models of real transformers architectures, saved
as a user's model folder is (`save_pretrained`), to be exported with `onnx-studio export hf:DIR`.

Each row names the transformers class saved (its head decides the default task, as the folder's
`architectures` entry does for a user's model) and the config: hidden ~32, 2 layers, a
vocabulary of 99 with its special tokens inside it, 32x32 images, short audio; built from the
config class with `torch.manual_seed(0)`, no hub access. A row's outcome is one of:

- exported and validated with no warning (the default);
- failed with its real cause (`fails`): the error names it and its hint says what to change,
  and those command-line arguments (`Failure.fix`) make the export pass (where no argument
  could, `fix=None`, the failure would be the row's outcome; no row is so today);
- `pending`: it fails today for a cause another part of the project is fixing; the test is an
  expected failure (strict), so it flips to a pass, and says so, once the fix lands (no row
  is pending today).

`DEFAULT_RUN` names the rows the default test run exports (one per family, a few
minutes on two workers); the others are marked `corpus_full` (`python -m pytest -m corpus_full
tests/corpus` runs them).

Used by tests/corpus/test_hf_corpus.py and tests/benchmarks/bench_corpus.py (the "Architectures"
table of docs/hugging-face.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

VOCAB = 99
IDS = {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
DECODER = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "max_position_embeddings": 64, **IDS}
ENCODER = {"vocab_size": VOCAB, "hidden_size": 32, "intermediate_size": 64,
           "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64}
SEQ2SEQ = {"vocab_size": VOCAB, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
           "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 64,
           "decoder_ffn_dim": 64, "max_position_embeddings": 64}
VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
       "intermediate_size": 64, "image_size": 32, "patch_size": 8}
STAGES = {"hidden_sizes": [8, 16], "depths": [1, 1]}
SWIN = {"image_size": 32, "patch_size": 4, "embed_dim": 16, "depths": [1, 1],
        "num_heads": [2, 2], "window_size": 4}
AUDIO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "conv_dim": [16, 16], "conv_stride": [5, 2],
         "conv_kernel": [10, 3], "num_conv_pos_embeddings": 16,
         "num_conv_pos_embedding_groups": 2}
TEXT_TOWER = {**ENCODER, **IDS}
VISION_TOWER = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                "num_attention_heads": 4, "image_size": 32, "patch_size": 8}
# a window the 5-token prompt and its 20 generated tokens cross (and the independent check's
# 12 positions)
WINDOW = 8


@dataclass(frozen=True)
class Failure:
    """A failure with its real cause: what the error says, and the fix its hint names."""

    kind: str                  # error.kind
    names: tuple[str, ...]     # words the message must contain (the cause)
    hint: tuple[str, ...]      # words the hint must contain (the fix)
    fix: tuple[str, ...] | None  # the command-line arguments that apply the hint (None:
    #                              no argument can; the row's outcome is the failure itself)


# transformers' default experts implementation for mixtures of experts (grouped_mm) has no ONNX
# translation; the hint names the config switch to an implementation that exports
MOE = Failure("unsupported_operator", names=("grouped_mm_fallback",),
              hint=("--model-kwarg experts_implementation=batched_mm",),
              fix=("--model-kwarg", "experts_implementation=batched_mm"))
# Funnel's pooling computes lengths as Python ints, so torch.export fixes the sequence length:
# the export warns naming the axis, and the validation's other-size trial fails saying which
# file cannot run at which sizes. Exported at the length it will run at (--static-dim), the
# file is what the model computes there, and validation tries other batch sizes.
BAKED = Failure("validation", names=("model.onnx dynamic-size", "sequence_length=7",
                                     "Expected: 5"),
                hint=("fixed in it while exporting", "--static-dim DIM=SIZE"),
                fix=("--static-dim", "sequence_length=8"))


@dataclass(frozen=True)
class Architecture:
    name: str
    family: str                # decoder | encoder | seq2seq | vision | audio | multimodal
    model_class: str           # the transformers class saved with save_pretrained
    config: dict[str, Any]
    args: tuple[str, ...] = ()  # more command-line arguments (e.g. --task)
    fails: Failure | None = None
    pending: str | None = None  # see the module docstring
    notes: str = ""            # what the row shows, for the docs' table

    @property
    def slug(self) -> str:
        return self.name.lower().replace("-", "_").replace(" ", "_")

    def build(self, folder: Path) -> Path:
        """The model saved into folder/slug (once); returns that folder."""
        import torch
        import transformers

        target = folder / self.slug
        if (target / "config.json").is_file():
            return target
        model_class = getattr(transformers, self.model_class)
        torch.manual_seed(0)
        model = model_class(model_class.config_class(**self.config))
        model.save_pretrained(target)
        return target


A = Architecture
ARCHITECTURES: list[Architecture] = [
    # ------------------------------------------------------------------ decoders
    A("Llama", "decoder", "LlamaForCausalLM", DECODER),
    A("Mistral", "decoder", "MistralForCausalLM", {**DECODER, "sliding_window": WINDOW},
      notes="sliding window 8"),
    A("Qwen2", "decoder", "Qwen2ForCausalLM", DECODER),
    A("Qwen3", "decoder", "Qwen3ForCausalLM", {**DECODER, "head_dim": 8}),
    A("Gemma", "decoder", "GemmaForCausalLM", {**DECODER, "head_dim": 8}),
    A("Gemma2", "decoder", "Gemma2ForCausalLM",
      {**DECODER, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": WINDOW},
      notes="sliding window 8 (every other layer), logit soft-capping"),
    A("Gemma3", "decoder", "Gemma3ForCausalLM",
      {**DECODER, "head_dim": 8, "query_pre_attn_scalar": 8, "sliding_window": WINDOW,
       "layer_types": ["sliding_attention", "full_attention"]},
      notes="sliding window 8 (every other layer)"),
    A("Phi3", "decoder", "Phi3ForCausalLM", DECODER),
    A("Phi", "decoder", "PhiForCausalLM", DECODER),
    A("Falcon", "decoder", "FalconForCausalLM",
      {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2,
       "num_attention_heads": 4, **IDS}),
    A("GPT-J", "decoder", "GPTJForCausalLM",
      {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "rotary_dim": 4,
       "n_positions": 64, **IDS}),
    A("GPT-2", "decoder", "GPT2LMHeadModel",
      {"vocab_size": VOCAB, "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 64,
       **IDS}),
    A("GPT-Neo", "decoder", "GPTNeoForCausalLM",
      {"vocab_size": VOCAB, "hidden_size": 32, "num_layers": 2, "num_heads": 4,
       "attention_types": [[["global", "local"], 1]], "window_size": WINDOW,
       "max_position_embeddings": 64, **IDS},
      notes="local attention window 8"),
    A("GPT-NeoX", "decoder", "GPTNeoXForCausalLM", {**ENCODER, **IDS}),
    A("OPT", "decoder", "OPTForCausalLM",
      {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2,
       "num_attention_heads": 4, "ffn_dim": 64, "word_embed_proj_dim": 32,
       "max_position_embeddings": 64, "pad_token_id": 1, "bos_token_id": 2,
       "eos_token_id": 2}),
    A("Bloom", "decoder", "BloomForCausalLM",
      {"vocab_size": VOCAB, "hidden_size": 32, "n_layer": 2, "n_head": 4, **IDS},
      notes="ALiBi"),
    A("OLMo2", "decoder", "Olmo2ForCausalLM", DECODER),
    A("Cohere", "decoder", "CohereForCausalLM", DECODER),
    A("Starcoder2", "decoder", "Starcoder2ForCausalLM", DECODER),
    A("StableLM", "decoder", "StableLmForCausalLM", DECODER),
    A("Granite", "decoder", "GraniteForCausalLM", DECODER),
    A("Mixtral", "decoder", "MixtralForCausalLM",
      {**DECODER, "num_local_experts": 4, "num_experts_per_tok": 2}, fails=MOE,
      notes="mixture of experts"),
    A("Qwen2-MoE", "decoder", "Qwen2MoeForCausalLM",
      {**DECODER, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
       "shared_expert_intermediate_size": 32}, fails=MOE, notes="mixture of experts"),
    # ------------------------------------------------------------------ encoders
    A("BERT", "encoder", "BertForSequenceClassification", ENCODER),
    A("RoBERTa", "encoder", "RobertaModel", {**ENCODER, "pad_token_id": 1}),
    A("XLM-RoBERTa", "encoder", "XLMRobertaForSequenceClassification",
      {**ENCODER, "pad_token_id": 1}),
    A("DeBERTa", "encoder", "DebertaModel", ENCODER),
    A("DeBERTa-v2", "encoder", "DebertaV2ForSequenceClassification", ENCODER),
    A("ModernBERT", "encoder", "ModernBertModel",
      {**ENCODER, "local_attention": WINDOW, **IDS, "cls_token_id": 1, "sep_token_id": 2},
      notes="local attention window 8"),
    A("Funnel", "encoder", "FunnelModel",
      {"vocab_size": VOCAB, "block_sizes": [1, 1], "d_model": 32, "n_head": 4, "d_head": 8,
       "d_inner": 64, "num_decoder_layers": 1}, fails=BAKED,
      notes="sequence length fixed by the model (warned at export)"),
    A("ALBERT", "encoder", "AlbertForSequenceClassification",
      {**ENCODER, "embedding_size": 16}),
    A("DistilBERT", "encoder", "DistilBertModel",
      {"vocab_size": VOCAB, "dim": 32, "n_layers": 2, "n_heads": 4, "hidden_dim": 64,
       "max_position_embeddings": 64}),
    A("ELECTRA", "encoder", "ElectraForSequenceClassification",
      {**ENCODER, "embedding_size": 16}),
    A("MPNet", "encoder", "MPNetModel", ENCODER),
    A("ConvBERT", "encoder", "ConvBertModel", ENCODER),
    A("RoFormer", "encoder", "RoFormerModel", ENCODER),
    A("MobileBERT", "encoder", "MobileBertModel",
      {**ENCODER, "embedding_size": 16, "intra_bottleneck_size": 16,
       "num_feedforward_networks": 1}),
    A("SqueezeBERT", "encoder", "SqueezeBertModel", {**ENCODER, "embedding_size": 32}),
    # ------------------------------------------------------------------ seq2seq
    A("T5", "seq2seq", "T5ForConditionalGeneration",
      {"vocab_size": VOCAB, "d_model": 32, "d_kv": 8, "d_ff": 64, "num_layers": 2,
       "num_heads": 4, "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 1}),
    A("BART", "seq2seq", "BartForConditionalGeneration", SEQ2SEQ),
    A("mBART", "seq2seq", "MBartForConditionalGeneration", SEQ2SEQ,
      notes="forced end token at the last step"),
    A("Pegasus", "seq2seq", "PegasusForConditionalGeneration", SEQ2SEQ),
    A("Marian", "seq2seq", "MarianMTModel",
      {**SEQ2SEQ, "decoder_start_token_id": 98, "pad_token_id": 98},
      notes="no ForConditionalGeneration suffix; task from transformers' auto mappings"),
    A("BlenderbotSmall", "seq2seq", "BlenderbotSmallForConditionalGeneration", SEQ2SEQ),
    A("M2M100", "seq2seq", "M2M100ForConditionalGeneration", SEQ2SEQ),
    # ------------------------------------------------------------------ vision
    A("ViT", "vision", "ViTForImageClassification", VIT),
    A("DeiT", "vision", "DeiTForImageClassification", VIT),
    A("BEiT", "vision", "BeitForImageClassification", VIT),
    A("DINOv2", "vision", "Dinov2Model", VIT),
    A("ConvNeXt", "vision", "ConvNextForImageClassification",
      {**STAGES, "num_stages": 2, "image_size": 32}),
    A("ConvNeXtV2", "vision", "ConvNextV2ForImageClassification",
      {**STAGES, "num_stages": 2, "image_size": 32}),
    A("ResNet", "vision", "ResNetForImageClassification",
      {**STAGES, "embedding_size": 8, "layer_type": "basic", "image_size": 32}),
    A("RegNet", "vision", "RegNetForImageClassification",
      {**STAGES, "embedding_size": 8, "groups_width": 8}),
    # at the default initialisation (0.02) the logits of MobileNetV2, EfficientNet, LeViT and
    # MobileViT vanish (~1e-27, 0, ~1e-10, 0), which the verdict warns about (a comparison that
    # cannot tell a right file from a wrong one; tests/corpus/test_verdict.py); here their
    # weights are wider
    A("MobileNetV2", "vision", "MobileNetV2ForImageClassification",
      {"image_size": 32, "depth_multiplier": 0.25, "finegrained_output": False,
       "initializer_range": 0.3}, notes="initializer_range 0.3"),
    A("EfficientNet", "vision", "EfficientNetForImageClassification",
      {"image_size": 32, "width_coefficient": 0.25, "depth_coefficient": 0.25,
       "hidden_dim": 320, "initializer_range": 0.6}, notes="initializer_range 0.6"),
    A("Swin", "vision", "SwinForImageClassification", SWIN),
    A("Swinv2", "vision", "Swinv2ForImageClassification", SWIN),
    A("SegFormer", "vision", "SegformerForSemanticSegmentation",
      {"image_size": 32, "num_encoder_blocks": 2, "depths": [1, 1], "sr_ratios": [2, 1],
       "hidden_sizes": [8, 16], "num_attention_heads": [1, 2], "decoder_hidden_size": 16}),
    A("LeViT", "vision", "LevitForImageClassification",
      {"image_size": 32, "hidden_sizes": [16, 32, 48], "num_attention_heads": [1, 2, 3],
       "depths": [1, 1, 1], "key_dim": [8, 8, 8], "patch_size": 16,
       "initializer_range": 0.2}, notes="initializer_range 0.2"),
    A("MobileViT", "vision", "MobileViTForImageClassification",
      {"image_size": 32, "hidden_sizes": [16, 24, 32],
       "neck_hidden_sizes": [8, 8, 16, 16, 24, 32, 64], "num_attention_heads": 2,
       "initializer_range": 0.5}, notes="initializer_range 0.5"),
    A("PoolFormer", "vision", "PoolFormerForImageClassification",
      {"image_size": 32, "hidden_sizes": [8, 16, 24, 32], "depths": [1, 1, 1, 1]}),
    # ------------------------------------------------------------------ audio
    A("Wav2Vec2", "audio", "Wav2Vec2ForCTC", {**AUDIO, "vocab_size": 32}),
    A("WavLM", "audio", "WavLMModel",
      {**AUDIO, "num_buckets": 16, "max_bucket_distance": 32}),
    A("HuBERT", "audio", "HubertModel", AUDIO),
    A("SEW", "audio", "SEWModel", {**AUDIO, "squeeze_factor": 2}),
    A("Data2VecAudio", "audio", "Data2VecAudioModel",
      {**AUDIO, "num_conv_pos_embeddings": 4}),
    A("Whisper", "audio", "WhisperForConditionalGeneration",
      {"vocab_size": VOCAB, "d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
       "encoder_attention_heads": 4, "decoder_attention_heads": 4, "encoder_ffn_dim": 64,
       "decoder_ffn_dim": 64, "num_mel_bins": 16, "max_source_positions": 16,
       "max_target_positions": 64, "decoder_start_token_id": 1, **IDS,
       "suppress_tokens": None, "begin_suppress_tokens": None}),
    A("AST", "audio", "ASTForAudioClassification",
      {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
       "intermediate_size": 64, "num_mel_bins": 16, "max_length": 32, "patch_size": 8,
       "frequency_stride": 8, "time_stride": 8}),
    # ------------------------------------------------------------------ two towers
    A("CLIP", "multimodal", "CLIPModel",
      {"text_config": TEXT_TOWER, "vision_config": VISION_TOWER, "projection_dim": 16}),
    A("SigLIP", "multimodal", "SiglipModel",
      {"text_config": TEXT_TOWER, "vision_config": VISION_TOWER}),
]

BY_NAME = {a.name: a for a in ARCHITECTURES}

# the default test run's rows: a decoder, an encoder, a seq2seq model, a vision, an audio and a
# two-tower model (the default run's mixture of experts is tests/engine/test_hf_derive.py's
# Mixtral: its failure, and the hint applied through the CLI exported and validated; its other
# decoders are tests/engine/test_hf_export.py's GPT-2 and Llama); every other row, the
# sliding-window decoders among them, runs with `-m corpus_full`
DEFAULT_RUN = frozenset({"Qwen3", "BERT", "mBART", "ViT", "Wav2Vec2", "CLIP"})
