"""Forward of resnet18 (train mode) module by module on flagos and on plain cuda in one process (no autograd)."""
import copy

import torch
import torchvision

import torch_fl  # noqa: F401

torch.manual_seed(0)
cpu = torchvision.models.resnet18(num_classes=10)
x = torch.randn(4, 3, 64, 64)
outs = {}
for dev in ("cuda", "flagos"):
    model = copy.deepcopy(cpu).to(dev)
    seen = outs[dev] = {}
    for name, mod in model.named_modules():
        if name:
            mod.register_forward_hook(lambda m, i, o, name=name, seen=seen: seen.setdefault(name, o.detach().cpu()))
    with torch.no_grad():
        model(x.to(dev))
for name, want in outs["cuda"].items():
    got = outs["flagos"][name]
    diff = float((got - want).abs().max())
    print(f"{name:24s} {tuple(want.shape)} max abs diff {diff:.2e}")
    if diff > 1e-2:
        break
