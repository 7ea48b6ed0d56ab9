"""The GPU node: the same build, install and test steps as the images, run with a local executor on a machine with
torch and no docker (``python -m build_tools.node MODE``; cuda_node.sh launches it). Beside it, the node programs
(``*_check.py``, ``step_ops.py``, ...) that its modes run by their paths."""
