"""A small training loop that never mentions fqntrace: the compatibility tier runs it with
FQNTRACE set in the compat venv and validates the trace (scripts/compat.sh)."""

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(self.norm(x))))


class Net(nn.Module):
    def __init__(self, dim=32, depth=2):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, 1)

    def forward(self, x):
        return self.head(self.blocks(x))


torch.manual_seed(0)
net = Net()
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
for _ in range(4):
    loss = net(torch.randn(16, 32)).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
print(f"loss {loss.item():.6f}")
