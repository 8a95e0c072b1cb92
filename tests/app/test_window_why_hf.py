"""Why? on a Hugging Face folder in the window (issue 26), with a real worker: a tiny random-weight
Marian (transformers' config class, save_pretrained) exported by the command line into the
folder the window exports it to (encoder, decoder, decoder with past), then the weight of the
decoder's layers.1.fc1 patched in decoder_model.onnx only. The window's Validate of the folder
fails; Why? opens the Graph tab on decoder_model.onnx (not the first file of the set) at the
first divergent node, selected and in view, its properties naming the module, transformers'
source line and the differences; Save repro… writes the folder, whose repro.py reproduces it; a
file of the folder rewritten in place takes the answer away."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QFileDialog

from onnx_studio.app.graph.findings import WHY_HEADING
from onnx_studio.app.outcomes import FileStamp, ValidationOutcome
from onnx_studio.app.session import Explanation
from onnx_studio.app.window import MainWindow
from tests.app.conftest import EXPORT_TIMEOUT_MS
from tests.engine.explain_models import patched, scope_ending
from tests.engine.hf_models import shared_export
from tests.engine.hf_tiny import build

HF_TIMEOUT_MS = 300_000  # three files to validate or explain on a loaded 2-core machine
FILES = ["encoder_model.onnx", "decoder_model.onnx", "decoder_with_past_model.onnx"]


@pytest.fixture(scope="module")
def marian(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(the model folder, the export folder the window exports it to, the patched module): a
    copy of the test run's export of it by the command line (`shared_export`), decoder_model.
    onnx's layers.1.fc1 weight then scaled."""
    shared = shared_export(tmp_path_factory, build, "marian")
    code, doc, err = shared.run
    assert code == 0, err
    assert [f["name"] for f in doc["files"]] == FILES
    root = tmp_path_factory.mktemp("why_hf").resolve()
    source, out = root / "marian", root / "marian_onnx"  # where the window exports it
    shutil.copytree(shared.model, source)
    shutil.copytree(shared.output, out)
    decoder = out / "decoder_model.onnx"
    module = scope_ending(decoder, "layers.1.fc1")
    patched(decoder, decoder, module)
    return source, out, module


@pytest.mark.slow
@pytest.mark.usefixtures("shared_runner")
@pytest.mark.timeout(1200)
def test_why_opens_the_diverging_file_of_the_folder_and_saves_a_repro(
        live_window: MainWindow, marian: tuple[Path, Path, str], tmp_path: Path, qtbot,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window, session = live_window, live_window.session
    source, out, module = marian
    assert window.open_hf_folder(source)
    form = window.form.hf_task
    qtbot.waitUntil(lambda: form.task.count() > 0, timeout=EXPORT_TIMEOUT_MS)
    assert session.validate_target == out, session.validate_reason

    button = window.form.export_bar.validate_button
    qtbot.waitUntil(button.isEnabled, timeout=EXPORT_TIMEOUT_MS)
    with qtbot.waitSignal(session.validationFinished, timeout=HF_TIMEOUT_MS) as validated:
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
    outcome: ValidationOutcome = validated.args[0]
    assert outcome.onnx == out and outcome.validation is not None and not outcome.ok
    assert {t.message for t in outcome.validation.trials if not t.ok} == {"decoder_model.onnx"}

    bar = window.tabs.validation.why
    assert not bar.isHidden() and bar.why_button.isEnabled(), bar.why_button.toolTip()
    with qtbot.waitSignal(session.explainer.explained, timeout=HF_TIMEOUT_MS) as blocker:
        qtbot.mouseClick(bar.why_button, Qt.MouseButton.LeftButton)
    found: Explanation = blocker.args[0]
    div = found.divergence
    assert div is not None and div.module == module, div
    assert div.source.startswith("modeling_marian.py:"), div.source
    assert found.onnx == out and found.file == out / "decoder_model.onnx"
    files = found.document.files
    assert files is not None and [f.file for f in files] == FILES
    assert [f.diverges for f in files] == [False, True, False]

    # the Graph tab, on the file that diverges, at the node: selected and in view
    graph = window.tabs.graph
    assert window.tabs.currentWidget() is graph
    browser = graph.browser
    assert browser is not None and browser.model is not None
    assert graph.shown[0] is not None
    assert graph.shown[0].resolve() == (out / "decoder_model.onnx").resolve()
    index = browser.model.node_by_name(div.node)
    assert index is not None and browser.state.selection.node == index
    box = browser.canvas.scene_data.boxes[browser.canvas.selected]  # type: ignore[union-attr]
    visible = browser.view.mapToScene(browser.view.viewport().rect()).boundingRect()
    assert visible.contains(QPointF(box.x + box.w / 2, box.y + box.h / 2))
    assert browser.marks[div.node].startswith("the first divergence (Why?)")
    text = browser.properties.browser.toPlainText()
    assert WHY_HEADING in text and module in text
    assert div.source in text and "max abs diff" in text
    assert "decoder_model.onnx" in bar.text.text() and module in bar.text.text()

    # Save repro…: the chosen folder, written whole; the diverging file's repro reproduces
    target = tmp_path / "bug" / "repro_here"
    target.parent.mkdir()
    monkeypatch.setattr(QFileDialog, "getSaveFileName",
                        lambda *args, **kwargs: (str(target), ""))
    with qtbot.waitSignal(session.explainer.reproWritten, timeout=HF_TIMEOUT_MS) as written:
        bar.repro_button.click()
    folder = Path(written.args[0].folder)
    assert folder.resolve().parent == target.resolve()  # one repro per file inside it
    assert folder.name == "decoder_model"
    assert sorted(p.name for p in target.parent.iterdir()) == ["repro_here"]  # no temp left
    assert {"model.onnx", "inputs.npz", "expected.npz", "repro.py"} <= {
        p.name for p in folder.iterdir()}
    run = subprocess.run([sys.executable, "-I", str(folder / "repro.py")], capture_output=True,
                         text=True, timeout=60, check=False, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr  # it reproduces
    assert str(folder) in bar.text.text()

    # a file of the folder rewritten in place: the validation and its Why? no longer hold
    time.sleep(0.01)  # a later modification time, on file systems with coarse ones
    path = out / "decoder_with_past_model.onnx"
    onnx.save(onnx.load(str(path)), str(path))
    assert session.results.stale(outcome) is not None
    assert not session.explainer.offer().enabled
    session.recheck()
    assert session.explainer.explanation is None
    assert div.node not in browser.marks and not browser.properties.notes
    assert module not in bar.text.text()


def test_a_folders_stamp_follows_its_files_not_its_subfolders(tmp_path: Path) -> None:
    """A file of an export folder rewritten in place (the same size) changes the folder's
    stamp; a repro saved into a subfolder does not."""
    import os

    (tmp_path / "model.onnx").write_bytes(b"1234")
    (tmp_path / "decoder.onnx").write_bytes(b"ab")
    first = FileStamp.of(tmp_path)
    assert first is not None and first.size == 6
    (tmp_path / "repro_node" / "inner").mkdir(parents=True)
    (tmp_path / "repro_node" / "repro.py").write_text("x")
    assert FileStamp.of(tmp_path) == first
    (tmp_path / "decoder.onnx").write_bytes(b"cd")
    later = first.mtime_ns + 1_000_000_000
    os.utime(tmp_path / "decoder.onnx", ns=(later, later))
    assert FileStamp.of(tmp_path) != first
    assert FileStamp.of(tmp_path / "nowhere") is None
