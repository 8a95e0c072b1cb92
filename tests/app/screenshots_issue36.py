"""Screenshots of issue 36's paths (not a test): the window's default example exported, then its
file changed on disk, validated again, profiled, compared with a copy of itself; the Log.

    QT_QPA_PLATFORM=offscreen python tests/app/screenshots_issue36.py docs/screenshots [WIDTH]

Writes window_NAME_WIDTH_THEME.png at WIDTH×768 (1024 unless told), light and dark, drawn from
the window itself: file_changed (the Summary of the file read again after it changed on disk:
the banner offers Validate it), file_failed (the same file validated: every view says it
failed), profile (per-node shares of a run that add up, a fused Conv+Relu named), compare_self
(the file against its copy: the graphs one at a time or side by side, the timing said to be
noise), and log (light only: torch's lines as sentences, long lines wrapped).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.app.shot_window import shot_window


def main(out_dir: Path, width: int = 1024, height: int = 768) -> int:
    with shot_window("shots_36_", out_dir, width, height) as shots:
        from tests.app.test_window_file_truth import change_one_weight

        session, tabs = shots.window.session, shots.window.tabs
        shots.wait_for(session.exportFinished, session.start_export)
        output = session.recipe.output_path
        tabs.setCurrentWidget(tabs.graph)
        shots.pump(1.0)

        change_one_weight(output)
        shots.pump(10, lambda: session.results.opened is not None
                   and session.results.opened.reread)
        tabs.setCurrentWidget(tabs.summary)
        shots.shoot("file_changed")
        shots.wait_for(session.validationFinished, session.start_validation)
        tabs.setCurrentWidget(tabs.summary)
        shots.shoot("file_failed")

        compare = tabs.compare
        tabs.setCurrentWidget(compare)
        compare.set_files(output)
        shots.wait_for(session.analysis.finished, compare.start_profile)
        shots.shoot("profile")
        copy = shots.tmp / "copy.onnx"
        shutil.copyfile(output, copy)
        compare.set_files(output, copy)
        shots.wait_for(session.analysis.finished, compare.start_compare)
        compare.views.setCurrentWidget(compare.graphs)
        shots.pump(1.0)
        for browser in (compare.graphs.a, compare.graphs.b):
            browser.fit()
        shots.shoot("compare_self")

        tabs.setCurrentWidget(tabs.log)
        tabs.log.verticalScrollBar().setValue(0)
        shots.shoot("log", ("light",))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
