"""Task names (Optimum's) and the task a config's `architectures` implies."""

from __future__ import annotations

from typing import Any

# task -> the transformers Auto class that loads a model for it
TASKS: dict[str, str] = {
    "feature-extraction": "AutoModel",
    "text-classification": "AutoModelForSequenceClassification",
    "text-generation": "AutoModelForCausalLM",
    "text-generation-with-past": "AutoModelForCausalLM",
    "image-classification": "AutoModelForImageClassification",
    "text2text-generation": "AutoModelForSeq2SeqLM",
    "text2text-generation-with-past": "AutoModelForSeq2SeqLM",
    "automatic-speech-recognition": "AutoModelForSpeechSeq2Seq",
    "automatic-speech-recognition-with-past": "AutoModelForSpeechSeq2Seq",
}

GENERATION_TASKS = frozenset({
    "text-generation", "text-generation-with-past", "text2text-generation",
    "text2text-generation-with-past", "automatic-speech-recognition",
    "automatic-speech-recognition-with-past"})

SEQ2SEQ_TASKS = frozenset({
    "text2text-generation", "text2text-generation-with-past", "automatic-speech-recognition",
    "automatic-speech-recognition-with-past"})

# the head an `architectures` entry names -> its task (the first suffix that matches wins)
_BY_SUFFIX = (
    ("ForCausalLM", "text-generation-with-past"),
    ("LMHeadModel", "text-generation-with-past"),
    ("ForConditionalGeneration", "text2text-generation-with-past"),
    ("ForSequenceClassification", "text-classification"),
    ("ForImageClassification", "image-classification"),
    ("ForSpeechSeq2Seq", "automatic-speech-recognition-with-past"),
)

_SPEECH_TYPES = frozenset({"whisper", "speech_to_text"})


def default_task(config: Any) -> str:
    """The task the config's first `architectures` entry implies; feature-extraction when it
    names a bare model or nothing."""
    architectures = list(getattr(config, "architectures", None) or [])
    name = architectures[0] if architectures else ""
    for suffix, task in _BY_SUFFIX:
        if name.endswith(suffix):
            if task.startswith("text2text") and config.model_type in _SPEECH_TYPES:
                return "automatic-speech-recognition-with-past"
            return task
    return "feature-extraction"


def with_past(task: str) -> bool:
    """True for the tasks whose files take and return the key/value cache."""
    return task.endswith("-with-past")


def input_names(task: str, config: Any) -> list[str]:
    """The inputs of the task's first file, read from the config alone (no weights loaded)."""
    if task == "image-classification":
        return ["pixel_values"]
    if task in SEQ2SEQ_TASKS:
        return ["input_features"] if config.model_type in _SPEECH_TYPES else [
            "input_ids", "attention_mask"]
    names = ["input_ids", "attention_mask"]
    if task in ("feature-extraction", "text-classification") and \
            bool(getattr(config, "type_vocab_size", 0)):
        names.append("token_type_ids")
    if with_past(task):
        layers = int(getattr(config, "num_hidden_layers", 0) or getattr(config, "n_layer", 0))
        names += ["position_ids"] + [f"past_key_values.{n}.{kv}" for n in range(layers)
                                     for kv in ("key", "value")]
    return names
