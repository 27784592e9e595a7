"""STAND-IN of DF-Arena's ``backbone.py``: the release's front end, a small head.

As the release: ``Wav2Vec2Model(Wav2Vec2Config.from_pretrained("facebook/wav2vec2-xls-r-1b"))``
(the config resolved by name through the Hugging Face cache, offline in a pod), every
layer's hidden states attention-pooled and gated per layer, summed, batch-normalised and
SELU'd. In place of the release's 4-block Conformer: a class token, one linear mixing
layer and the final 2-way linear classifier. ``forward(x)`` takes the 1-D waveform the
feature extractor returns (``x.unsqueeze(0)``, as the release) and returns the logits.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import Wav2Vec2Config, Wav2Vec2Model


class StandInHead(nn.Module):
    """Class token → linear mixing → 2-way classifier (the Conformer's place)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.mix = nn.Linear(dim, dim)
        self.fc5 = nn.Linear(dim, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1)
        x = torch.tanh(self.mix(x)).mean(dim=1) + x[:, 0]
        return self.fc5(x)


class DF_Arena_1B(nn.Module):  # the release's class name
    def __init__(self) -> None:
        super().__init__()
        self.ssl_model = Wav2Vec2Model(Wav2Vec2Config.from_pretrained("facebook/wav2vec2-xls-r-1b"))
        self.ssl_model.config.output_hidden_states = True
        dim = int(self.ssl_model.config.hidden_size)
        self.first_bn = nn.BatchNorm2d(num_features=1)
        self.selu = nn.SELU(inplace=True)
        self.fc0 = nn.Linear(dim, 1)
        self.sig = nn.Sigmoid()
        self.attn_scores = nn.Linear(dim, 1, bias=False)
        self.head = StandInHead(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = self.ssl_model(x.unsqueeze(0)).hidden_states  # each (B, T, D)
        pooled = torch.cat([(torch.softmax(self.attn_scores(h), dim=1) * h).sum(1, keepdim=True)
                            for h in hidden], dim=1)  # (B, L, D)
        gate = self.sig(self.fc0(pooled)).unsqueeze(-1)  # (B, L, 1, 1)
        full = (torch.stack(hidden, dim=1) * gate).sum(1).unsqueeze(1)  # (B, 1, T, D)
        return self.head(self.selu(self.first_bn(full)).squeeze(1))
