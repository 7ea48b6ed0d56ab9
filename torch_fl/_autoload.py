"""Target of torch's device autoload (``torch.backends`` entry point).

Kept apart from the package's ``__init__`` so that ``import torch_fl`` (which
imports torch, which autoloads this) never sees itself half-initialised.
"""


def load() -> None:
    import torch_fl  # noqa: F401  (importing registers the device)
