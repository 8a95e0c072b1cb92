"""A tiny image classifier written the way users write models: the app's default example."""

import torch
from torch import nn


class TinyCNN(nn.Module):
    """Two conv blocks and a linear head; any image size of 8x8 or more."""

    def __init__(self, num_classes: int = 10, width: int = 8) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, width, kernel_size=3, padding=1),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(width, width * 2, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(width * 2, num_classes)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(image), 1))


def tiny_cnn(num_classes: int = 10) -> nn.Module:
    """Factory form of TinyCNN, for recipes that name a function."""
    return TinyCNN(num_classes=num_classes)
