"""A .pt2 is untrusted until proven safe: crafted archives run nothing without trust_pickle.

Each crafted file carries a payload that makes a marker folder. Without trust the file is
refused through every door (load_model, the CLI, the worker's export and describe jobs) and
the marker never appears; with trust_pickle = true the same file does make it, so the
payloads are real and the refusals are not vacuous.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import queue
import shutil
import subprocess
import sys
import threading
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from onnx_studio.engine.errors import StudioError
from onnx_studio.engine.recipe import ModelSpec, Recipe
from onnx_studio.engine.source import pt2_archive
from onnx_studio.engine.source.describe import describe
from onnx_studio.engine.source.load import load_model
from tests.conftest import REPO

TIMEOUT = 120  # seconds for any subprocess step


class Payload:
    """Unpickling this makes the folder `marker`: the stand-in for any code a file runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.mkdir, (self.marker,))


def _torch_saved(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _code(marker: Path) -> str:
    """Python text that makes the marker (returns None)."""
    return f"__import__('os').mkdir({str(marker)!r})"


# ---------------------------------------------------------------------------- crafting

Entries = dict[str, bytes]


@pytest.fixture(scope="module")
def normal_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain torch.export.save of a Linear(3, 2), as torch 2.13 writes it."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("normal") / "model.pt2"
    program = torch.export.export(torch.nn.Linear(3, 2).eval(), (torch.randn(2, 3),))
    torch.export.save(program, str(path))
    return path


def _entries(path: Path) -> tuple[Entries, str]:
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
        return {i.filename: archive.read(i) for i in infos}, infos[0].filename.split("/")[0]


def _write(path: Path, entries: Entries) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return path


def _json(entries: Entries, name: str) -> Any:
    return json.loads(entries[name])


def _pickled_weight(e: Entries, root: str, marker: Path) -> None:
    config = _json(e, f"{root}/data/weights/model_weights_config.json")
    config["config"]["weight"]["use_pickle"] = True
    e[f"{root}/data/weights/model_weights_config.json"] = json.dumps(config).encode()
    e[f"{root}/data/weights/{config['config']['weight']['path_name']}"] = _torch_saved(
        Payload(marker))


def _constant(path_name: str, data: Callable[[Path], bytes]) -> Callable[..., None]:
    def craft(e: Entries, root: str, marker: Path) -> None:
        name = f"{root}/data/constants/model_constants_config.json"
        config = _json(e, name)
        config["config"]["c"] = {"path_name": path_name, "is_param": False,
                                 "use_pickle": True, "tensor_meta": None}
        e[name] = json.dumps(config).encode()
        e[f"{root}/data/constants/{path_name}"] = data(marker)
    return craft


def _pickled_sample_inputs(e: Entries, root: str, marker: Path) -> None:
    e[f"{root}/data/sample_inputs/model.pt"] = _torch_saved(Payload(marker))


def _sample_inputs_other_case(e: Entries, root: str, marker: Path) -> None:
    """torch's reader finds entries case-insensitively: the scan must too."""
    del e[f"{root}/data/sample_inputs/model.pt"]
    e[f"{root}/DATA/Sample_Inputs/model.pt"] = _torch_saved(Payload(marker))


def _program(edit: Callable[[dict[str, Any], Path], None]) -> Callable[..., None]:
    def craft(e: Entries, root: str, marker: Path) -> None:
        program = _json(e, f"{root}/models/model.json")
        edit(program, marker)
        e[f"{root}/models/model.json"] = json.dumps(program).encode()
    return craft


def _guard(program: dict[str, Any], marker: Path) -> None:
    program["guards_code"] = [f"{_code(marker)} is None"]  # exec'd into ep.module()'s guards


def _sym_expr(program: dict[str, Any], marker: Path) -> None:
    sizes = program["graph_module"]["graph"]["tensor_values"]["linear"]["sizes"]
    sizes[0] = {"as_expr": {"expr_str": _code(marker), "hint": {"as_int": 2}}}  # sympify


def _c_compiler() -> str | None:
    return (shutil.which("cc") or shutil.which("gcc")) if sys.platform.startswith("linux") \
        else None


def _aoti(e: Entries, root: str, marker: Path) -> None:
    """An AOTInductor model: torch.export.load dlopens its library, whose constructor runs."""
    library = b"\x7fELF not really"
    compiler = _c_compiler()
    if compiler is not None:
        source = marker.parent / "ctor.c"
        source.write_text("#include <sys/stat.h>\n__attribute__((constructor)) static void "
                          f"make_marker(void) {{ mkdir({json.dumps(str(marker))}, 0700); }}\n")
        subprocess.run([compiler, "-shared", "-fPIC", "-o", str(source.with_suffix(".so")),
                        str(source)], check=True, timeout=TIMEOUT, capture_output=True)
        library = source.with_suffix(".so").read_bytes()
    folder = f"{root}/data/aotinductor/model"
    metadata = json.dumps({"AOTI_DEVICE_KEY": "cpu"}).encode()
    e[f"{folder}/model_metadata.json"] = metadata
    e[f"{folder}/model.wrapper_metadata.json"] = metadata
    e[f"{folder}/model.so"] = library


def _legacy_layout(e: Entries, root: str, marker: Path) -> None:
    """The pre-2.7 layout torch.export.load falls back to when the new one cannot be read."""
    from torch._export.serde.schema import SCHEMA_VERSION

    program = e[f"{root}/models/model.json"]
    e.clear()
    e["version"] = ".".join(map(str, SCHEMA_VERSION)).encode()
    e["serialized_exported_program.json"] = program
    e["serialized_state_dict.pt"] = _torch_saved(Payload(marker))
    e["serialized_constants.pt"] = b""
    e["serialized_example_inputs.pt"] = b""


@dataclass(frozen=True)
class Case:
    name: str
    craft: Callable[[Entries, str, Path], None]
    entries: tuple[str, ...]  # what the refusal must name
    pickled: bool = True  # the refusal says "would unpickle"
    runs_on: str = "load"  # with trust the payload runs on "load", "call", or "native" (load)


CASES = [
    Case("pickled_weight", _pickled_weight, ("data/weights/weight_0",)),
    Case("pickled_constant", _constant("tensor_0", lambda m: _torch_saved(Payload(m))),
         ("data/constants/tensor_0",)),
    Case("opaque_constant", _constant("opaque_obj_0", lambda m: pickle.dumps(Payload(m))),
         ("data/constants/opaque_obj_0",)),
    Case("pickled_sample_inputs", _pickled_sample_inputs, ("data/sample_inputs/model.pt",)),
    Case("sample_inputs_other_case", _sample_inputs_other_case,
         ("data/sample_inputs/model.pt",)),
    Case("guards_code", _program(_guard), ("models/model.json",), False, "call"),
    Case("sym_expr", _program(_sym_expr), ("models/model.json",), False),
    Case("aotinductor", _aoti, ("data/aotinductor/model/",), False, "native"),
    Case("legacy_layout", _legacy_layout, ("serialized_state_dict.pt",)),
]


@dataclass
class Evil:
    case: Case
    path: Path
    marker: Path

    @property
    def folder(self) -> Path:
        return self.path.parent


def _evil(normal: Path, folder: Path, case: Case) -> Evil:
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / "marker"
    entries, root = _entries(normal)
    case.craft(entries, root, marker)
    return Evil(case, _write(folder / "evil.pt2", entries), marker)


@pytest.fixture(params=CASES, ids=[c.name for c in CASES])
def evil(request: pytest.FixtureRequest, normal_pt2: Path, tmp_path: Path) -> Evil:
    return _evil(normal_pt2, tmp_path / "files", request.param)


def _recipe(folder: Path, source: str, trust: bool = False) -> Recipe:
    return Recipe(model=ModelSpec(source=source, trust_pickle=trust), base_dir=folder)


def _assert_names_entries(message: str, evil: Evil) -> None:
    assert "evil.pt2" in message and "trust_pickle = true" in message, message
    for entry in evil.case.entries:
        assert entry in message, message
    says = "would unpickle" if evil.case.pickled else "would run code stored in"
    assert says in message, message


# ---------------------------------------------------------------------------- in process


def test_scan_lists_the_crafted_entries(evil: Evil) -> None:
    found = pt2_archive.unsafe_entries(evil.path)
    assert list(evil.case.entries) == found
    assert not evil.marker.exists()


def test_load_model_refuses_without_trust(evil: Evil) -> None:
    with pytest.raises(StudioError) as caught:
        load_model(_recipe(evil.folder, "evil.pt2"))
    assert caught.value.kind == "source"
    _assert_names_entries(caught.value.message, evil)
    assert "trust_pickle = true" in caught.value.hint and "torch.export.save" in caught.value.hint
    assert not evil.marker.exists()


def test_describe_never_runs_the_payload(evil: Evil) -> None:
    description = describe("evil.pt2", evil.folder)
    assert description.kind == "exported_program"
    assert not evil.marker.exists()


def test_with_trust_the_payload_is_real(evil: Evil) -> None:
    """trust_pickle = true loads as before: the payload runs, so the refusals mean something."""
    if evil.case.runs_on == "native" and _c_compiler() is None:
        pytest.skip("the AOTInductor payload is a shared library; no C compiler (Linux) here")
    try:
        loaded = load_model(_recipe(evil.folder, "evil.pt2", trust=True))
        if evil.case.runs_on == "call":
            loaded.module(torch.randn(2, 3))
    except StudioError as exc:  # the payload replaced real data: torch fails after running it
        assert exc.kind == "source"
    assert evil.marker.exists()


def test_normal_pt2_loads_without_trust(normal_pt2: Path) -> None:
    assert pt2_archive.scan(normal_pt2) == []
    # the one pickle a normal save writes: the example inputs, read with weights_only=True
    with zipfile.ZipFile(normal_pt2) as archive:
        names = archive.namelist()
    assert any(n.endswith("data/sample_inputs/model.pt") for n in names)
    loaded = load_model(_recipe(normal_pt2.parent, normal_pt2.name))
    assert loaded.kind == "exported_program" and loaded.forward_params == ["input"]
    torch.manual_seed(0)
    reference = torch.nn.Linear(3, 2)
    x = torch.randn(2, 3)  # exported with a fixed batch of 2
    assert torch.allclose(loaded.module(x), reference(x))


def test_dynamic_pt2_with_marked_inputs_loads_without_trust(tmp_path: Path) -> None:
    """Dynamic shapes add symbolic sizes (sympy text) and dynamo's marks on the inputs."""
    from torch.export import Dim

    x = torch.randn(4, 3)
    torch._dynamo.mark_dynamic(x, 0)
    program = torch.export.export(torch.nn.Linear(3, 2), (x,),
                                  dynamic_shapes=({0: Dim("batch", max=64)},))
    torch.export.save(program, str(tmp_path / "dyn.pt2"))
    assert pt2_archive.scan(tmp_path / "dyn.pt2") == []
    loaded = load_model(_recipe(tmp_path, "dyn.pt2"))
    assert loaded.module(torch.randn(7, 3)).shape == (7, 2)


def test_untrusted_loads_never_unpickle_fully(tmp_path: Path) -> None:
    """The second lock: inside weights_only_loads, weights_only=False is overridden."""
    data = _torch_saved(Payload(tmp_path / "marker"))
    with pt2_archive.weights_only_loads(), pytest.raises(Exception, match=r"[Ww]eights only"):
        torch.load(io.BytesIO(data), weights_only=False)
    assert not (tmp_path / "marker").exists()
    assert os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD") in (None, "0")


def test_an_entry_twice_is_a_finding(normal_pt2: Path, tmp_path: Path) -> None:
    """Python's zipfile and torch's reader may pick different copies of a duplicated name."""
    entries, root = _entries(normal_pt2)
    path = _write(tmp_path / "twice.pt2", entries)
    with warnings.catch_warnings(), zipfile.ZipFile(path, "a") as archive:
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name"
        archive.writestr(f"{root}/DATA/sample_inputs/model.pt",
                         _torch_saved(Payload(tmp_path / "marker")))
    assert "data/sample_inputs/model.pt" in pt2_archive.unsafe_entries(path)
    with pytest.raises(StudioError, match="trust_pickle"):
        load_model(_recipe(tmp_path, "twice.pt2"))
    assert not (tmp_path / "marker").exists()


def test_torch_and_python_read_a_normal_archive_alike(normal_pt2: Path) -> None:
    assert pt2_archive.reader_disagreements(normal_pt2) == []


def test_not_a_zip_is_unreadable_not_untrusted(tmp_path: Path) -> None:
    (tmp_path / "junk.pt2").write_bytes(b"not a zip")
    with pytest.raises(StudioError) as caught:
        load_model(_recipe(tmp_path, "junk.pt2"))
    assert "not a readable ExportedProgram" in caught.value.message


# ---------------------------------------------------------------------------- subprocesses


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "ONNX_STUDIO_CACHE_DIR": str(cache)}


