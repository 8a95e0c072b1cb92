"""Screenshots of the Generation section (issue 37.4), not a test: a tiny GPT-2 with
transformers' default initialisation (its greedy decoding repeats one token) exported with its
cache and validated in the window, then the Validation tab's Generation section.

    QT_QPA_PLATFORM=offscreen python tests/app/screenshots_generation.py docs/screenshots [WIDTH]

Writes window_generation_WIDTH_THEME.png at WIDTH×768 (1024 unless told), light and dark: the
teacher-forced steps' verdict (worst step, top-1 at every step), the prompt and the
continuation, the sentence that the constant greedy tokens prove little, and the step table.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.app.shot_window import shot_window


def _tiny_gpt2(folder: Path) -> Path:
    import torch
    import transformers

    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=500, n_embd=32, n_layer=2, n_head=4, n_positions=128)).save_pretrained(folder)
    return folder


def main(out_dir: Path, width: int = 1024, height: int = 768) -> int:
    with shot_window("shots_generation_", out_dir, width, height) as shots:
        window = shots.window
        session, tabs = window.session, window.tabs
        assert window.open_hf_folder(_tiny_gpt2(shots.tmp / "gpt2"))
        shots.pump(120, lambda: window.form.hf_task.task.count() > 0)
        with session.edit("options") as recipe:
            recipe.validate.enabled = True
        shots.wait_for(session.exportFinished, session.start_export, 600)
        validation = tabs.validation
        tabs.setCurrentWidget(validation)
        validation.sections.setCurrentWidget(validation.generation)
        shots.pump(1.0)
        shots.shoot("generation")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), *(int(a) for a in sys.argv[2:3])))
