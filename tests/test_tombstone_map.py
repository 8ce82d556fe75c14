"""TombstoneMap (dvengine/log/tombstone_map.py) behaves as a dict under the replay's operations,
and its copies are independent of each other, whichever of them folds its overlay.

The model is a plain dict per map; hypothesis drives commits (removes then adds, as
``ReplayState.apply_commit`` applies them) on a family of maps made by copying each other.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from dvengine.log.tombstone_map import TombstoneMap, flat_tombstones

KEYS = st.sampled_from([f"part-{i}.parquet\x00{dv}" for i in range(40) for dv in ("", "dvA")])
COMMIT = st.tuples(
    st.dictionaries(KEYS, st.binary(min_size=1, max_size=4), max_size=30),  # removes
    st.lists(KEYS, max_size=30),  # adds
)
# (which map, what): a commit applied to it, or a copy of it appended to the family
STEP = st.tuples(st.integers(0, 7), st.one_of(COMMIT, st.just("copy"), st.just("clear")))


def _check(tm: TombstoneMap, model: dict[str, bytes]) -> None:
    assert tm.to_dict() == model and flat_tombstones(tm) == model
    assert len(tm) == len(model) and bool(tm) == bool(model)
    assert dict(tm.items()) == model and set(tm.keys()) == set(model) and set(tm) == set(model)
    for key in {f"part-{i}.parquet\x00{dv}" for i in range(40) for dv in ("", "dvA")}:
        assert (key in tm) == (key in model)
        assert tm.get(key) == model.get(key)
    assert tm == model


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=60))
def test_a_family_of_copies_each_equals_its_own_dict_model(steps: list[tuple[int, object]]) -> None:
    maps = [TombstoneMap()]
    models: list[dict[str, bytes]] = [{}]
    for which, step in steps:
        i = which % len(maps)
        if step == "copy":
            maps.append(maps[i].copy())
            models.append(dict(models[i]))
        elif step == "clear":
            maps[i].clear()
            models[i].clear()
        else:
            assert isinstance(step, tuple)
            removes, adds = step
            maps[i].put_all(removes)
            models[i].update(removes)
            maps[i].discard_all(adds)
            for key in adds:
                models[i].pop(key, None)
        for tm, model in zip(maps, models):  # a change to one never shows in another
            _check(tm, model)


def test_a_copy_shares_the_base_until_its_overlay_outgrows_it_then_folds() -> None:
    base = TombstoneMap({f"k{i}": b"x" for i in range(1000)})
    near = base.copy()
    near.put_all({"new": b"y"})
    assert near._base is base._base  # O(changes): the 1,000 base entries were not copied
    far, folded_at = near, None
    for i in range(200):  # past 64 + 1000 / 8 changes the next copy folds
        far = far.copy()
        if folded_at is None and far._base is not base._base:
            folded_at = i
            assert not far._overlay
        far.discard_all([f"k{i}"])
    assert folded_at == 189  # 1 put + 189 discards = 190 changes > 64 + 1000 // 8
    assert len(far) == 801 and "k0" not in far and far["new"] == b"y" and base["k0"] == b"x"
    assert len(base) == 1000 and "new" not in base


def test_flat_tombstones_is_a_new_dict_for_a_map_and_for_a_plain_dict() -> None:
    plain = {"a": b"1", "b": b"2"}
    tm = TombstoneMap(plain)
    tm.put_all({"c": b"3"})
    tm.discard_all(["a"])
    for source, expected in ((tm, {"b": b"2", "c": b"3"}), (plain, {"a": b"1", "b": b"2"})):
        flat = flat_tombstones(source)
        assert type(flat) is dict and flat == expected and flat is not source
        flat["z"] = b"9"  # the caller's copy: the source is untouched
        assert "z" not in source


def _whole_difference(old: dict[str, bytes], new: dict[str, bytes]) -> tuple[set[str], set[str]]:
    """The model of what a checkpoint re-encodes: keys of ``new`` whose object differs from
    ``old``'s (or that ``old`` lacks), and keys of ``old`` whose row must go."""
    encode = {k for k, v in new.items() if old.get(k) is not v}
    gone = {k for k in old if k not in new or new[k] is not old[k]}
    return encode, gone


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=60))
def test_the_overlay_difference_of_two_copies_equals_the_whole_comparison(steps: list[tuple[int, object]]) -> None:
    from dvengine.log.tombstone_map import changed_keys
    from dvengine.log.tombstone_rows import _difference

    maps = [TombstoneMap({f"part-{i}.parquet\x00": bytes([i, 7]) for i in range(20)})]
    for which, step in steps:
        i = which % len(maps)
        if step == "copy":
            maps.append(maps[i].copy())
        elif step == "clear":
            maps[i].clear()
        else:
            assert isinstance(step, tuple)
            maps[i].put_all(step[0])
            maps[i].discard_all(step[1])
    for old in maps:
        for new in maps:
            encode, gone = _difference(old, new)
            assert ({k for k, _ in encode}, set(gone)) == _whole_difference(old.to_dict(), new.to_dict())
            assert all(v is new[k] for k, v in encode)
            # the overlay path is taken whenever the two share a base (the checkpoint's saving rests on it)
            assert (changed_keys(old, new) is not None) == (old._base is new._base)


def test_maps_of_different_bases_and_plain_dicts_are_compared_whole() -> None:
    from dvengine.log.tombstone_map import changed_keys

    a = TombstoneMap({"k": b"x"})
    assert changed_keys(a, TombstoneMap({"k": b"x"})) is None
    assert changed_keys(a, {"k": b"x"}) is None and changed_keys({"k": b"x"}, a) is None
    b = a.copy()
    b.put_all({"j": b"y"})
    assert changed_keys(a, b) == {"j"}
