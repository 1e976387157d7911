"""PyTorch reference throughput for go-train's nets: the seed's three nets
(as in ../shared/bench/torch_seed_nets.py, imported from there when it is
beside the repo) plus the residual policy net of src/nn/resnet.rs, at any
batch size. The figure go-train's `bench train` is compared with.

Usage:
  python3 scripts/torch_nets.py DEVICE [--batch 100,1024] [--seconds 5]
                                [--net policy,playout,value,resnet-policy:10x128]
                                [--profile STEPS] [--read-every N] [--bf16]
DEVICE is cpu or cuda. Each step is forward, backward and optimizer step
(SGD momentum 0.9 for move nets, Adam for the value net), as in the seed.
The loss is read back (`loss.item()`, which waits for the GPU) every
--read-every steps: 1 by default, as a plain PyTorch loop does; go-train's
training loop and `bench train` read it every 10 (GO_TRAIN_READ_EVERY),
which on a GPU lets the host queue the next steps while the GPU works.
cuDNN's autotuner (benchmark mode) is on and TF32 is PyTorch's default for
convolutions. --bf16 runs the step under autocast to bfloat16 with the
net and its input in channels_last memory format: PyTorch's fast mixed
precision, the anchor for go-train's `--precision bf16`. With --profile, STEPS more steps
run under torch.profiler and the kernels (operators on the CPU) that took
the most device time are listed, a step's share, as scripts/kernel-times.py
lists go-train's.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "bench"))
try:
    from torch_seed_nets import Policy, Playout, Value  # the seed's nets, unchanged
except ImportError:
    sys.exit("torch_nets.py: needs ../shared/bench/torch_seed_nets.py beside the repository (or on PYTHONPATH)")


class Block(nn.Module):
    def __init__(s, f):
        super().__init__()
        s.conv1 = nn.Conv2d(f, f, 3, padding=1, bias=False)
        s.bn1 = nn.BatchNorm2d(f)
        s.conv2 = nn.Conv2d(f, f, 3, padding=1, bias=False)
        s.bn2 = nn.BatchNorm2d(f)

    def forward(s, x):
        h = F.relu(s.bn1(s.conv1(x)))
        return F.relu(s.bn2(s.conv2(h)) + x)


class ResNetPolicy(nn.Module):
    """src/nn/resnet.rs with a policy head, tensor names included."""

    def __init__(s, blocks, f):
        super().__init__()
        s.stem = nn.ModuleDict({"conv": nn.Conv2d(15, f, 3, padding=1, bias=False), "bn": nn.BatchNorm2d(f)})
        s.blocks = nn.ModuleList(Block(f) for _ in range(blocks))
        s.policy = nn.ModuleDict(
            {"conv": nn.Conv2d(f, 2, 1, bias=False), "bn": nn.BatchNorm2d(2), "fc": nn.Linear(722, 362)}
        )

    def forward(s, x):
        h = F.relu(s.stem["bn"](s.stem["conv"](x)))
        for b in s.blocks:
            h = b(h)
        h = F.relu(s.policy["bn"](s.policy["conv"](h)))
        return s.policy["fc"](h.flatten(1))


def make(name):
    if name == "policy":
        return Policy(), "sgd"
    if name == "playout":
        return Playout(), "sgd"
    if name == "value":
        return Value(), "adam"
    if name.startswith("resnet-policy:"):
        b, f = name.split(":")[1].split("x")
        return ResNetPolicy(int(b), int(f)), "sgd"
    sys.exit(f"torch_nets.py: unknown net {name!r}")


def profile(step, steps, dev):
    """Runs `steps` more steps under torch.profiler; prints where a step's time goes."""
    from torch.profiler import ProfilerActivity, profile as profiler

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev == "cuda" else [])
    with profiler(activities=activities) as prof:
        for _ in range(steps):
            step()
    rows, kernels = [], []
    for e in prof.key_averages():
        # Kernels carry device time of their own; on the CPU, operators.
        own = getattr(e, "self_device_time_total", None)
        if own is None:
            own = getattr(e, "self_cuda_time_total", 0)
        if dev != "cuda":
            own = e.self_cpu_time_total
        if own > 0:
            rows.append((own, e.count, e.key))
            # An operator (aten::…) is credited with its kernels' time too:
            # summed with them it would count it twice.
            if str(getattr(e, "device_type", "")).endswith("CUDA"):
                kernels.append(rows[-1])
    if dev == "cuda" and kernels:
        rows = kernels
    total = sum(r[0] for r in rows)
    print(f"  profile: {total / steps / 1e3:.3f} ms of {dev} time a step ({steps} steps)")
    for own, count, key in sorted(rows, reverse=True)[:25]:
        print(f"  {own / steps / 1e3:8.3f} {own / total:6.1%} {count / steps:6.1f}  {key[:110]}")


def bench(name, batch, dev, seconds, profile_steps=0, read_every=1, bf16=False):
    torch.manual_seed(0)
    net, opt_kind = make(name)
    net = net.to(dev)
    if bf16:
        net = net.to(memory_format=torch.channels_last)
    if opt_kind == "sgd":
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
        loss_fn = nn.CrossEntropyLoss()
        y = torch.randint(0, 362, (batch,), device=dev)
    else:
        opt = torch.optim.Adam(net.parameters(), lr=0.001)
        loss_fn = nn.MSELoss()
        y = torch.randint(0, 2, (batch,), device=dev).float()
    x = (torch.rand(batch, 15, 19, 19, device=dev) < 0.3).float()
    if bf16:
        x = x.contiguous(memory_format=torch.channels_last)

    def step(read=True):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
            out = net(x)
        # The loss in f32, as autocast would run it.
        loss = loss_fn(out.float(), y)
        loss.backward()
        opt.step()
        return loss.item() if read else None

    for _ in range(5):
        step()
    steps, t = 0, time.perf_counter()
    while steps < 5 or time.perf_counter() - t < seconds:
        steps += 1
        step(read=steps % read_every == 0)
    step()  # the last read waits for all the work timed
    steps += 1
    dt = time.perf_counter() - t
    reads = "" if read_every == 1 else f", loss read every {read_every} steps"
    reads += ", autocast bf16, channels_last" if bf16 else ""
    print(f"torch {name}: {steps * batch / dt:,.0f} samples/s ({dev}, batch {batch}, {steps} steps in {dt:.1f} s{reads})",
          flush=True)
    if profile_steps:
        profile(step, profile_steps, dev)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("device", choices=["cpu", "cuda"])
    ap.add_argument("--batch", default="100")
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--net", default="policy,playout,value")
    ap.add_argument("--profile", type=int, default=0, metavar="STEPS")
    ap.add_argument("--read-every", type=int, default=1, metavar="N")
    ap.add_argument("--bf16", action="store_true", help="autocast to bfloat16, channels_last")
    a = ap.parse_args()
    if a.profile < 0:
        sys.exit("torch_nets.py: --profile takes a number of steps, 0 or more")
    if a.read_every < 1:
        sys.exit("torch_nets.py: --read-every takes a number of steps, 1 or more")
    torch.backends.cudnn.benchmark = True
    for batch in [int(b) for b in a.batch.split(",")]:
        for name in a.net.split(","):
            bench(name, batch, a.device, a.seconds, a.profile, a.read_every, a.bf16)
