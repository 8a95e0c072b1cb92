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
- MPT through the TorchScript exporter: the exporter drops position_ids, which MPT's forward
  ignores; the file is validated on the inputs it has and passes, 20 tokens equal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.hf_tiny import build
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
    assert generation["message"].startswith("ONNX Runtime cannot run during greedy generation")
    assert "input_ids[1, 6]" in generation["message"]


def test_a_model_that_names_no_vocabulary_is_an_inputs_error(folder: Path) -> None:
    import transformers

    from engine.source.hf.dummies import input_embeddings, vocab_size

    path = build("canine", folder)
    model = transformers.CanineModel.from_pretrained(path)
    with pytest.raises(NotImplementedError):
        model.get_input_embeddings()  # what crashed the worker before
    assert input_embeddings(model) is None
    assert vocab_size(model.config, model) is None
    code, doc, err = cli("export", f"hf:{path}", "-o", str(folder / "canine"), cwd=folder)
    assert code == 2, err
    error = doc["error"]
    assert error["kind"] == "inputs", error
    assert "vocabulary size" in error["message"] and "input_ids" in error["message"]
    assert "worker failed" not in error["message"].lower()


def test_an_exporter_failure_is_placed_in_the_models_code_and_given_whole(
        folder: Path) -> None:
    code, doc, err = cli("export", f"hf:{build('xlnet', folder)}", "-o",
                         str(folder / "xlnet"), cwd=folder)
    assert code == 1, err
    message = doc["error"]["message"]
    assert doc["error"]["kind"] == "export"
    assert "at modeling_xlnet.py:" in message and "attention_mask" in message, message
    assert "wrappers.py" not in message  # the studio's own frame is not the place

    code, doc, err = cli("export", f"hf:{build('mpt', folder)}", "-o", str(folder / "mpt"),
                         cwd=folder)
    assert code == 1, err
    message = doc["error"]["message"]
    assert "inconsistencies were found:" in message and "is inconsistent" in message, message
    assert "torchscript" in doc["error"]["hint"]


def test_an_input_the_exporter_dropped_is_not_fed_and_the_file_passes(folder: Path) -> None:
    code, doc, err = cli("export", f"hf:{build('mpt', folder)}", "-o",
                         str(folder / "mpt_ts"), "--exporter", "torchscript", "--validate",
                         cwd=folder)
    assert code == 0, (doc.get("error"), err[-3000:])
    assert doc["validation"]["ok"] and doc["validation"]["generation"]["tokens_equal"]
    said = [w for w in doc["validation"]["warnings"] if "does not take" in w["message"]]
    assert len(said) == 1 and "position_ids" in said[0]["message"], doc["validation"]
    assert said[0]["source"] == "model.onnx"


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
                         str(folder / "out_vitmae"), "--validate", cwd=folder)
    assert code == 1, err
    error = doc["error"]
    assert error["kind"] == "validation"
    assert error["message"].startswith("The PyTorch model gives other outputs each run"), error
    assert "ids_restore" in error["message"]
    assert "deterministic" in error["hint"]
