"""Lightning: Trainer.fit for a few steps on CPU."""

import os

import lightning as L
import torch
from _common import final_pass, show
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class Module(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, _):
        x, y = batch
        return nn.functional.mse_loss(self(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 8), torch.randn(32, 1))
module = Module()
trainer = L.Trainer(
    max_steps=4,
    accelerator="cpu",
    devices=1,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    default_root_dir=os.environ.get("TMPDIR", "/tmp"),
)
trainer.fit(module, DataLoader(data, batch_size=8))
x, y = data[:8]
loss = final_pass(module, lambda: nn.functional.mse_loss(module(x), y))
loss.backward()
show("loss", loss)
