"""The generation check that proves something (issue 37.4): the files' step loop teacher-forced
on a fixed random continuation against one eager forward over the whole sequence, without a
cache (onnx_studio.engine.validation.hf_checks.check_steps).

A tiny GPT-2 (hidden 32, 2 layers, transformers' default initialisation) whose cache path is
wrong from step 3: every value its forward writes into a non-empty cache is 3 times too large.
Its forward without a cache is right, so the first steps of the loop are too (step 1 reads no
cache, step 2 a cache the prompt wrote); step 3 reads the value step 2 wrote. generate() runs
the same wrong cache path as the exported file, so the greedy view (the tokens and the logits
of the old check) agrees with the file, and every file trial with a cache does too; with
random weights greedy decoding repeats one token on both sides. Only the teacher-forced steps
against a forward without a cache catch it, naming step 3."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

WRONG_BY = 3.0


def _tiny_gpt2(folder: Path) -> Path:
    import torch
    import transformers

    target = folder / "gpt2_default_init"
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=500, n_embd=32, n_layer=2, n_head=4, n_positions=128)).save_pretrained(target)
    return target


def _cache_wrong_from_step_3(model_class: type) -> type:
    """`model_class` whose forward scales the values it writes into a non-empty cache (a
    tensor mask, not a Python branch: the exported file keeps the wrong path for every
    cache length)."""
    import torch

    class CacheWrongFromStep3(model_class):  # type: ignore[misc, valid-type]
        def forward(self, *args: Any, cache: Any = None, **kwargs: Any) -> Any:
            past = cache.get_seq_length() if cache is not None else 0
            out = super().forward(*args, cache=cache, **kwargs)
            if out.past_key_values is not None:
                for layer in out.past_key_values.layers:
                    positions = torch.arange(layer.values.shape[-2])
                    # the positions written now, when the cache held some before
                    written = (positions >= past) & (positions < past).any()
                    layer.values = torch.where(written[None, None, :, None],
                                               layer.values * WRONG_BY, layer.values)
            return out

    return CacheWrongFromStep3


@pytest.fixture(scope="module")
def wrong_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    """The model (its cache path wrong) and the folder its with-past file was exported into
    by the studio's own exporter (dynamo)."""
    from onnx_studio.engine.events import Events
    from onnx_studio.engine.export.hf_files import export_part
    from onnx_studio.engine.source.hf import load_hf

    base = tmp_path_factory.mktemp("generation_steps")
    hf = load_hf(f"hf:{_tiny_gpt2(base)}", base)
    assert hf.task == "text-generation-with-past"
    hf.model.__class__ = _cache_wrong_from_step_3(type(hf.model))
    out = base / "onnx"
    out.mkdir()
    for part in hf.parts:
        export_part(part, out, None, Events())
    return hf, out


@pytest.mark.timeout(600)  # one dynamo export of a tiny GPT-2: ~35 s on a loaded 2-core machine
def test_a_cache_wrong_from_step_3_fails_the_step_check_the_greedy_tokens_miss(
        wrong_cache: tuple[Any, Path]) -> None:
    from onnx_studio.engine.events import Events
    from onnx_studio.engine.protocol import Validation
    from onnx_studio.engine.validation.hf_checks import failure_hint, validate_hf

    hf, out = wrong_cache
    result = validate_hf(hf, out, 1e-3, 1e-5, Events())
    generation = result["generation"]
    # the old criterion passes: greedy tokens equal, their logits within the tolerance at
    # every step (generate runs the same wrong cache path as the file) ...
    assert generation["greedy_passed"] and generation["tokens_equal"], generation
    assert generation["onnx_tokens"] == generation["torch_tokens"]
    assert generation["max_abs_diff"] < 1e-5
    # (one token repeated 20 times, on both sides: the note says what that proves)
    assert generation["greedy_constant"] and len(set(generation["torch_tokens"])) == 1
    assert "prove little" in generation["note"]
    # ... and so does every file trial, the ones with a cache included
    assert all(t["ok"] for t in result["trials"]), result["trials"]
    # the teacher-forced steps do not: right at steps 1 and 2, wrong from step 3 on
    steps = generation["continuation"]
    assert not steps["passed"] and steps["first_failing_step"] == 3
    assert [s["passed"] for s in steps["steps"][:3]] == [True, True, False]
    assert steps["steps"][2]["past"] == 6 and steps["steps"][2]["max_abs_diff"] > 1e-2
    assert steps["worst_step"] >= 3
    assert steps["with_past"] and len(steps["tokens"]) == generation["steps"] == 20
    assert "from step 3 of 20 (the cache then holds 6 positions)" in steps["message"]
    # the verdict: failed, by the steps, with a hint that names the cache
    assert not generation["passed"] and not result["ok"]
    assert result["message"] == generation["message"] == steps["message"]
    assert "cache" in failure_hint(result)
    typed = Validation.from_dict(result).generation
    assert typed is not None and typed.continuation is not None
    assert typed.continuation.first_failing_step == 3 and typed.continuation.steps[2].past == 6
