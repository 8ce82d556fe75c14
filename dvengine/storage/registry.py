"""``storage_for(path)``: the one entry point every read and write of table bytes goes through.

Local paths share one stateless backend (and never import obstore). Object-store URIs get one client per (bucket, options),
cached, so connection pools are reused across commands of a process.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from dvengine.storage.base import Storage
from dvengine.storage.local import LocalStorage
from dvengine.storage.settings import options_for
from dvengine.storage.uris import is_object_uri, split_object_uri

if TYPE_CHECKING:
    from dvengine.storage.objects import ObjectStorage

_LOCAL = LocalStorage()
_lock = threading.Lock()
_stores: dict[tuple[str, tuple[tuple[str, str], ...]], ObjectStorage] = {}


def storage_for(path: str) -> Storage:
    """The backend serving ``path`` (a local path or an object URI), with the options registered for it."""
    if not is_object_uri(path):
        return _LOCAL
    base, _ = split_object_uri(path)
    options = options_for(path)
    key = (base, tuple(sorted(options.items())))
    with _lock:
        store = _stores.get(key)
        if store is None:
            from dvengine.storage.objects import ObjectStorage  # obstore loads only when a store is used (~20 ms)

            store = _stores[key] = ObjectStorage(base, options)
        return store


def request_counts() -> dict[str, int]:
    """Requests this process sent to object stores so far, by kind (LIST, GET, HEAD, PUT, DELETE)."""
    total: dict[str, int] = {}
    with _lock:
        for store in _stores.values():
            for kind, n in store.requests.items():
                total[kind] = total.get(kind, 0) + n
    return total


def request_seconds() -> dict[str, float]:
    """Seconds this process's object-store requests took so far, by kind (``PUT in background``:
    PUTs sent on a worker, which the caller waited for only in part, see ``pending.waited_seconds``)."""
    total: dict[str, float] = {}
    with _lock:
        for store in _stores.values():
            for kind, seconds in store.request_seconds.items():
                total[kind] = total.get(kind, 0.0) + seconds
    return total
