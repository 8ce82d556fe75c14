"""The replay state's tombstones as a map whose copy costs what changed, not what it holds.

The snapshot cache never mutates an entry: advancing it by a commit copies the cached replay
state and applies the commit to the copy, and so does every load that finds new commits. With
complete tombstones (kept once a checkpoint writer asked for them) that copy was a ``dict`` of
every unexpired remove: in a stream of small DML about three a round (one per DV re-add, the
files each compaction retires), so the copy grew with the job, not with the commit. Profiled over
3,000 rounds of the uniform soak (rounds 201-400 against 2,801-3,000), ``cacheable_state`` went
from 0.03 to 0.5 ms a round and the loads around it grew by 1.1 ms; with this map, 0.5 ms
(``spec_notes/auto-compaction.md``, #22).

A :class:`TombstoneMap` is an immutable ``base`` dict, shared by every copy made from it, plus
an ``overlay`` of what changed since (a value, or ``None`` for a key taken out). :meth:`copy`
shares the base and copies only the overlay; once the overlay outgrows a fraction of the base,
the copy folds it in (one C-speed dict copy), so the amortised cost per change stays constant and
a lookup never walks more than two dicts. The base is never written after it is made, so a
reader on another thread (the background checkpoint writer iterating a cached state) can never
see a half-made map; only the state's owner, before it is shared, calls the mutators.

Bulk readers (VACUUM, ``Snapshot.tombstones``) take one flattening (:func:`flat_tombstones`,
:meth:`to_dict`, which ``items()`` and ``keys()`` view) instead of a Python call per key. The
checkpoint writer, which re-encodes only what changed since its last checkpoint, asks
:func:`changed_keys` for the keys two maps of one base may disagree on, a pass over two overlays.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping

__all__ = ["TombstoneMap", "changed_keys", "flat_tombstones"]

# The overlay is folded into a copy's base past this many entries plus an eighth of the base:
# the fold then costs at most ~8 changes' worth of copying per change.
_FOLD_SLACK = 64
_FOLD_FRACTION = 8


class TombstoneMap(Mapping[str, bytes]):
    """Tombstone key text -> tombstone bytes (:mod:`dvengine.log.tombstones`), cheap to copy."""

    __slots__ = ("_base", "_len", "_overlay")

    def __init__(self, items: Mapping[str, bytes] | None = None) -> None:
        self._base: dict[str, bytes] = dict(items.items()) if items is not None else {}
        self._overlay: dict[str, bytes | None] = {}
        self._len = len(self._base)

    def __getitem__(self, key: str) -> bytes:
        if key in self._overlay:
            value = self._overlay[key]
            if value is None:
                raise KeyError(key)
            return value
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        if key in self._overlay:
            return self._overlay[key] is not None
        return key in self._base

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_dict())

    def keys(self) -> KeysView[str]:
        return self.to_dict().keys()

    def items(self) -> ItemsView[str, bytes]:
        return self.to_dict().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, TombstoneMap):
            return self.to_dict() == other.to_dict()
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dict

    def __repr__(self) -> str:
        return f"TombstoneMap({len(self)} tombstones, {len(self._overlay)} changes over a shared base)"

    def to_dict(self) -> dict[str, bytes]:
        """A new plain dict of every tombstone."""
        flat = dict(self._base)
        for key, value in self._overlay.items():
            if value is None:
                flat.pop(key, None)
            else:
                flat[key] = value
        return flat

    def copy(self) -> TombstoneMap:
        """An independent map with the same tombstones: O(changes since the base was made)."""
        out = TombstoneMap.__new__(TombstoneMap)
        if len(self._overlay) > _FOLD_SLACK + len(self._base) // _FOLD_FRACTION:
            out._base = self.to_dict()
            out._overlay = {}
        else:
            out._base = self._base  # shared: nobody writes a base after it is made
            out._overlay = dict(self._overlay)
        out._len = self._len
        return out

    def put_all(self, pairs: Mapping[str, bytes]) -> None:
        """Set every key of ``pairs`` (a commit's removes, or a checkpoint's)."""
        if not self._len and not self._overlay:  # empty: a new base (a checkpoint's, in one C-speed copy)
            self._base = dict(pairs.items())
            self._len = len(self._base)
            return
        for key, value in pairs.items():
            if key not in self:
                self._len += 1
            self._overlay[key] = value

    def discard_all(self, keys: Iterable[str]) -> None:
        """Take out each of ``keys`` that is present (a commit's adds of a tombstoned key)."""
        for key in keys:
            if key in self:
                self._len -= 1
                if key in self._base:
                    self._overlay[key] = None
                else:
                    del self._overlay[key]

    def clear(self) -> None:
        self._base = {}
        self._overlay = {}
        self._len = 0


def flat_tombstones(tombstones: Mapping[str, bytes]) -> dict[str, bytes]:
    """A new plain dict of ``tombstones``: one copy for a :class:`TombstoneMap` (``dict(m.items())``
    would flatten it and then copy the flat dict again), one for any other mapping."""
    return tombstones.to_dict() if isinstance(tombstones, TombstoneMap) else dict(tombstones.items())


def changed_keys(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> set[str] | None:
    """Every key whose value may differ between ``old`` and ``new`` (present in one only, or
    another object), found from their overlays when both are :class:`TombstoneMap` copies of one
    base: O(changes since that base) instead of a pass over every tombstone. None when they do not
    share a base (plain dicts, or a copy that folded its overlay since): compare them whole.

    Both must be immutable from here on (maps the snapshot cache handed out, or private copies).
    """
    if not isinstance(old, TombstoneMap) or not isinstance(new, TombstoneMap) or old._base is not new._base:
        return None
    return old._overlay.keys() | new._overlay.keys()
