"""A one-rank program that ends as soon as Gloo's worker thread has written its last collective's result.

The worker thread drops its reference to the work just after that, and the main thread keeps the GIL from the
collective on (a long switch interval, no blocking call) and heads straight for exit. Were it the worker that
dropped the last reference, it would be waiting for the GIL for the tensors Python holds as the interpreter
finalises, and the process would abort at exit (test_exit.py). Argument: the device of the tensors, cpu or flagos.
"""

import sys

import torch
import torch.distributed as dist

import torch_fl  # noqa: F401

device = sys.argv[1]
dist.init_process_group(store=dist.HashStore(), rank=0, world_size=1)
source, gathered = torch.ones(1, device=device), torch.zeros(1, device=device)
gathered.untyped_storage()  # a storage with a Python object, as FSDP2's buffers have
sys.setswitchinterval(1000.0)  # a thread waiting for the GIL never asks the main thread to yield it
dist.all_gather_into_tensor(gathered, source, async_op=True)  # the work is dropped here: only Gloo holds it
while gathered[0].item() == 0:  # written by the worker thread, which then lets go of the work
    pass
print(f"gathered on {device}")
