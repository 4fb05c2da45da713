"""The service's most recently used results in memory, in front of the SQLite cache: a hit
served from here costs no database read and no JSON decoding."""

from __future__ import annotations

from collections import OrderedDict


class HotResults:
    """Key → stored blob, least recently used dropped first past `max_bytes` in all."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.size = 0
        self._blobs: OrderedDict[str, bytes] = OrderedDict()

    def get(self, key: str) -> bytes | None:
        blob = self._blobs.get(key)
        if blob is not None:
            self._blobs.move_to_end(key)
        return blob

    def put(self, key: str, blob: bytes) -> None:
        if len(blob) > self.max_bytes:
            return
        old = self._blobs.pop(key, None)
        if old is not None:
            self.size -= len(old)
        self._blobs[key] = blob
        self.size += len(blob)
        while self.size > self.max_bytes:
            _, dropped = self._blobs.popitem(last=False)
            self.size -= len(dropped)

    def __len__(self) -> int:
        return len(self._blobs)
