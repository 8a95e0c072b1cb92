"""The generation check of a Hugging Face export: the files' step loop against PyTorch.

`validation.generation` (onnx_studio.engine.protocol.Generation) as a verdict and a table, one row
per step. What decides is the teacher-forced step check (`continuation`): the prompt, then a fixed
random continuation fed step by step, each step's logits against one eager forward over the whole
sequence; the verdict names the worst step, whether the top-1 token agreed at every step and the
first failing step, whose row is selected (else the worst step's). The greedy tokens (ONNX and
PyTorch, teacher-forced on generate's own tokens) are a second view in the same rows (a token
cell holds one token when both sides agree, "ONNX ≠ PyTorch" when not); the verdict
shows the prompt and says when every greedy token is the same one (equal tokens then prove
little). A validation from before the step check shows the greedy view alone.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from onnx_studio.app.validation.common import (
    add_row,
    is_dark,
    make_table,
    number,
    paint_verdict,
    verdict_color,
)
from onnx_studio.engine.protocol import Continuation, Generation

__all__ = ["HEADERS", "GenerationPanel", "first_difference"]

# the step check's columns, then the greedy view's; a token cell is one token when both sides
# agree, "ONNX ≠ PyTorch" when not (the columns fit beside the form at 1024 pixels)
HEADERS = ["Step", "Result", "Cache", "Max abs diff", "Top-1", "Greedy token"]
_TIPS = {"Cache": "The cache length the files were fed at this step",
         "Max abs diff": "The largest |ONNX − PyTorch| of this step's next-token logits",
         "Top-1": "The token each side's logits rank first (ONNX ≠ PyTorch where they differ)",
         "Greedy token": "The greedy view: ONNX Runtime's argmax and generate's token, both "
                         "fed generate's tokens (ONNX ≠ PyTorch where they differ)"}


def first_difference(onnx: list[int], torch: list[int]) -> int | None:
    """The first step (0-based) where the two token lists differ, a missing token included;
    None when they are equal."""
    for step in range(max(len(onnx), len(torch))):
        if step >= len(onnx) or step >= len(torch) or onnx[step] != torch[step]:
            return step
    return None


class GenerationPanel(QWidget):
    """The teacher-forced steps and the greedy tokens of a generation check, step by step."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.verdict = QLabel()
        self.verdict.setTextFormat(Qt.TextFormat.RichText)
        self.verdict.setWordWrap(True)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = make_table(HEADERS, stretch=None)
        self.table.header().setStretchLastSection(False)  # each token beside its step
        header = self.table.headerItem()
        for column, name in enumerate(HEADERS):
            header.setToolTip(column, _TIPS.get(name, ""))
        layout = QVBoxLayout(self)
        layout.addWidget(self.verdict)
        layout.addWidget(self.table, 1)
        self.differs_at: int | None = None  # the greedy view's first differing step (0-based)
        self.selected_step: int | None = None  # the step row selected (1-based)

    def set_generation(self, generation: Generation | None) -> None:
        """Show one `validation.generation` object (None: there was no generation check)."""
        self.table.clear()
        self.differs_at = self.selected_step = None
        if generation is None:
            self.verdict.setText("No generation check: the task does not generate.")
            return
        dark = is_dark(self)
        onnx, torch = generation.onnx_tokens, generation.torch_tokens
        self.differs_at = first_difference(onnx, torch)
        steps = generation.continuation
        lines = [] if steps is None else [_steps_sentence(steps, dark)]
        lines.append(self._greedy_sentence(generation, dark, second=steps is not None))
        if generation.prompt_tokens:
            lines.append(f"Prompt: tokens {', '.join(map(str, generation.prompt_tokens))}"
                         + ("" if steps is None else
                            f"; continuation (seed {steps.seed}): "
                            f"{', '.join(map(str, steps.tokens))}") + ".")
        elif steps is not None:
            lines.append("Prompt: the encoder's inputs, then the decoder's start token; "
                         f"continuation (seed {steps.seed}): "
                         f"{', '.join(map(str, steps.tokens))}.")
        if len(torch) > 1 and len(set(torch)) == 1:  # a random-weight model repeats one token
            lines.append(f"⚠ All {len(torch)} greedy tokens are the same token ({torch[0]}): "
                         "equal tokens prove little here (a model that repeats one token "
                         "matches any file that does); "
                         + ("the steps on a random continuation decide."
                            if steps is not None else
                            f"the logits compared at each step (max abs diff "
                            f"{number(generation.max_abs_diff)}) are what checks it."))
        self.verdict.setText("<br>".join(lines))
        self._fill(generation, dark)

    def _greedy_sentence(self, generation: Generation, dark: bool, second: bool) -> str:
        """The greedy view in one sentence (bold and coloured when it is the only view)."""
        onnx, steps = generation.onnx_tokens, generation.steps
        equal = generation.tokens_equal and self.differs_at is None
        if equal:
            text = f"✔ Tokens equal over {steps} greedy steps"
            if generation.greedy_passed is False:  # the logits beyond the tolerance
                text = f"✘ Tokens equal over {steps} greedy steps, their logits not"
        elif not onnx and generation.message:  # no step ran (ONNX Runtime could not)
            text = ("✘ No greedy step ran either" if second
                    else f"✘ {html.escape(generation.message)}")
        else:
            where = f"step {self.differs_at + 1}" if self.differs_at is not None else "a step"
            text = f"✘ Tokens differ from {where} of {steps}"
        if second:
            return (f"Greedy view: {text[2:]} (ONNX Runtime's argmax against transformers' "
                    "generate).")
        return (f"<b style='color:{verdict_color(equal, dark)}'>{text}</b> — a greedy loop over "
                "the ONNX files against transformers' generate on the same prompt.")

    def _fill(self, generation: Generation, dark: bool) -> None:
        onnx, torch = generation.onnx_tokens, generation.torch_tokens
        steps = generation.continuation.steps if generation.continuation else []
        chosen = _chosen_step(generation.continuation)
        for index in range(max(len(steps), len(onnx), len(torch))):
            step = steps[index] if index < len(steps) else None
            greedy = _pair(onnx[index] if index < len(onnx) else None,
                           torch[index] if index < len(torch) else None)
            cells = [str(index + 1), "" if step is None else "ok" if step.passed else "FAILED",
                     "—" if step is None or step.past is None else str(step.past),
                     number(None if step is None else step.max_abs_diff),
                     "—" if step is None else _pair(step.onnx_top1, step.torch_top1), greedy]
            tip = "" if step is None else (
                f"Step {step.step}: predicted from position {step.position}; max abs diff "
                f"{number(step.max_abs_diff)}, max rel diff {number(step.max_rel_diff)}; "
                f"top-1 {step.onnx_top1} (ONNX), {step.torch_top1} (PyTorch)")
            item = add_row(self.table, cells, tooltip=tip)
            if step is not None:
                paint_verdict(item, 1, step.passed, dark)
                if step.onnx_top1 != step.torch_top1:
                    paint_verdict(item, 4, False, dark, whole_row=False)
            if index == self.differs_at:
                paint_verdict(item, 5, False, dark, whole_row=step is None)
            if index + 1 == (chosen or (None if self.differs_at is None
                                        else self.differs_at + 1)):
                self.table.setCurrentItem(item)
                self.selected_step = index + 1


