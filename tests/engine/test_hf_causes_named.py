"""Architectures outside the corpus, each failing in its own way: the verdict names the real
cause and what to change, never "the worker failed" or "failed unexpectedly", and a file that
is right passes (tiny random-weight builds from tests/engine/hf_tiny, through the CLI):

- Mamba's cache is a recurrent state, not keys and values, and RecurrentGemma returns none:
  kind `inputs`, naming what it keeps, with the task that exports without a cache; that
  export's size fixed by the model is said by the trials and by the generation loop alike
  (ONNX Runtime's message, not a crash);
- ViT-MAE draws its masking noise in forward(): PyTorch differs from itself, which the
  verdict says (not "the file computes something else");
- CANINE names no vocabulary (transformers' get_input_embeddings raises for it): kind
  `inputs`, naming what is missing, exit 2;
- XLNet's dynamo failure is placed at its line in transformers' code, and MPT's is given
  whole (the list torch announces with a colon);
- MPT's forward names no position_ids (ALiBi): its decoder file takes none, as the window
  lists; through TorchScript it passes, 20 tokens equal;
- RWKV names an attention mask it does not read and loops over the sequence in Python: via
  TorchScript the dropped mask is said, and a file right at the export's sizes only is named
  as such, with the exporter that keeps the loop;
- Falcon with ALiBi computes it in bfloat16, which ONNX Runtime's CPU provider does not run:
  the node, its type and the model's line are named, not "failed unexpectedly".
"""

from __future__ import annotations

from pathlib import Path

import pytest

from onnx_studio.engine.source.hf.inputs import input_names
from tests.engine.hf_tiny import build, config_of
from tests.engine.test_hf_derive import cli

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hf_causes")


def test_a_cache_that_is_no_keys_and_values_is_named_with_the_task_that_exports(
        folder: Path) -> None:
    source = f"hf:{build('mamba', folder)}"
    code, doc, err = cli("export", source, "-o", str(folder / "out_mamba"), cwd=folder)
    assert code == 2, err
    error = doc["error"]
    assert error["kind"] == "inputs", error
    assert "not of keys and values" in error["message"], error
    assert "Layer" in error["message"].split("a cache of")[1], error  # the layer kind named
    assert "--task text-generation" in error["hint"]
    assert not (folder / "out_mamba").exists()

    code, doc, err = cli("export", source, "-o", str(folder / "mamba_tg"), "--task",
                         "text-generation", "--validate", cwd=folder)
    assert code == 1, err
    assert doc["error"]["kind"] == "validation"
    assert "unexpectedly" not in doc["error"]["message"]
    assert doc["error"]["message"].startswith("ONNX Runtime cannot run on model.onnx")
    assert "--static-dim" in doc["error"]["hint"]
    generation = doc["validation"]["generation"]
    assert generation["passed"] is False and generation["onnx_tokens"] == []
    assert generation["message"].startswith("ONNX Runtime cannot run during the generation loop")
    assert generation["continuation"]["steps"] == [] and not generation["continuation"]["passed"]
    assert "input_ids[1, 6]" in generation["message"]


def test_a_model_that_names_no_vocabulary_is_an_inputs_error(folder: Path) -> None:
    import transformers

    from onnx_studio.engine.source.hf.dummies import input_embeddings, vocab_size

    path = build("canine", folder)
    model = transformers.CanineModel.from_pretrained(path)
    with pytest.raises(NotImplementedError):
        model.get_input_embeddings()  # what crashed the worker before
    assert input_embeddings(model) is None
    assert vocab_size(model.config, model) is None
    code, doc, err = cli("export", f"hf:{path}", "-o", str(folder / "canine_onnx"), cwd=folder)
    assert code == 2, err
    error = doc["error"]
    assert error["kind"] == "inputs", error
    assert "vocabulary size" in error["message"] and "input_ids" in error["message"]
    assert "worker failed" not in error["message"].lower()


def test_an_exporter_failure_is_placed_in_the_models_code_and_given_whole(
        folder: Path) -> None:
    code, doc, err = cli("export", f"hf:{build('xlnet', folder)}", "-o",
                         str(folder / "xlnet_onnx"), cwd=folder)
    assert code == 1, err
    message = doc["error"]["message"]
    assert doc["error"]["kind"] == "export"
    assert "at modeling_xlnet.py:" in message and "attention_mask" in message, message
    assert "wrappers.py" not in message  # the studio's own frame is not the place

    code, doc, err = cli("export", f"hf:{build('mpt', folder)}", "-o", str(folder / "mpt_onnx"),
                         cwd=folder)
    assert code == 1, err
    message = doc["error"]["message"]
    assert "inconsistencies were found:" in message and "is inconsistent" in message, message
    assert "torchscript" in doc["error"]["hint"]


