"""The tasks a Hugging Face model supports and the class that serves each, read from
transformers' own auto-model tables (`models/auto/modeling_auto.py` MODEL_FOR_*_MAPPING_NAMES),
as Optimum's TasksManager reads them; task names are Optimum's.

A config's model type appears in a table when transformers has a head for it: the table names
the class (`MarianMTModel` for "marian" in the sequence-to-sequence table). The default task is
the one whose table names the config's `architectures[0]`; a folder with its own code
(`auto_map` in config.json) supports the tasks whose auto classes its `auto_map` names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from onnx_studio.engine.errors import StudioError


@dataclass(frozen=True)
class Task:
    """A task: the auto-model tables that serve it (tried in order, each with its auto class),
    whether it generates tokens, and whether its files take and return the key/value cache."""

    name: str
    tables: tuple[tuple[str, str], ...]  # (modeling_auto mapping name, transformers auto class)
    generates: bool = False
    past: bool = False


def _table_of(kind: str, auto: str) -> tuple[str, str]:
    return (f"MODEL_FOR_{kind}_MAPPING_NAMES", auto)


_CAUSAL = _table_of("CAUSAL_LM", "AutoModelForCausalLM")
_SEQ2SEQ = _table_of("SEQ_TO_SEQ_CAUSAL_LM", "AutoModelForSeq2SeqLM")
_SPEECH = _table_of("SPEECH_SEQ_2_SEQ", "AutoModelForSpeechSeq2Seq")
# in the order the default is preferred when a class sits in several tables (a CLIPModel is
# both the bare model and the zero-shot classifier: the specific table wins); a generation
# task's variant with the cache before the one without
_TASKS = [
    Task("text-generation-with-past", (_CAUSAL,), True, True),
    Task("text-generation", (_CAUSAL,), True),
    Task("text2text-generation-with-past", (_SEQ2SEQ,), True, True),
    Task("text2text-generation", (_SEQ2SEQ,), True),
    Task("automatic-speech-recognition-with-past", (_SPEECH,), True, True),
    # by a decoder (Whisper: generates), or by CTC (Wav2Vec2ForCTC: one file of logits)
    Task("automatic-speech-recognition", (_SPEECH, _table_of("CTC", "AutoModelForCTC")), True),
    Task("text-classification",
         (_table_of("SEQUENCE_CLASSIFICATION", "AutoModelForSequenceClassification"),)),
    Task("token-classification",
         (_table_of("TOKEN_CLASSIFICATION", "AutoModelForTokenClassification"),)),
    Task("question-answering",
         (_table_of("QUESTION_ANSWERING", "AutoModelForQuestionAnswering"),)),
    Task("fill-mask", (_table_of("MASKED_LM", "AutoModelForMaskedLM"),)),
    Task("image-classification",
         (_table_of("IMAGE_CLASSIFICATION", "AutoModelForImageClassification"),)),
    Task("zero-shot-image-classification", (_table_of(
        "ZERO_SHOT_IMAGE_CLASSIFICATION", "AutoModelForZeroShotImageClassification"),)),
    Task("semantic-segmentation",
         (_table_of("SEMANTIC_SEGMENTATION", "AutoModelForSemanticSegmentation"),)),
    Task("object-detection", (_table_of("OBJECT_DETECTION", "AutoModelForObjectDetection"),)),
    Task("depth-estimation", (_table_of("DEPTH_ESTIMATION", "AutoModelForDepthEstimation"),)),
    Task("audio-classification",
         (_table_of("AUDIO_CLASSIFICATION", "AutoModelForAudioClassification"),)),
    Task("feature-extraction", (("MODEL_MAPPING_NAMES", "AutoModel"),)),
]
TASKS: dict[str, Task] = {task.name: task for task in _TASKS}

# Optimum's other names for the same tasks
SYNONYMS = {
    "default": "feature-extraction", "image-feature-extraction": "feature-extraction",
    "sentence-similarity": "feature-extraction", "causal-lm": "text-generation",
    "causal-lm-with-past": "text-generation-with-past", "seq2seq-lm": "text2text-generation",
    "seq2seq-lm-with-past": "text2text-generation-with-past", "masked-lm": "fill-mask",
    "sequence-classification": "text-classification", "audio-ctc": "automatic-speech-recognition",
    "speech2seq-lm": "automatic-speech-recognition",
    "speech2seq-lm-with-past": "automatic-speech-recognition-with-past",
    "translation": "text2text-generation", "summarization": "text2text-generation",
}


def with_past(task: str) -> bool:
    """True for the tasks whose files take and return the key/value cache."""
    found = TASKS.get(task)
    return found is not None and found.past


def files_of(task: str, config: Any) -> str:
    """The files a task exports for this config: "decoder" (a causal LM's one file),
    "seq2seq" (an encoder and its decoders) or "plain" (one file, the model's outputs), by
    the table that serves it (speech recognition: a sequence-to-sequence class, or CTC)."""
    found = TASKS.get(task)
    if found is None or not found.generates:
        return "plain"
    if found.tables[0] == _CAUSAL:
        return "decoder"
    served = next((table for table in found.tables if _serves(table, config)), None)
    return "plain" if served is not None and served not in (_SEQ2SEQ, _SPEECH) else "seq2seq"


def _serves(table: tuple[str, str], config: Any) -> bool:
    """Whether `table` has a class for this config (or its auto_map names the auto class)."""
    name, auto = table
    return bool(_names(_table(name).get(getattr(config, "model_type", "")))) \
        or auto in _custom_classes(config)


def _names(value: Any) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value or ())


def _table(name: str) -> dict[str, Any]:
    from transformers.models.auto import modeling_auto

    return dict(getattr(modeling_auto, name, {}))


def _custom_classes(config: Any) -> dict[str, str]:
    """auto_map of a folder with its own code: auto class -> "module.Class"."""
    auto_map = getattr(config, "auto_map", None) or {}
    return {k: v[0] if isinstance(v, (list, tuple)) else v for k, v in auto_map.items()
            if isinstance(v, (str, list, tuple))}


def model_class_name(config: Any, task: str) -> str | None:
    """The class transformers serves `task` with for this config (the one `architectures`
    names when a table lists several), None when no table of the task has the model type.
    A folder's own code: its auto_map's "module.Class"."""
    found = TASKS.get(task)
    if found is None:
        return None
    architectures = list(getattr(config, "architectures", None) or [])
    custom = _custom_classes(config)
    for table, auto in found.tables:
        names = _names(_table(table).get(getattr(config, "model_type", "")))
        if names:
            return next((n for n in architectures if n in names), names[0])
        if auto in custom:
            return custom[auto]
    return None


def auto_class_name(config: Any, task: str) -> str:
    """The transformers auto class that loads the model for `task` (its first table that
    serves the config)."""
    found = TASKS[task]
    return next((auto for table, auto in found.tables if _serves((table, auto), config)),
                found.tables[0][1])


def supported_tasks(config: Any) -> list[str]:
    """Every task some table serves this config with, the default first."""
    names = [name for name in TASKS if model_class_name(config, name) is not None]
    first = default_task(config, names)
    return [first, *(n for n in names if n != first)] if first in names else names


def default_task(config: Any, supported: list[str] | None = None) -> str:
    """The task whose table names the config's `architectures[0]` (the specific table before
    the bare model's, the cache's variant of a generation task); feature-extraction when the
    config names no class any table knows."""
    supported = [n for n in TASKS if model_class_name(config, n) is not None] \
        if supported is None else supported
    architectures = list(getattr(config, "architectures", None) or [])
    wanted = architectures[0] if architectures else None
    for task in _TASKS:
        if task.name not in supported:
            continue
        name = model_class_name(config, task.name)
        if wanted is not None and name is not None and wanted in (name, name.rpartition(".")[2]):
            return task.name
    if "feature-extraction" in supported or not supported:
        return "feature-extraction"
    return supported[0]


def resolve_task(config: Any, task: str | None) -> str:
    """`task` (an Optimum synonym allowed; None: the config's default) checked against what
    the model supports; a `recipe` error (exit 2) listing the supported tasks otherwise."""
    supported = supported_tasks(config)
    kind = getattr(config, "model_type", "") or "this"
    if not supported:
        raise StudioError("source", f"transformers has no model class for the {kind} model "
                          "under any task the studio exports.",
                          "Export it through a Python file whose factory returns the model.",
                          exit_code=2)
    if task is None:
        return supported[0]
    name = SYNONYMS.get(task, task)
    if name in supported:
        return name
    listed = ", ".join(supported)
    if name not in TASKS:
        message = f"Unknown task {task!r}; the {kind} model supports {listed}."
    else:
        message = (f"The {kind} model has no head for the task {task!r} in transformers; it "
                   f"supports {listed}.")
    raise StudioError("recipe", message, "Choose one of those with --task (recipe: "
                      "model.kwargs = { task = \"...\" }), or leave it out for the default.",
                      exit_code=2)
