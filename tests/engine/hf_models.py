"""Tiny random-weight Hugging Face models (hidden 32, 2 layers, vocabulary 500) saved with
save_pretrained, and the studio's CLI run on them: shared by the hf tests and bench_hf; the
real-size configs (Qwen2, Llama 3.2) and the peak memory of a command's process tree."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 500
# a wide initialisation, so greedy tokens of a random model vary instead of repeating one
INIT = 0.3


def build(name: str, folder: Path) -> Path:
    """Save the tiny model `name` into folder/name (once) and return that folder."""
    import torch
    import transformers as T

    target = folder / name
    if (target / "config.json").exists():
        return target
    torch.manual_seed(0)
    common = {"vocab_size": VOCAB, "initializer_range": INIT}
    if name == "bert":
        model: Any = T.BertForSequenceClassification(T.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=64, **common))
    elif name == "gpt2":
        model = T.GPT2LMHeadModel(T.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=128,
                                               **common))
    elif name in ("llama", "qwen2"):
        config_class = T.LlamaConfig if name == "llama" else T.Qwen2Config
        causal = T.LlamaForCausalLM if name == "llama" else T.Qwen2ForCausalLM
        model = causal(config_class(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2,
                                    max_position_embeddings=128, **common))
    elif name == "t5":
        model = T.T5ForConditionalGeneration(T.T5Config(
            d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, decoder_start_token_id=0,
            vocab_size=VOCAB, initializer_factor=1.0))
    elif name == "whisper":
        model = T.WhisperForConditionalGeneration(T.WhisperConfig(
            d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
            max_source_positions=16, max_target_positions=64, decoder_start_token_id=1,
            pad_token_id=0, eos_token_id=2, bos_token_id=1, suppress_tokens=None,
            begin_suppress_tokens=None, init_std=INIT, vocab_size=VOCAB))
    elif name == "vit":
        model = T.ViTForImageClassification(T.ViTConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            image_size=32, patch_size=8, num_labels=5, initializer_range=INIT))
    else:
        raise ValueError(name)
    model.save_pretrained(target)
    return target


Run = tuple[int, dict[str, Any], str]  # (exit status, the JSON document, standard error)


def studio_export(source: str, out: Path, *extra: str) -> Run:
    """Run `onnx-studio export SOURCE -o OUT --validate --json EXTRA` in a child process:
    (exit status, the JSON document, standard error)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "export", source, "-o", str(out),
         "--validate",
         "--json", *extra], capture_output=True, text=True, env=env, cwd=str(out.parent),
        check=False)
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr


class SharedExport(NamedTuple):
    """A tiny model's folder, the folder its export wrote beside it (`NAME_onnx`, where the
    window exports it) and the run that wrote it."""

    model: Path
    output: Path
    run: Run


def shared_export(tmp_path_factory: Any, build: Callable[[str, Path], Path], name: str,
                  *extra: str) -> SharedExport:
    """`studio_export` of the tiny model `build(name, ...)` saves (`hf:`, `--validate`, EXTRA),
    run once per test run for every test process (tests.conftest.shared_folder). Tests read
    both folders; one that changes a file copies them first."""
    from tests.conftest import shared_folder

    key = "-".join([build.__module__.rsplit(".", 1)[-1], name,
                    *(e.strip("-").replace("=", "_") for e in extra)])

    def make(folder: Path) -> None:
        run = studio_export(f"hf:{build(name, folder)}", folder / f"{name}_onnx", *extra)
        (folder / "run.json").write_text(json.dumps(run), encoding="utf-8")

    folder = shared_folder(tmp_path_factory, key, make)
    code, doc, err = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    return SharedExport(folder / name, folder / f"{name}_onnx", (code, doc, err))


def write_recipe(source: str, out: Path, path: Path, task: str | None = None) -> Path:
    """A recipe for `source` exporting into the folder `out` (the task, if given), at `path`."""
    model = f'source = "{source}"' + (f'\nkwargs = {{ task = "{task}" }}' if task else "")
    path.write_text(f'version = 1\n\n[model]\n{model}\n\n[export]\noutput = "{out}"\n',
                    encoding="utf-8")
    return path


