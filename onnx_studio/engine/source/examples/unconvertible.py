"""A model with operators no exporter converts (torch 2.13): lgamma and digamma.

Export fails with error kind `unsupported_operator`; two distinct operators so that "list every
unconvertible operator at once" has something to find. (The seeds' own examples of missing
symbolics, elu and triu, are converted by today's exporters.)
"""

from __future__ import annotations

import torch


class GammaModel(torch.nn.Module):
    """Log-likelihood terms of a Poisson-style head: lgamma(x + 1) and its derivative."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rate = x.abs() + 1
        return torch.lgamma(rate) + torch.digamma(rate)
