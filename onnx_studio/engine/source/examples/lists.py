"""Tensor lists, from the seed's "Is tensor list exportable to ONNX?" FAQ and limitations."""

from __future__ import annotations

import torch


class ListLoopModel(torch.nn.Module):
    """Lists built in a scripted loop become ONNX Sequence ops (opset 11+).

    The seed writes `res = res.append(...)`, which TorchScript rejects (append returns None);
    this is the evident intent, `res.append(...)`.
    """

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        res: list[torch.Tensor] = []
        res1: list[torch.Tensor] = []
        arr = x.split(2, 0)
        res2 = torch.zeros(3, 4, dtype=torch.long)
        for i in range(len(arr)):
            res.append(arr[i].sum(0, False))
            res1.append(arr[-1 - i].sum(0, False))
            res2 += 1
        return torch.stack(res), torch.stack(res1), res2


class AnotherModel(torch.nn.Module):
    """A split with a known number of pieces needs no tensor list (the seed's 'exportable')."""

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return [torch.squeeze(out, 0) for out in torch.split(x, [1, 1, 1], dim=0)]


class UnbindModel(torch.nn.Module):
    """x.unbind(0): 'not exportable' in the seed's day; a static split for today's exporters."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.unbind(0)