@pytest.fixture(scope="module")
def evil_files(normal_pt2: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Evil]:
    root = tmp_path_factory.mktemp("evil")
    return [_evil(normal_pt2, root / case.name, case) for case in CASES]


@pytest.mark.slow  # about 30 s: one CLI process per crafted file
def test_cli_refuses_every_crafted_file(evil_files: list[Evil],
                                        tmp_path: Path) -> None:
    """`onnx-studio export evil.pt2 -o out.onnx --input x=2x3 --json`: exit 2, nothing runs.

    The runs are started together (each imports torch) and each is waited for with a timeout.
    """
    runs = []
    for evil in evil_files:
        argv = [sys.executable, "-m", "onnx_studio.engine.cli", "export", str(evil.path), "-o",
                str(evil.folder / "out.onnx"), "--input", "x=2x3", "--json"]
        runs.append((evil, subprocess.Popen(
            argv, cwd=evil.folder, env=_env(tmp_path / evil.case.name), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    try:
        for evil, proc in runs:
            out, err = proc.communicate(timeout=TIMEOUT)
            where = f"{evil.case.name}: {err[-2000:]}"
            assert proc.returncode == 2, where
            doc = json.loads(out.strip().splitlines()[-1])
            assert doc["ok"] is False and doc["error"]["kind"] == "source", where
            _assert_names_entries(doc["error"]["message"], evil)
            assert not evil.marker.exists(), where
            assert not (evil.folder / "out.onnx").exists(), where
    finally:
        for _, proc in runs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


class _Worker:
    """`python -m onnx_studio.engine.worker` over pipes; every read has a timeout."""

    def __init__(self, cache: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "onnx_studio.engine.worker"], cwd=REPO, env=_env(cache),
            text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: queue.SimpleQueue[str] = queue.SimpleQueue()
        threading.Thread(target=self._read, daemon=True).start()
        assert self.next_line()["type"] == "ready"

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def next_line(self) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=TIMEOUT))
        except queue.Empty:
            raise AssertionError(f"the worker said nothing for {TIMEOUT} s") from None

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send a job; its final result or error (events before it are skipped)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        while True:
            event = self.next_line()
            if event.get("id") == request["id"] and event["type"] in ("result", "error"):
                return event

    def close(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"job": "quit"}) + "\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Worker]:
    w = _Worker(tmp_path_factory.mktemp("worker-cache"))
    yield w
    w.close()


