"""The one shared-memory lifecycle (fedanon.kit.shm) that the engine's and the helper's workers use."""

import pytest

from fedanon.kit.shm import SharedMemory, attached, create_block, release


def test_reader_sees_the_creators_bytes_and_release_removes_the_block():
    block = create_block(0)  # a zero-size request still gives a usable block
    assert block.size >= 1
    release(block)
    block = create_block(5)
    block.buf[:5] = b"hello"
    with attached(block.name) as reader:
        assert bytes(reader.buf[:5]) == b"hello"
    assert reader.buf is None  # the reader's mapping is closed after the block
    release(block)
    release(block)  # idempotent: already removed
    with pytest.raises(FileNotFoundError):
        SharedMemory(name=block.name)
