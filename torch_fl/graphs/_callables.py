"""``make_graphed_callables``: a callable's forward and backward captured as two flagos graphs, as torch.cuda's.

Each call copies its tensor arguments into the static inputs (the sample arguments), replays the forward graph and
returns its outputs; backward copies the incoming gradients into static gradient buffers and replays the backward
graph. A module's parameters are static inputs too, so their gradients reach ``.grad`` through autograd as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from .. import _device
from ._graph import FlagosGraph, graph, graph_pool_handle


def make_graphed_callables(
    callables: Any,
    sample_args: Any,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: tuple[int, int] | None = None,
) -> Any:
    """Graphed versions of ``callables`` (a callable or ``nn.Module``, or a tuple of them with a tuple of argument
    tuples), each run ``num_warmup_iters`` times eagerly first. All graphs share ``pool`` (a new one by default)."""
    single = not isinstance(callables, tuple)
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(f"{len(callables)} callables but {len(sample_args)} argument tuples")
    if torch.is_autocast_enabled("flagos") and torch.is_autocast_cache_enabled():
        raise RuntimeError(
            "make_graphed_callables under autocast needs torch.autocast('flagos', cache_enabled=False): the cast "
            "cache would hand the graphs casts made outside them"
        )
    pool = graph_pool_handle() if pool is None else pool
    graphed = [_Graphed(fn, tuple(args), allow_unused_input) for fn, args in zip(callables, sample_args, strict=True)]
    for g in graphed:
        g.warm_up(num_warmup_iters)
    for g in graphed:  # forwards in call order, backwards in reverse, as they run in a step
        g.capture_forward(pool)
    for g in reversed(graphed):
        g.capture_backward(pool)
    results = tuple(g.wrap() for g in graphed)
    return results[0] if single else results


class _Graphed:
    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], allow_unused: bool) -> None:
        self.fn = fn
        self.args = args
        self.allow_unused = allow_unused
        self.module = fn if isinstance(fn, torch.nn.Module) else None
        if self.module is not None and (self.module._forward_hooks or self.module._forward_pre_hooks):
            raise ValueError(f"{type(fn).__name__} has forward hooks; graphs would capture them once, remove them")
        flat = [a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)]
        params = list(self.module.parameters()) if self.module is not None else []
        for t in flat + params:
            if t.device.type != "flagos":
                raise ValueError(f"make_graphed_callables: a {t.device} tensor among the inputs; all must be flagos")
        self.static_inputs = flat + params
        self.training = self.module.training if self.module is not None else None
        self.fwd = FlagosGraph()
        self.bwd = FlagosGraph()

    def _grad_step(self, outputs: list[torch.Tensor], grad_outputs: list[torch.Tensor]) -> tuple[Any, ...]:
        wanted = [o for o in outputs if o.requires_grad]
        inputs = [t for t in self.static_inputs if t.requires_grad]
        if not wanted or not inputs:
            return ()
        return torch.autograd.grad(
            wanted, inputs, grad_outputs=grad_outputs, only_inputs=True, allow_unused=self.allow_unused
        )

    def warm_up(self, iters: int) -> None:
        side = _device.Stream()
        side.wait_stream(_device.current_stream())  # the sample arguments were made on the current stream
        with _device.stream(side):
            for _ in range(iters):
                outs = [o for o in tree_flatten(self.fn(*self.args))[0] if isinstance(o, torch.Tensor)]
                self._grad_step(outs, [torch.ones_like(o) for o in outs if o.requires_grad])
        _device.synchronize()

    def capture_forward(self, pool: tuple[int, int]) -> None:
        with graph(self.fwd, pool=pool):
            out = self.fn(*self.args)
        flat, self.spec = tree_flatten(out)
        self.static_outputs = flat

    def capture_backward(self, pool: tuple[int, int]) -> None:
        tensors = [o for o in self.static_outputs if isinstance(o, torch.Tensor)]
        self.static_grad_outputs = [torch.empty_like(o) if o.requires_grad else None for o in tensors]
        with graph(self.bwd, pool=pool):
            grads = self._grad_step(tensors, [g for g in self.static_grad_outputs if g is not None])
        grads_iter = iter(grads)
        self.static_grad_inputs = [next(grads_iter) if t.requires_grad else None for t in self.static_inputs]

    def wrap(self) -> Callable[..., Any]:
        me = self

        class Function(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
                for static, new in zip(me.static_inputs, inputs, strict=True):
                    if static.data_ptr() != new.data_ptr():
                        static.copy_(new)
                me.fwd.replay()
                return tuple(o.detach() for o in me.static_outputs if isinstance(o, torch.Tensor))

            @staticmethod
            @torch.autograd.function.once_differentiable
            def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
                for static, new in zip(me.static_grad_outputs, grads, strict=True):
                    if static is not None and new is not None and static.data_ptr() != new.data_ptr():
                        static.copy_(new)
                me.bwd.replay()
                # Held here too, so AccumulateGrad sees a shared tensor and copies it instead of stealing it:
                # a stolen .grad would be the graph's buffer, which the next replay overwrites.
                me.returned_grads = tuple(g.detach() if g is not None else None for g in me.static_grad_inputs)
                return me.returned_grads

        def graphed(*args: Any) -> Any:
            flat = [a for a in tree_flatten(args)[0] if isinstance(a, torch.Tensor)]
            outs = iter(Function.apply(*flat, *me.static_inputs[len(flat) :]))
            return tree_unflatten(
                [next(outs) if isinstance(o, torch.Tensor) else o for o in me.static_outputs], me.spec
            )

        if me.module is None:
            return graphed
        module, eager_forward = me.module, me.module.forward

        def forward(*args: Any) -> Any:
            return graphed(*args) if module.training == me.training else eager_forward(*args)

        module.forward = forward  # type: ignore[method-assign]
        return module