def test_a_decoder_takes_position_ids_only_when_its_forward_names_them(folder: Path) -> None:
    # the names the window lists, from the class alone, and the file's, agree
    for name, expected in (("mpt", False), ("llama", True)):
        names = input_names("text-generation-with-past", config_of(name))
        assert ("position_ids" in names) is expected, (name, names)
        assert names[:2] == ["input_ids", "attention_mask"]
    code, doc, err = cli("export", f"hf:{build('mpt', folder)}", "-o",
                         str(folder / "mpt_ts"), "--exporter", "torchscript", "--validate",
                         cwd=folder)
    assert code == 0, (doc.get("error"), err[-3000:])
    assert doc["validation"]["ok"] and doc["validation"]["generation"]["tokens_equal"]
    import onnx

    model = onnx.load(str(folder / "mpt_ts" / "model.onnx"), load_external_data=False)
    inputs = [i.name for i in model.graph.input]
    assert inputs[:2] == ["input_ids", "attention_mask"] and "position_ids" not in inputs
    assert not [w for w in doc["validation"]["warnings"] if "does not take" in w["message"]]


def test_an_unread_input_is_said_and_a_file_right_at_its_sizes_only_is_named(
        folder: Path) -> None:
    # RWKV's forward names an attention mask it does not read, and loops over the sequence
    # in Python: TorchScript drops the mask and unrolls the loop at the export's length
    code, doc, err = cli("export", f"hf:{build('rwkv', folder)}", "-o",
                         str(folder / "rwkv_ts"), "--exporter", "torchscript", "--task",
                         "text-generation", "--validate", cwd=folder)
    assert code == 1, err
    validation = doc["validation"]
    said = [w for w in validation["warnings"] if "does not take" in w["message"]]
    assert len(said) == 1 and "attention_mask" in said[0]["message"], validation["warnings"]
    trials = {t["kind"]: t for t in validation["trials"]}
    assert trials["export-inputs"]["ok"] and not trials["dynamic-size"]["ok"], trials
    assert "at the export's sizes and not at the others" in doc["error"]["hint"]
    assert "--exporter dynamo" in doc["error"]["hint"]


def test_a_node_onnx_runtime_does_not_run_is_named_with_its_type_and_the_models_line(
        folder: Path) -> None:
    code, doc, err = cli("export", f"hf:{build('falcon-alibi', folder)}", "-o",
                         str(folder / "falcon"), "--validate", cwd=folder)
    assert code == 1, err
    error = doc["error"]
    assert error["kind"] == "validation", error
    message = error["message"]
    assert "failed unexpectedly" not in message
    assert "does not run Mul on bfloat16" in message, message
    assert "made at transformers/models/falcon/modeling_falcon.py:" in message, message
    assert "compute in float32 instead of bfloat16" in error["hint"], error
    assert (folder / "falcon" / "model.onnx").is_file(), "the file is kept: it is valid ONNX"


def test_a_model_that_returns_no_cache_is_named_with_the_task_that_exports(
        folder: Path) -> None:
    code, doc, err = cli("export", f"hf:{build('recurrentgemma', folder)}", "-o",
                         str(folder / "out_recurrentgemma"), cwd=folder)
    assert code == 2, err
    error = doc["error"]
    assert error["kind"] == "inputs" and "returns no cache" in error["message"], error
    assert "--task text-generation" in error["hint"]


def test_a_model_that_is_not_the_same_twice_is_said_to_be_so(folder: Path) -> None:
    code, doc, err = cli("export", f"hf:{build('vitmae', folder)}", "-o",
                         str(folder / "out_vitmae"), "--validate", "--exporter", "torchscript",
                         cwd=folder)  # two eager runs differ: found before any file is run
    assert code == 1, err
    error = doc["error"]
    assert error["kind"] == "validation"
    assert error["message"].startswith("The PyTorch model gives other outputs each run"), error
    assert "ids_restore" in error["message"]
    assert "deterministic" in error["hint"]
