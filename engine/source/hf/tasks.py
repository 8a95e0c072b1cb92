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
