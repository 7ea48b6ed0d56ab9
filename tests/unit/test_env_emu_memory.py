"""FLAGOS_EMU_MEMORY: the memory of each emulated device, a size with an optional binary unit."""

from __future__ import annotations

import pytest
import torch_fl_env as env  # registered by conftest (loaded by path)
from torch_fl_errors import ConfigError


@pytest.mark.parametrize(
    "value, size",
    [("17179869184", 16 << 30), ("16GiB", 16 << 30), ("16g", 16 << 30), (" 512 MiB ", 512 << 20), ("1.5G", 3 << 29)],
)
def test_sizes_with_and_without_units(value: str, size: int) -> None:
    assert env.read_settings({"FLAGOS_EMU_MEMORY": value}).emu_memory == size


def test_unset_means_the_host_memory() -> None:
    assert env.read_settings({}).emu_memory is None
    assert env.read_settings({"FLAGOS_EMU_MEMORY": " "}).emu_memory is None


@pytest.mark.parametrize("value", ["lots", "0", "16 PB", "-1G"])
def test_a_bad_size_names_the_variable_and_the_way_out(value: str) -> None:
    with pytest.raises(ConfigError, match=r"FLAGOS_EMU_MEMORY=.* is not a memory size; .*16GiB.*unset it"):
        env.read_settings({"FLAGOS_EMU_MEMORY": value})


def test_a_misspelling_is_caught() -> None:
    with pytest.raises(ConfigError, match="did you mean FLAGOS_EMU_MEMORY"):
        env.read_settings({"FLAGOS_EMU_MEMOR": "1G"})
