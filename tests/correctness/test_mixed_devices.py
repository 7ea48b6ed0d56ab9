"""Host tensors beside flagos tensors: refused where CUDA refuses them, accepted where CUDA accepts them.

CUDA's rules are the reference. A host tensor with dimensions cannot join device tensors, also inside a tensor
list (cat, stack, the _foreach_ ops) or as an out= or in-place target; a 0-dim host tensor can, as an input read
as a scalar (TensorIterator's CPU scalars), and index tensors of advanced indexing may stay on the host (torch
moves them to the indexed tensor's device), except for the kernels that want every tensor on their device
(csrc/dispatch/host_scalars.cpp). On a GPU the vendor's kernels refuse on their own; under emulation
the router does, with one message that names the op, the argument and the way out.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import torch_fl

EMULATION = torch_fl.accelerator() == "cpu"


def flagos(*shape: int) -> torch.Tensor:
    return torch.arange(1.0, 1.0 + torch.Size(shape).numel()).reshape(shape).to("flagos")


def host(*shape: int) -> torch.Tensor:
    return torch.full(shape, 2.0)


# (label, call, the op the router names, the argument it names)
REFUSED: list[tuple[str, Callable[[], object], str, str]] = [
    ("cat", lambda: torch.cat([flagos(3), host(3)]), "cat", "'tensors[1]'"),
    ("cat, host first", lambda: torch.cat([host(3), flagos(3)]), "cat", "'tensors[0]'"),
    ("stack", lambda: torch.stack([flagos(3), host(3)]), "cat", "'tensors[1]'"),
    (
        "foreach",
        lambda: torch._foreach_add([flagos(3), flagos(2)], [flagos(3), host(2)]),
        "_foreach_add.List",
        "'other[1]'",
    ),
    ("foreach in-place", lambda: torch._foreach_mul_([flagos(3)], [host(3)]), "_foreach_mul_.List", "'other[0]'"),
    ("out=", lambda: torch.add(flagos(3), flagos(3), out=host(3)), "add.out", "'out' of shape [3], which the op"),
    ("out= 0-dim", lambda: torch.mul(flagos(), flagos(), out=host()), "mul.out", "'out' of shape [], which the op"),
    ("in-place on a host scalar", lambda: host().add_(flagos()), "add_.Tensor", "'self' of shape []"),
    ("binary", lambda: flagos(3) + host(3), "add.Tensor", "'other'"),
    ("mm", lambda: torch.mm(flagos(2, 2), host(2, 2)), "mm", "'mat2'"),
    ("index_select", lambda: flagos(4).index_select(0, torch.tensor([0, 2])), "index_select", "'index'"),
    ("gather", lambda: torch.gather(flagos(4), 0, torch.tensor([1, 3])), "gather", "'index'"),
    ("scatter", lambda: flagos(4).scatter(0, torch.tensor([1, 3]), flagos(2)), "scatter.src", "'index'"),
    ("index_put_ values", lambda: flagos(4).index_put_((torch.tensor([1]),), host(1)), "_index_put_impl_", "'values'"),
    (
        "out= of torch's generic out variant",
        lambda: torch.addr(flagos(2, 3), flagos(2), flagos(3), out=host(2, 3)),
        "addr.out",
        "'out'",
    ),
    # 0-dim host tensors where CUDA's kernel wants every tensor on its device
    (
        "index_select with a 0-dim host index",
        lambda: flagos(4).index_select(0, torch.tensor(1)),
        "index_select",
        "'index' of shape []",
    ),
    (
        "masked_fill with a 0-dim host mask",
        lambda: flagos(4).masked_fill(torch.tensor(True), 0.0),
        "masked_fill_.Scalar",
        "'mask' of shape []",
    ),
    # found by the H200's comparison over OpInfo samples (build_tools/node/mixed_device_check.py)
    ("clamp_max with a 0-dim host bound", lambda: torch.clamp_max(flagos(4), host()), "clamp_max.Tensor", "'max'"),
    ("clamp_min of a 0-dim host input", lambda: torch.clamp_min(host(), flagos(4)), "clamp_min.Tensor", "'self'"),
    ("igamma", lambda: torch.igamma(flagos(4), host()), "igamma", "'other'"),
    ("logaddexp", lambda: torch.logaddexp(host(), flagos(4)), "logaddexp", "'self'"),
    ("nextafter", lambda: torch.nextafter(flagos(4), host()), "nextafter", "'other'"),
    ("mse_loss", lambda: torch.nn.functional.mse_loss(flagos(), host()), "mse_loss", "'target'"),
    ("smooth_l1_loss", lambda: torch.nn.functional.smooth_l1_loss(host(), flagos()), "smooth_l1_loss", "'self'"),
    ("normal with a 0-dim host std", lambda: torch.normal(flagos(4), host()), "normal.Tensor_Tensor", "'std'"),
]


@pytest.mark.parametrize("label, call, op, argument", REFUSED, ids=[case[0] for case in REFUSED])
def test_host_tensor_refused_as_on_cuda(label, call, op, argument) -> None:
    with pytest.raises(RuntimeError) as info:
        call()
    if EMULATION:  # on a GPU the vendor's own kernel words it
        message = str(info.value)
        assert "Expected all tensors to be on the same device" in message and "flagos:0 and cpu" in message, message
        assert f"when running {op} on the flagos device" in message, message
        assert f"move the host tensor {argument}" in message and ".to('flagos')" in message, message


def scalar() -> torch.Tensor:
    return torch.tensor(3.0)


# (label, call): each is computed on flagos and with every flagos tensor made a host tensor
ACCEPTED: list[tuple[str, Callable[[Callable[..., torch.Tensor]], object]]] = [
    ("binary with a 0-dim host tensor", lambda dev: dev(3) - scalar()),
    ("0-dim host tensor first", lambda dev: torch.sub(scalar(), dev(3))),
    ("where with a 0-dim host tensor", lambda dev: torch.where(dev(4) > 2, dev(4), scalar())),
    ("foreach with a 0-dim host tensor", lambda dev: torch._foreach_add([dev(3), dev(2)], [scalar(), scalar()])),
    ("foreach with a host scalar tensor", lambda dev: torch._foreach_mul([dev(3)], scalar())),
    ("index with a host index", lambda dev: dev(4, 2)[torch.tensor([3, 0])]),
    ("index with a host mask", lambda dev: dev(4)[torch.tensor([True, False, True, False])]),
    ("index_put_ with host indices", lambda dev: dev(4).index_put_((torch.tensor([1, 2]),), dev(2), accumulate=True)),
    ("index_put_ with a 0-dim host value", lambda dev: dev(4).index_put_((torch.tensor([0]),), scalar())),
    ("masked_fill with a 0-dim host value", lambda dev: dev(4).masked_fill(dev(4) > 2, scalar())),
    ("copy from the host", lambda dev: dev(3).copy_(host(3))),
]


@pytest.mark.parametrize("label, call", ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_host_scalars_and_indices_accepted_as_on_cuda(label, call, assert_same) -> None:
    assert_same(call(flagos), call(lambda *shape: flagos(*shape).cpu()))


def test_copies_to_the_host_stay_on_the_host() -> None:
    target = host(3)
    target.copy_(flagos(3))
    assert target.device.type == "cpu" and target.tolist() == [1.0, 2.0, 3.0]
    assert flagos(3).to("cpu").device.type == "cpu"