def _pair(onnx: int | None, torch: int | None) -> str:
    """A token cell: the token when both sides agree, else "ONNX ≠ PyTorch" ("—": none)."""
    if onnx is not None and onnx == torch:
        return str(onnx)
    return f"{'—' if onnx is None else onnx} ≠ {'—' if torch is None else torch}"


def _chosen_step(steps: Continuation | None) -> int | None:
    """The step row to select: the first failing step, else the worst (1-based)."""
    if steps is None:
        return None
    return steps.first_failing_step or steps.worst_step


def _steps_sentence(steps: Continuation, dark: bool) -> str:
    """The teacher-forced step check's verdict, bold and coloured, then its facts."""
    count = len(steps.steps)
    worst = steps.steps[steps.worst_step - 1] if steps.worst_step else None
    if steps.passed:
        head = f"✔ Every step agrees: {count} steps teacher-forced on a random continuation"
    elif not steps.steps:  # no step ran
        head = f"✘ {steps.message or 'No step ran.'}"
    else:
        head = f"✘ The steps differ from step {steps.first_failing_step} of {count}"
    facts = []
    if worst is not None:
        facts.append(f"worst step {worst.step} (max abs diff {number(worst.max_abs_diff)})")
    if steps.steps:
        agreed = sum(1 for s in steps.steps if s.onnx_top1 == s.torch_top1)
        facts.append("top-1 the same at every step" if steps.top1_agreed_every_step else
                     f"top-1 the same at {agreed} of {count} steps")
    cache = "the cache fed back" if steps.with_past else "no cache"
    return (f"<b style='color:{verdict_color(steps.passed, dark)}'>{html.escape(head)}</b>"
            + (f" — {'; '.join(facts)}" if facts else "")
            + f". ONNX Runtime step by step ({cache}) against one PyTorch forward over the "
            "whole sequence.")