RECIPE = """version = 1
[model]
source = "evil.pt2"
[[inputs]]
name = "x"
shape = [2, 3]
[export]
output = "out.onnx"
"""


def test_worker_refuses_every_crafted_file(worker: _Worker, evil_files: list[Evil]) -> None:
    for number, evil in enumerate(evil_files, start=1):
        event = worker.run({"id": number, "job": "export", "recipe": RECIPE,
                            "base_dir": str(evil.folder)})
        where = f"{evil.case.name}: {event}"
        # a failed export is a result whose report says ok false (an `error` event is for a
        # job that could not run at all); either way the error is the refusal
        report = event.get("report") or {"ok": False, "error": event.get("error")}
        assert report["ok"] is False and report["error"]["kind"] == "source", where
        _assert_names_entries(report["error"]["message"], evil)
        assert not evil.marker.exists(), where
        assert not (evil.folder / "out.onnx").exists(), where


def test_worker_describes_crafted_files_without_running_them(
        worker: _Worker, evil_files: list[Evil]) -> None:
    for number, evil in enumerate(evil_files, start=100):
        event = worker.run({"id": number, "job": "describe", "source": "evil.pt2",
                            "base_dir": str(evil.folder)})
        assert event["type"] == "result", event
        assert event["description"]["kind"] == "exported_program", event
        assert not evil.marker.exists(), evil.case.name


