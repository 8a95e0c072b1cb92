"""What a Hugging Face model is and takes, derived from the model (issue 24 items 1, 2, 4, 5, 7,
10; issue 23 item 2), on tiny random-weight builds of real architectures (tests/engine/hf_tiny):

- the task from transformers' auto-model tables (MarianMTModel -> text2text-generation-with-past,
  CLIPModel -> zero-shot-image-classification), a task the class lacks a `recipe` error;
- the inputs from forward() and main_input_name, sized by the config and its sub-configs (both
  towers of CLIP/SigLIP at vision_config.image_size, waveforms for WavLM/HuBERT/SEW, AST's
  spectrogram), an input nothing can build a kind `inputs` error naming it;
- causes: an argument error is `inputs` naming the argument, MoE's operator is
  `unsupported_operator` with the option that exports (applied through the CLI, it passes);
- a dynamic axis the export fixes is a warning naming it (Funnel);
- model options (`--model-kwarg`) reach the config and are saved in the recipe;
- nothing prompts (a folder with its own code is refused at once unless trusted), nothing on
  standard error is coloured.

In-process checks load the models here; the end-to-end ones run the CLI (a worker process).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import to_toml
from tests.engine.hf_tiny import build, config_of, custom_code_folder

ROOT = Path(__file__).resolve().parents[2]
Run = tuple[int, dict[str, Any], str]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf_derive")


def cli(*args: str, cwd: Path, timeout: float = 900) -> Run:
    """`onnx-studio ARGS --json` in a child process whose standard input stays open (a
    terminal's would): (exit status, the JSON document, standard error)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    with subprocess.Popen([sys.executable, "-m", "onnx_studio.engine.cli", *args, "--json"],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=str(cwd)) as child:
        try:
            out, err = child.communicate(timeout=timeout)  # stdin closes only after the end
        except subprocess.TimeoutExpired:
            child.kill()
            out, err = child.communicate()
            pytest.fail(f"onnx-studio {' '.join(args)} still ran after {timeout} s:\n{err}")
    lines = out.strip().splitlines()
    return child.returncode, json.loads(lines[-1]) if lines else {}, err


def load(name: str, folder: Path, task: str | None = None, **options: Any) -> Any:
    from onnx_studio.engine.source.hf import load_hf

    return load_hf(f"hf:{build(name, folder)}", folder, task, options=options)


# ---------------------------------------------------------------------------- tasks


@pytest.mark.parametrize(("name", "task"), [
    ("marian", "text2text-generation-with-past"),  # MarianMTModel: no ...ForConditionalGeneration
    ("clip", "zero-shot-image-classification"),
    ("siglip", "zero-shot-image-classification"),
    ("ast", "audio-classification"),
    ("wav2vec2-ctc", "automatic-speech-recognition"),
    ("whisper", "automatic-speech-recognition-with-past"),
    ("mixtral", "text-generation-with-past"),
    ("vit", "image-classification"),
    ("bert", "feature-extraction"),
    ("hubert", "feature-extraction"),
])
def test_the_default_task_is_the_table_that_names_the_class(name: str, task: str) -> None:
    from onnx_studio.engine.source.hf.tasks import default_task, model_class_name, supported_tasks

    config = config_of(name)
    assert default_task(config) == task
    assert supported_tasks(config)[0] == task  # the window's picker lists it first
    assert model_class_name(config, task) == config.architectures[0]


def test_supported_tasks_are_those_transformers_has_a_class_for() -> None:
    from transformers.models.auto import modeling_auto

    from onnx_studio.engine.source.hf.tasks import TASKS, model_class_name, supported_tasks

    for name in ("clip", "ast", "vit", "hubert", "marian", "llama"):
        config = config_of(name)
        supported = supported_tasks(config)
        for task in TASKS:
            tables = [getattr(modeling_auto, table) for table, _ in TASKS[task].tables]
            served = any(config.model_type in table for table in tables)
            assert (task in supported) == served, (name, task)
            if served:  # the class each task loads is the table's
                names = next(t[config.model_type] for t in tables if config.model_type in t)
                assert model_class_name(config, task) in (names if isinstance(names, tuple)
                                                          else (names,))
    assert "zero-shot-image-classification" in supported_tasks(config_of("clip"))
    assert "text-generation" not in supported_tasks(config_of("vit"))
    assert supported_tasks(config_of("ast")) == ["audio-classification", "feature-extraction"]


def test_a_task_the_class_lacks_is_a_recipe_error_listing_the_supported() -> None:
    from onnx_studio.engine.source.hf.tasks import resolve_task

    config = config_of("vit")
    for asked in ("text-generation", "no-such-task"):
        with pytest.raises(StudioError) as caught:
            resolve_task(config, asked)
        assert caught.value.kind == "recipe" and caught.value.exit_code == 2
        assert asked in caught.value.message
        assert "image-classification, feature-extraction" in caught.value.message
        assert "--task" in caught.value.hint
    assert resolve_task(config, "image-feature-extraction") == "feature-extraction"  # Optimum's


# ---------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("name", ["clip", "siglip"])
def test_two_towers_get_both_inputs_at_the_vision_config_size(name: str, folder: Path) -> None:
    hf = load(name, folder)
    part = hf.parts[0]
    assert list(part.inputs) == ["input_ids", "pixel_values", "attention_mask"]
    vision = hf.config.vision_config
    assert list(part.inputs["pixel_values"].shape) == [2, vision.num_channels,
                                                       vision.image_size, vision.image_size]
    assert int(part.inputs["input_ids"].max()) < hf.config.text_config.vocab_size
    # every text is scored against every image: their batches are apart (Optimum's names)
    assert part.dynamic["pixel_values"] == {0: "image_batch_size"}
    assert part.dynamic["input_ids"] == {0: "text_batch_size", 1: "sequence_length"}
    assert part.output_names[:2] == ["logits_per_image", "logits_per_text"]


@pytest.mark.parametrize("name", ["wavlm", "hubert", "sew", "wav2vec2-ctc"])
def test_speech_encoders_take_a_waveform_as_long_as_their_convolutions_need(
        name: str, folder: Path) -> None:
    import torch

    from onnx_studio.engine.source.hf.dummies import waveform_length

    hf = load(name, folder)
    part = hf.parts[0]
    assert list(part.inputs) == ["input_values"]
    waveform = part.inputs["input_values"]
    assert waveform.dim() == 2 and waveform.shape[1] == waveform_length(hf.config, 5)
    assert part.dynamic["input_values"] == {0: "batch_size", 1: "audio_sequence_length"}
    longer = part.make_inputs(3, 3, 9, 0)["input_values"]
    with torch.no_grad():  # another length runs too: the axis is really free
        out = part.module(longer)
    assert out[0].shape[0] == 3 and out[0].shape[1] == 9


def test_ast_takes_its_spectrogram_from_max_length_and_mel_bins(folder: Path) -> None:
    hf = load("ast", folder)  # ASTConfig has no vocab_size: nothing may assume one
    assert hf.task == "audio-classification"
    part = hf.parts[0]
    assert {name: list(t.shape) for name, t in part.inputs.items()} == {
        "input_values": [2, hf.config.max_length, hf.config.num_mel_bins]}
    assert part.output_names == ["logits"]


def test_marian_exports_an_encoder_and_its_decoders(folder: Path) -> None:
    hf = load("marian", folder)
    assert hf.task == "text2text-generation-with-past"
    assert [p.file for p in hf.parts] == ["encoder_model.onnx", "decoder_model.onnx",
                                          "decoder_with_past_model.onnx"]
    assert list(hf.parts[0].inputs) == ["input_ids", "attention_mask"]
    assert list(hf.parts[1].inputs) == ["input_ids", "encoder_attention_mask",
                                        "encoder_hidden_states"]


@pytest.mark.parametrize(("name", "task"), [
    ("bert", None), ("funnel", None), ("llama", None), ("llama", "token-classification"),
    ("clip", None), ("ast", None), ("hubert", None), ("marian", None), ("whisper", None),
    ("vit", "feature-extraction"), ("marian", "text-generation-with-past")])
def test_names_from_the_config_alone_are_the_loaded_inputs(
        name: str, task: str | None, folder: Path) -> None:
    """The window lists a task's inputs without loading weights; the loaded model agrees."""
    from onnx_studio.engine.source.hf.inputs import input_names

    hf = load(name, folder, task)
    assert input_names(hf.task, hf.config) == list(hf.parts[0].inputs)


def test_a_decoder_classifier_without_a_pad_token_names_the_option(folder: Path) -> None:
    """LlamaForSequenceClassification refuses a batch without pad_token_id: the model's own
    error, with the model option that fixes it; applied, the model loads and runs."""
    with pytest.raises(StudioError) as caught:
        load("llama", folder, "text-classification")
    assert caught.value.kind == "model"
    assert "--model-kwarg pad_token_id=" in caught.value.hint
    hf = load("llama", folder, "text-classification", pad_token_id=0)
    assert hf.parts[0].output_names == ["logits"]


def test_an_input_nothing_can_build_is_named(tmp_path: Path) -> None:
    """PatchTST's main input is a time series (past_values): kind `inputs`, exit 2, naming it."""
    import transformers

    from onnx_studio.engine.source.hf import load_hf

    config = transformers.PatchTSTConfig(num_input_channels=2, context_length=16,
                                         patch_length=4, patch_stride=4, d_model=16,
                                         num_attention_heads=2, num_hidden_layers=1, ffn_dim=32)
    transformers.PatchTSTModel(config).save_pretrained(tmp_path / "patchtst")
    with pytest.raises(StudioError) as caught:
        load_hf(f"hf:{tmp_path / 'patchtst'}", tmp_path)
    error = caught.value
    assert error.kind == "inputs" and error.exit_code == 2
    assert "'past_values'" in error.message and "PatchTSTModel" in error.message
    assert "--input past_values=" in error.hint


# ---------------------------------------------------------------------------- causes


def test_an_argument_error_raised_by_the_exporter_is_the_inputs_naming_it() -> None:
    """torch.onnx's own wrapper around a forward() called without an argument it needs."""
    import torch

    from onnx_studio.engine.export.failures import export_failure

    class NeedsTwo(torch.nn.Module):
        def forward(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
            return x * scale

    with pytest.raises(Exception) as caught:
        torch.onnx.export(NeedsTwo().eval(), (torch.ones(2),), dynamo=True)
    error = export_failure(caught.value, "dynamo", list)
    assert error.kind == "inputs" and error.exit_code == 2
    assert "'scale'" in error.message and "--input scale=" in error.hint


def test_a_models_own_refusal_of_a_missing_input_names_it(tmp_path: Path) -> None:
    """ALIGN given only its text says "You have to specify pixel_values": kind `inputs`, exit 2,
    naming pixel_values (a Python factory, the single-file path)."""
    (tmp_path / "align.py").write_text(
        "import torch, transformers\n\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    config = transformers.AlignConfig(\n"
        "        text_config=dict(vocab_size=99, hidden_size=32, num_hidden_layers=1,\n"
        "                         num_attention_heads=2, intermediate_size=64),\n"
        "        vision_config=dict(image_size=32, width_coefficient=0.25,\n"
        "                           depth_coefficient=0.25, hidden_dim=64), projection_dim=16)\n"
        "    return transformers.AlignModel(config).eval()\n", encoding="utf-8")
    code, doc, err = cli("export", "align.py:build", "-o", str(tmp_path / "align.onnx"),
                         "--input", "input_ids=2x5:int64:randint(0,99)", cwd=tmp_path)
    assert code == 2, err
    assert doc["error"]["kind"] == "inputs", doc["error"]
    assert "'pixel_values'" in doc["error"]["message"]
    assert "pixel_values" in doc["error"]["hint"]


@pytest.mark.timeout(1800)  # two exports, one validated, on a loaded 2-core machine
@pytest.mark.parametrize("name", ["mixtral"])  # Qwen2-MoE too: the corpus's corpus_full row
def test_moe_names_its_operator_and_the_option_that_exports(name: str, folder: Path) -> None:
    source = f"hf:{build(name, folder)}"
    code, doc, err = cli("export", source, "-o", str(folder / f"{name}_default"), cwd=folder)
    assert code == 1, err
    error = doc["error"]
    assert error["kind"] == "unsupported_operator", error
    assert error["unsupported_ops"] == ["transformers.grouped_mm_fallback.default"]
    assert "experts_implementation" in error["hint"]
    applied = re.findall(r"--model-kwarg ([\w.]+=\w+)", error["hint"])
    assert applied, error["hint"]
    code, doc, err = cli("export", source, "-o", str(folder / f"{name}_fixed"), "--validate",
                         *[a for option in applied for a in ("--model-kwarg", option)],
                         cwd=folder)
    assert code == 0, (doc.get("error"), err[-3000:])
    assert doc["validation"]["ok"] and doc["validation"]["generation"]["tokens_equal"]


# ---------------------------------------------------------------------------- baked axes


@pytest.mark.timeout(1200)
def test_an_axis_the_export_fixes_is_a_warning_naming_it_and_its_fix(folder: Path) -> None:
    """Funnel's pooling fixes the sequence length at the export's: said at export time, with
    the option that exports at the length the file will run at; applied, the file runs at
    that length and other batch sizes, and its saved recipe validates again."""
    code, doc, err = cli("export", f"hf:{build('funnel', folder)}", "-o",
                         str(folder / "funnel_out"), cwd=folder)
    assert code == 0, err
    baked = [w for w in doc["warnings"] if w["category"] == "DynamicShape"]
    assert baked, doc["warnings"]
    assert any("'input_ids' axis 1 ('sequence_length')" in w["message"]
               and "fixes it at 5" in w["message"] for w in baked), baked
    assert all(w["source"] == "model.onnx" for w in baked)
    assert all("--static-dim sequence_length=N" in w["hint"] for w in baked), baked

    out, saved = folder / "funnel_static", folder / "funnel_static.toml"
    code, doc, err = cli("export", f"hf:{build('funnel', folder)}", "-o", str(out),
                         "--static-dim", "sequence_length=8", "--validate", "--save-recipe",
                         str(saved), cwd=folder)
    assert code == 0 and doc["ok"], (doc.get("error"), err)
    assert doc["warnings"] == []
    assert [i["shape"] for i in doc["graph"]["inputs"]] == [["batch_size", 8]] * 2
    other = [t for t in doc["validation"]["trials"] if t["kind"] == "dynamic-size"]
    assert [t["sizes"] for t in other] == [{"batch_size": 3, "sequence_length": 8}]
    code, again, err = cli("validate", str(out), "--recipe", str(saved), cwd=folder)
    assert code == 0 and again["ok"], (again.get("error"), err)


# ---------------------------------------------------------------------------- model options


def test_model_options_set_the_config_and_the_loader(folder: Path) -> None:
    one_layer = load("llama", folder, num_hidden_layers=1, attn_implementation="sdpa")
    assert one_layer.config.num_hidden_layers == 1
    assert one_layer.model.config._attn_implementation == "sdpa"
    assert [n for n in one_layer.parts[0].inputs if n.startswith("past")] == [
        "past_key_values.0.key", "past_key_values.0.value"]
    clip = load("clip", folder, **{"text_config.layer_norm_eps": 1e-3},
                vision_config={"layer_norm_eps": 1e-4})  # the window's Arguments: a table
    assert clip.config.text_config.layer_norm_eps == 1e-3
    assert clip.config.vision_config.layer_norm_eps == 1e-4
    with pytest.raises(StudioError) as caught:
        load("llama", folder, num_hiden_layers=1)
    assert caught.value.kind == "recipe" and caught.value.exit_code == 2
    assert "'num_hiden_layers'" in caught.value.message
    assert "num_hidden_layers" in caught.value.message  # the close match


def test_model_options_and_trust_are_recorded_in_the_recipe(tmp_path: Path) -> None:
    from onnx_studio.engine import recipe as recipes
    from onnx_studio.engine.cli import build_parser, save_recipe_as
    from onnx_studio.engine.cli_args import RequestError, recipe_from_args
    from onnx_studio.engine.source.hf.loading import split_hf_source

    args = build_parser().parse_args([
        "export", f"hf:{tmp_path}", "-o", str(tmp_path / "out"), "--task", "feature-extraction",
        "--model-kwarg", "use_cache=false", "--model-kwarg", "attn_implementation=sdpa",
        "--model-kwarg", "text_config.max_position_embeddings=64", "--trust-remote-code"])
    recipe = recipe_from_args(args)
    assert recipe.model.kwargs == {"task": "feature-extraction", "use_cache": False,
                                   "attn_implementation": "sdpa",
                                   "text_config.max_position_embeddings": 64}
    assert recipe.model.trust_remote_code is True
    save_recipe_as(recipe, tmp_path / "saved.toml")
    again = recipes.load(tmp_path / "saved.toml")
    assert again.model.kwargs == recipe.model.kwargs and again.model.trust_remote_code
    # the folder is rebased with the recipe as a folder, its hf: prefix kept
    assert split_hf_source(again.model.source, again.base_dir)[0] == tmp_path
    plain = recipes.Recipe()  # untrusted stays unwritten: old recipes round-trip unchanged
    assert "trust_remote_code" not in to_toml(plain)
    for wrong in (["--trust-remote-code"], ["--model-kwarg", "use_cache=none"],
                  ["--model-kwarg", "9lives=1"]):
        args = build_parser().parse_args(["export", "net.py:Net", "-o", "n.onnx", *wrong])
        with pytest.raises(RequestError):
            recipe_from_args(args)


@pytest.mark.timeout(1200)
def test_a_hint_naming_a_model_option_applies_through_the_cli(tmp_path: Path) -> None:
    """A Python factory returning LlamaModel (use_cache on): forward() returns the cache
    object; the hint's --model-kwarg, given on the command line, makes the export pass."""
    (tmp_path / "llama.py").write_text(
        "import torch, transformers\n\n"
        "def build(**overrides):\n"
        "    torch.manual_seed(0)\n"
        "    config = transformers.LlamaConfig(vocab_size=99, hidden_size=32,\n"
        "        num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,\n"
        "        intermediate_size=64, max_position_embeddings=64, **overrides)\n"
        "    return transformers.LlamaModel(config).eval()\n", encoding="utf-8")
    args = ["export", "llama.py:build", "--input", "input_ids=2x8:int64:randint(0,99)"]
    code, doc, err = cli(*args, "-o", str(tmp_path / "a.onnx"), cwd=tmp_path)
    assert code == 1 and "DynamicCache" in doc["error"]["message"], err
    applied = re.findall(r"--model-kwarg ([\w.]+=\w+)", doc["error"]["hint"])
    assert applied == ["use_cache=false"], doc["error"]["hint"]
    code, doc, err = cli(*args, "-o", str(tmp_path / "b.onnx"), "--model-kwarg", applied[0],
                         "--validate", "--save-recipe", str(tmp_path / "b.toml"), cwd=tmp_path)
    assert code == 0, (doc.get("error"), err[-3000:])
    assert "use_cache = false" in (tmp_path / "b.toml").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------- nothing prompts


@pytest.mark.timeout(900)
def test_a_folder_with_its_own_code_is_refused_at_once_unless_trusted(tmp_path: Path) -> None:
    """Before: transformers asked "Do you wish to run the custom code? [y/N]" on the worker's
    stdin and waited for ever. Now: kind `source`, exit 2, naming the code and the opt-in."""
    custom = custom_code_folder(tmp_path / "custom")
    code, doc, err = cli("export", f"hf:{custom}", "-o", str(tmp_path / "out"), cwd=tmp_path,
                         timeout=300)
    assert code == 2, err
    error = doc["error"]
    assert error["kind"] == "source", error
    assert "configuration_tiny.py" in error["message"] and "modeling_tiny.py" in error["message"]
    assert "--trust-remote-code" in error["hint"] and "trust_remote_code" in error["hint"]
    assert "[y/N]" not in err
    assert not (tmp_path / "out").exists()
    recipe = tmp_path / "trusted.toml"  # the recipe's opt-in runs the folder's code
    recipe.write_text(f'version = 1\n\n[model]\nsource = "hf:{custom}"\n'
                      f'trust_remote_code = true\n\n[export]\noutput = "{tmp_path / "out"}"\n',
                      encoding="utf-8")
    code, doc, err = cli("export", "--recipe", str(recipe), "--validate", "--exporter",
                         "torchscript", cwd=tmp_path)  # the opt-in is tried, not the exporter
    assert code == 0, (doc.get("error"), err[-3000:])
    assert doc["task"] == "feature-extraction" and doc["validation"]["ok"]
    assert [i["name"] for i in doc["files"][0]["graph"]["inputs"]] == ["input_ids",
                                                                       "attention_mask"]


@pytest.mark.timeout(600)
def test_input_inside_a_job_reads_end_of_file(tmp_path: Path) -> None:
    """A model's own prompt cannot wait either: the worker's stdin is empty for the job."""
    (tmp_path / "asks.py").write_text(
        "import torch\n\n"
        "def build():\n"
        "    answer = input('Continue? [y/N] ')\n"
        "    return torch.nn.Linear(2, 2)\n", encoding="utf-8")
    code, doc, err = cli("export", "asks.py:build", "-o", str(tmp_path / "asks.onnx"),
                         "--input", "x=1x2", cwd=tmp_path, timeout=300)
    assert code != 0 and doc["ok"] is False, err
    assert "EOFError" in doc["error"]["message"] + doc["error"]["details"], doc["error"]


# ---------------------------------------------------------------------------- no colours


@pytest.mark.timeout(900)
def test_library_output_on_standard_error_is_plain(folder: Path) -> None:
    """AST saved with its classifier, loaded for feature-extraction: transformers' load report
    (coloured bold) lists the unused weights; a progress bar draws while weights load."""
    code, doc, err = cli("export", f"hf:{build('ast', folder)}", "-o", str(folder / "ast_fe"),
                         "--task", "feature-extraction", "--exporter", "torchscript",
                         cwd=folder)  # the load's output is tried, not the exporter
    assert code == 0, (doc.get("error"), err[-3000:])
    assert "LOAD REPORT" in err  # the report itself is kept: it says what was not loaded
    assert "\x1b" not in err and "\r" not in err, err[-2000:]
    assert "Loading weights" not in err  # no progress bar
    assert [i["name"] for i in doc["files"][0]["graph"]["inputs"]] == ["input_values"]
