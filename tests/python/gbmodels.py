"""A tiny model, its data, and a one-process reference training that the
distributed runs must match.

Each rank starts from a model of its own seed (so DDP's start-up broadcast
matters) and trains on its own batch; with a mean loss over equal batches,
averaged gradients equal the gradient of the mean loss over the batches of all
ranks together, which is what the reference computes in one process,
starting from rank 0's model.
"""
import torch
import torch.nn as nn

IN, HID, OUT = 8, 16, 4
BATCH = 6
LR = 0.1


class Scaled(nn.Module):
    """Multiplies by a buffer (DDP broadcasts buffers from rank 0 every step)."""

    def __init__(self, n):
        super().__init__()
        self.register_buffer("scale", torch.rand(n) + 0.5)

    def forward(self, x):
        return x * self.scale


def make_model(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(IN, HID), nn.ReLU(), nn.Linear(HID, HID), nn.Tanh(),
                         nn.Linear(HID, OUT), Scaled(OUT))


def batch(step, rank):
    g = torch.Generator().manual_seed(10007 * step + rank)
    return torch.randn(BATCH, IN, generator=g), torch.randn(BATCH, OUT, generator=g)


def train_step(model, opt, x, y, grad_scale=1.0):
    opt.zero_grad(set_to_none=True)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    if grad_scale != 1.0:
        for p in model.parameters():
            p.grad.mul_(grad_scale)
    opt.step()
    return loss.detach()


def reference(steps, world, grad_scale=1.0):
    """Parameters (name -> tensor) after steps of one-process training on every rank's data."""
    model = make_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for s in range(steps):
        xs, ys = zip(*[batch(s, r) for r in range(world)])
        train_step(model, opt, torch.cat(xs), torch.cat(ys), grad_scale)
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def compare(name, got, want, rtol=1e-5, atol=1e-6):
    """None when every tensor is close, else a message naming the first that is not."""
    if set(got) != set(want):
        return "%s: parameter names differ: %s vs %s" % (name, sorted(got), sorted(want))
    for k in sorted(want):
        if got[k].shape != want[k].shape:
            return "%s: %s has shape %s, expected %s" % (name, k, tuple(got[k].shape), tuple(want[k].shape))
        if not torch.allclose(got[k], want[k], rtol=rtol, atol=atol):
            d = (got[k] - want[k]).abs().max().item()
            return "%s: %s differs by up to %.3g" % (name, k, d)
    return None


def identical(name, states):
    """None when every rank's tensors are bit-identical, else a message."""
    first = states[0]
    for r, st in enumerate(states[1:], 1):
        for k in first:
            if not torch.equal(first[k], st[k]):
                return "%s: rank %d's %s is not bit-identical to rank 0's" % (name, r, k)
    return None