# ---------------------------------------------------------------------------- TorchScript


class WritesOnLoad(torch.nn.Module):
    """TorchScript whose __setstate__ (run by torch.jit.load) writes into a file."""

    def __init__(self, target: str) -> None:
        super().__init__()
        self.target = target

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x

    @torch.jit.export
    def __getstate__(self) -> tuple[str, bool]:
        return (self.target, self.training)

    @torch.jit.export
    def __setstate__(self, state: tuple[str, bool]) -> None:
        self.target = state[0]
        written = torch.from_file(self.target, shared=True, size=4, dtype=torch.uint8)
        written.fill_(65)  # "AAAA"
        self.training = bool(written.sum() > 0) and state[1]


def test_torchscript_runs_its_own_code_at_load(tmp_path: Path) -> None:
    """What docs/security.md says of TorchScript: no trust is asked, and it is no sandbox.

    torch.jit.load runs the archive's TorchScript (here __setstate__), and TorchScript
    operators reach the file system: loading the model rewrites `target`.
    """
    target = tmp_path / "target.bin"
    target.write_bytes(b"zzzz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch 2.9+ deprecates torch.jit
        scripted = torch.jit.script(WritesOnLoad(str(target)))
    target.write_bytes(b"zzzz")
    scripted.save(str(tmp_path / "scripted.pt"))
    target.write_bytes(b"zzzz")
    loaded = load_model(_recipe(tmp_path, "scripted.pt"))
    assert loaded.kind == "torchscript"
    assert target.read_bytes() == b"AAAA"
