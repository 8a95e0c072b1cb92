"""Tiny model files written to disk the way a user would have them, for export tests."""

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
