"""Screenshots of Why? for the documentation (not a test): a real export of a tiny stack of Linear
blocks with layers.2's weight patched in the file, validated (it fails), then Why?.

    QT_QPA_PLATFORM=offscreen python tests/app/screenshots_why.py docs/screenshots [WIDTH]

Writes window_why_validation_WIDTH_light.png (the Validation tab with the answer and Save
repro…) and window_why_graph_WIDTH_light.png (the Graph tab opened at the first divergent
node, its properties); then the Variants panel on a model with a constant above 65504:
window_fp16_overflow_* (plain fp16, its overflows), window_fp16_keep_* (keep fp32 auto) and
window_fp16_keep_graph_* (its kept nodes outlined); WIDTH×768 (1024 unless told), grabbed
from the window itself.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.app.shot_window import shot_window


def main(out_dir: Path, width: int = 1024, height: int = 768) -> int:
    with shot_window("shots_why_", out_dir, width, height) as shots:
        from tests.engine.explain_models import exported, patched

        window = shots.window
        session = window.session
        folder = shots.tmp / "model"
        folder.mkdir()
        onnx_file, recipe = exported(folder, "Stack", "net")
        good = onnx_file.with_name("good.onnx")
        shutil.copy(onnx_file, good)
        patched(good, onnx_file, "layers.2.lin")

        window.open_path(recipe)
        shots.wait_for(session.validationFinished, session.start_validation, 180)
        explained: list[object] = []
        session.explainer.explained.connect(explained.append)
        shots.wait_for(session.explainer.explained, window.tabs.validation.why.why_button.click,
                       180)
        shots.shoot("why_graph", ("light",))
        window.tabs.setCurrentWidget(window.tabs.validation)
        shots.shoot("why_validation", ("light",))

        # the Variants panel: fp16 of a model with a constant above 65504, plain then auto
        scaled, scaled_recipe = exported(folder, "Scaled")
        window.open_path(scaled_recipe)
        compare = window.tabs.compare
        compare.set_files(scaled, "")
        for keep in ("none", "auto"):
            compare.variants.kind.setCurrentText("fp16")
            compare.variants.keep.setCurrentText(keep)
            shots.wait_for(session.analysis.finished, compare.variants.make_button.click)
        window.tabs.setCurrentWidget(compare)
        compare.variants.table.setCurrentCell(0, 0)
        shots.shoot("fp16_overflow", ("light",))
        compare.variants.table.setCurrentCell(1, 0)
        shots.shoot("fp16_keep", ("light",))
        compare.variants.graph_button.click()
        shots.shoot("fp16_keep_graph", ("light",))
    return 0 if explained else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
