"""Servers have glibc map large blocks and give them back when freed
(deploy._map_large_blocks), instead of carving them from the heap once a
larger block was freed."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys

import pytest

# In a process of its own, so that the allocator's state is the script's:
# free a block large enough to raise glibc's dynamic threshold, then ask
# for a smaller large one and say whether it was mapped.
_SCRIPT = """
import ctypes, sys
from placement import deploy
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "settled":
    deploy._map_large_blocks()
freed = bytearray(8 * 1024 * 1024)  # mapped (above the initial threshold)
del freed
mapped_before = libc.mallinfo2().hblkhd
block = bytearray(1024 * 1024)
print(libc.mallinfo2().hblkhd - mapped_before >= len(block))
"""


_GLIBC = bool(ctypes.util.find_library("c")) and hasattr(ctypes.CDLL(None), "mallinfo2")


@pytest.mark.skipif(not _GLIBC, reason="glibc 2.33+ only: elsewhere _map_large_blocks does nothing")
@pytest.mark.parametrize(("mode", "mapped"), [("settled", "True"), ("default", "False")])
def test_a_large_block_is_mapped_after_a_larger_one_was_freed(mode, mapped):
    run = subprocess.run([sys.executable, "-c", _SCRIPT, mode], capture_output=True, text=True,
                         check=True)
    assert run.stdout.strip() == mapped
