"""Forward of resnet18 (train mode) module by module on flagos and on plain cuda in one process (no autograd, so
both devices can run here). Run it with FLAGOS_OP_<op>=native overrides to find which route changes a result,
e.g. FLAGOS_OP_mean__dim=native."""

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

            def keep(m, i, o, name=name, seen=seen) -> None:  # returns None: the module's output stays as it is
                seen.setdefault(name, o.detach().cpu())

            mod.register_forward_hook(keep)
    with torch.no_grad():
        model(x.to(dev))
for name, want in outs["cuda"].items():
    got = outs["flagos"][name]
    diff = float((got - want).abs().max())
    print(f"{name:24s} {tuple(want.shape)} max abs diff {diff:.2e}")
    if diff > 1e-2:
        break