def studio_validate(folder: Path, recipe: Path) -> tuple[int, dict[str, Any], str]:
    """Run `onnx-studio validate FOLDER --recipe RECIPE --json` in a child process:
    (exit status, the JSON document, standard error)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "onnx_studio.engine.cli", "validate", str(folder), "--recipe",
         str(recipe),
         "--json"], capture_output=True, text=True, env=env, cwd=str(recipe.parent),
        check=False)
    lines = done.stdout.strip().splitlines()
    return done.returncode, json.loads(lines[-1]) if lines else {}, done.stderr


# Qwen2.5-0.5B's shapes (tied embeddings); the layer count sets the size
QWEN2: dict[str, Any] = {
    "vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864,
    "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 4096,
    "tie_word_embeddings": True, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"]}


def qwen2_folder(folder: Path, layers: int) -> tuple[Path, int]:
    """A config-only Qwen2 folder (`hf-config:`: random weights, nothing to load) of
    Qwen2.5-0.5B's shapes with `layers` layers (28: 553M parameters, 2.2 GB), and its
    weights' size in bytes (float32). For the real-size export test and bench_large.py."""
    target = folder / f"qwen2_{layers}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps({**QWEN2, "num_hidden_layers": layers}))
    h, i, v = QWEN2["hidden_size"], QWEN2["intermediate_size"], QWEN2["vocab_size"]
    kv = h // QWEN2["num_attention_heads"] * QWEN2["num_key_value_heads"]
    layer = 2 * h * h + 2 * h * kv + h + 2 * kv + 3 * h * i + 2 * h  # attention, MLP, norms
    return target, 4 * (v * h + layers * layer + h)


# Llama 3.2's shapes (tied embeddings, grouped-query attention); built from the config with
# random weights, float32. "1b": 1.24B parameters, 4.9 GB; "3b": 3.21B, 12.8 GB (issue 37, 3)
LLAMA: dict[str, Any] = {
    "vocab_size": 128256, "num_key_value_heads": 8, "max_position_embeddings": 131072,
    "rope_theta": 500000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
    "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
LLAMA_SIZES: dict[str, dict[str, int]] = {
    "1b": {"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32,
           "head_dim": 64, "intermediate_size": 8192},
    "3b": {"hidden_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 24,
           "head_dim": 128, "intermediate_size": 8192},
}


def llama_folder(folder: Path, size: str) -> tuple[Path, int]:
    """A config-only Llama folder (`hf-config:`) of Llama-3.2-1B's or -3B's shapes (`size`
    "1b" or "3b"), and its float32 weights' size in bytes."""
    config = {**LLAMA, **LLAMA_SIZES[size]}
    target = folder / f"llama_{size}"
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text(json.dumps(config))
    h, i, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    q = config["num_attention_heads"] * config["head_dim"]
    kv = config["num_key_value_heads"] * config["head_dim"]
    layer = 2 * h * q + 2 * h * kv + 3 * h * i + 2 * h  # attention, MLP, norms
    return target, 4 * (v * h + config["num_hidden_layers"] * layer + h)


def tree_peak(command: list[str], cwd: Path, interval: float = 0.2
              ) -> tuple[int, str, str, int, float]:
    """Run `command` (PYTHONPATH this checkout, offline): (exit status, standard output,
    standard error, the largest sum of the resident memory of it and its descendants seen at
    any sample, seconds)."""
    import psutil

    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    with open(cwd / "stdout.txt", "w+") as out, open(cwd / "stderr.txt", "w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, cwd=cwd)
        root = psutil.Process(process.pid)
        peak = 0
        while process.poll() is None:
            total = 0
            try:
                for member in [root, *root.children(recursive=True)]:
                    # a process that ended between the listing and the read counts nothing
                    with contextlib.suppress(psutil.Error):
                        total += member.memory_info().rss
            except psutil.Error:
                pass
            peak = max(peak, total)
            time.sleep(interval)
        out.seek(0)
        err.seek(0)
        return process.returncode, out.read(), err.read(), peak, time.perf_counter() - started
