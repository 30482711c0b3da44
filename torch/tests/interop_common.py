"""What examples/libtorch's programs do, in Python: the network of net.h and the loop of
train.cc (the same batches and dropout masks from torch's RNG), for test_interop.py and
resume_in_python.py."""

import torch
import torch.nn.functional as F


class Net(torch.nn.Module):
    """examples/libtorch/net.h, in Python: the same layers in the same order."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 32, bias=False)
        self.bn = torch.nn.BatchNorm1d(32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        x = torch.relu(self.bn(self.fc1(x)))
        return self.fc2(F.dropout(x, 0.1, self.training))


TEACHER = torch.arange(32, dtype=torch.float32).reshape(8, 4).sin()  # train.cc's Teacher()


def make_optimizer(name, net):
    """train.cc's MakeOptimizer, in Python."""
    if name == "adam":
        return torch.optim.Adam(net.parameters(), lr=1e-2)
    if name == "adamw":
        return torch.optim.AdamW(net.parameters(), lr=1e-2, weight_decay=1e-2)
    return torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)


def train(net, opt, step, until):
    """train.cc's loop, in Python: the same batches and dropout masks from torch's RNG."""
    net.train()
    loss = None
    while step < until:
        x = torch.randn(64, 8)
        y = x @ TEACHER + 0.1 * torch.randn(64, 4)
        opt.zero_grad()
        loss = F.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        step += 1
    return step, loss.item()
