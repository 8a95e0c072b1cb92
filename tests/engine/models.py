"""Tiny models for the tests: files written to disk the way a user would have them, and a
small net built here whose exports the graph tests browse."""

from __future__ import annotations

from pathlib import Path

TINY_NET = '''
import torch
from torch import nn


class TinyNet(nn.Module):
    def __init__(self, hidden: int = 8):
        super().__init__()
        self.fc1 = nn.Linear(4, hidden)
        self.fc2 = nn.Linear(hidden, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 6)

    def forward(self, x, y):
        h = self.body(x) + y.sum()
        return h.softmax(-1), h.mean(-1)


class Unconvertible(nn.Module):
    def forward(self, x):
        a = torch.linalg.eigvals(x).real
        q = torch.linalg.qr(x)[0]
        return a.sum() + q.sum()


class Pitfalls(nn.Module):
    def forward(self, x):
        batch, seq = x.shape[:2]
        real = seq
        real += 2
        scale = x.data.mean()
        return x * real + scale + x.sum().item()


def make_net(hidden: int = 8):
    return TinyNet(hidden)
'''


def write_models(folder: Path) -> Path:
    """Write `tiny.py` into `folder` and return its path."""
    path = folder / "tiny.py"
    path.write_text(TINY_NET)
    return path


SHAPES_NET = '''
import torch


class Shapes(torch.nn.Module):
    def forward(self, x):
        return x.reshape(-1), x.sum(0)
'''


def tiny_blocks_net():  # type: ignore[no-untyped-def]
    """A tiny transformer-like net (embed, two attention blocks, head) and an input;
    its source lines are this file's, as a user's model file would be."""
    import torch
    from torch import nn

    class Attn(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(16, 16)
            self.k = nn.Linear(16, 16)

        def forward(self, x):  # type: ignore[no-untyped-def]
            w = self.q(x) @ self.k(x).transpose(-1, -2)
            return w.softmax(-1) @ x

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(16)
            self.attn = Attn()
            self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = x + self.attn(self.norm(x))
            return x + self.mlp(x)

    class TinyNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Linear(8, 16)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(16, 4)

        def forward(self, x):  # type: ignore[no-untyped-def]
            x = self.embed(x)
            for b in self.blocks:
                x = b(x)
            # Positions and a reshape from the input's shape: shape arithmetic in a
            # dynamic export.
            x = x + torch.arange(x.shape[1]).unsqueeze(-1).to(x.dtype)
            h = self.head(x)
            return h.reshape(h.shape[0], h.shape[1] * 2, 2)

    torch.manual_seed(0)
    return TinyNet().eval(), torch.randn(2, 5, 8)


def export_graph_examples(out: Path) -> dict[str, Path]:
    """`tiny_blocks_net` exported three ways (dynamo with external data, dynamo with dynamic
    batch and sequence, TorchScript), plus the seed's scripted loop and an If, into `out`."""
    import warnings

    import torch

    model, x = tiny_blocks_net()
    paths = {"dynamo": out / "tiny_dynamo.onnx", "dynamic": out / "tiny_dynamic.onnx",
             "torchscript": out / "tiny_ts.onnx", "loop": out / "loop.onnx",
             "if": out / "cond.onnx"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), paths["dynamo"], dynamo=True, input_names=["x"],
                          output_names=["y"], external_data=True)
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("seq", min=2, max=64)
        torch.onnx.export(model, (x,), paths["dynamic"], dynamo=True, input_names=["x"],
                          output_names=["y"], dynamic_shapes=({0: batch, 1: seq},),
                          external_data=False)
        torch.onnx.export(model, (x,), paths["torchscript"], dynamo=False, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}})

        # The seed's LoopModel2: a scripted loop becomes an ONNX Loop with a body graph.
        from onnx_studio.engine.source.examples.loops import LoopModel2

        torch.onnx.export(LoopModel2(), (torch.ones(2, 3, dtype=torch.long), torch.tensor(5)),
                          paths["loop"], dynamo=False, input_names=["input_data", "loop_range"])

        @torch.jit.script
        def cond(x: torch.Tensor) -> torch.Tensor:
            if bool(x.sum() > 0):
                return x * 2
            return x - 1

        class CondModel(torch.nn.Module):
            def forward(self, x):  # type: ignore[no-untyped-def]
                return cond(x)

        torch.onnx.export(CondModel(), (torch.ones(3),), paths["if"], dynamo=False,
                          input_names=["x"])
    return paths


