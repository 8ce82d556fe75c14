"""Z85 against the ZeroMQ test vector, Delta's padding rule, and a naive reference codec."""

from __future__ import annotations

import random
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvengine.dv.z85 import ALPHABET, z85_decode, z85_encode
from dvengine.errors import DeletionVectorError


def _reference_encode(data: bytes) -> str:
    """Straight from the ZeroMQ RFC 32 pseudo-code, plus Delta's zero padding."""
    data = data + b"\x00" * ((-len(data)) % 4)
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        chunk = []
        for _ in range(5):
            value, digit = divmod(value, 85)
            chunk.append(ALPHABET[digit])
        out.extend(reversed(chunk))
    return "".join(out)


def test_zeromq_test_vector() -> None:
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld") == raw


def test_alphabet_is_the_zeromq_one() -> None:
    assert len(ALPHABET) == 85 and len(set(ALPHABET)) == 85
    assert z85_encode(b"\x00\x00\x00\x00") == "00000"
    assert z85_encode(b"\xff\xff\xff\xff") == "%nSc0"  # 2**32 - 1 = 82*85**4 + ...


def test_golden_uuid_round_trip() -> None:
    # basic-dv-no-checkpoint: pathOrInlineDv "IjB3V2d3#qUP%s94R0WF" names deletion_vector_899cef78-....bin
    file_uuid = uuid.UUID("899cef78-06b3-4c14-b024-03860e62cd40")
    assert z85_encode(file_uuid.bytes) == "IjB3V2d3#qUP%s94R0WF"
    assert uuid.UUID(bytes=z85_decode("IjB3V2d3#qUP%s94R0WF")) == file_uuid


@pytest.mark.parametrize("n", range(41))
def test_every_length_pads_and_truncates(n: int) -> None:
    data = bytes((i * 37 + 11) % 256 for i in range(n))
    text = z85_encode(data)
    assert len(text) == -(-n // 4) * 5
    assert text == _reference_encode(data)
    assert z85_decode(text, n) == data
    # Without a size the zero padding is visible, and only zeros were added.
    padded = z85_decode(text)
    assert padded[:n] == data and set(padded[n:]) <= {0} and len(padded) % 4 == 0


@given(st.binary(max_size=300))
def test_round_trip_random(data: bytes) -> None:
    text = z85_encode(data)
    assert text == _reference_encode(data)
    assert z85_decode(text, len(data)) == data


@pytest.mark.parametrize(
    "text",
    ["Hell", "HelloWorl", "Hello Worl", 'Hel"o', "Hel~o", "Helé0", "#####"],
)
def test_bad_text_raises(text: str) -> None:
    # bad length, chars outside the alphabet (space, quote, tilde, non-ASCII) and a group above 2**32-1
    with pytest.raises(DeletionVectorError):
        z85_decode(text)


def test_group_overflow_raises() -> None:
    with pytest.raises(DeletionVectorError, match="above 2\\*\\*32"):
        z85_decode("#####")


@pytest.mark.parametrize("size", [-1, 3, 9, 11])
def test_size_not_matching_text_raises(size: int) -> None:
    # "HelloWorld" holds 8 bytes: any size needing other than 2 groups is inconsistent
    with pytest.raises(DeletionVectorError):
        z85_decode("HelloWorld", size)


@pytest.mark.parametrize("size", [5, 6, 7, 8])
def test_size_within_last_group_accepted(size: int) -> None:
    assert len(z85_decode("HelloWorld", size)) == size


@given(st.binary(max_size=400))
def test_short_and_long_texts_decode_alike(data: bytes) -> None:
    # Texts up to 120 characters take a plain-Python path, longer ones the numpy one: decoding
    # the same bytes repeated past the threshold must give the same prefix.
    text = _reference_encode(data)
    assert z85_decode(text, len(data)) == data
    longer = data + b"\x00" * ((-len(data)) % 4)
    long_text = _reference_encode(longer * 60)
    assert z85_decode(long_text)[: len(longer)] == longer


@pytest.mark.parametrize(("text", "message"), [
    ("0000000000Hel\"o", "outside the Z85 alphabet: '\"' at position 13"),
    ("00000#####", "group '#####' at position 5"),
    ("Helé0", "non-ASCII"),
])
def test_short_bad_text_names_the_position(text: str, message: str) -> None:
    with pytest.raises(DeletionVectorError, match=message.replace("*", "\\*")):
        z85_decode(text)


def _reference_decode(text: str) -> bytes | None:
    """ZeroMQ RFC 32 decoding; None where the text is not valid Z85 (a group above 2**32 - 1)."""
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for char in text[i : i + 5]:
            value = value * 85 + ALPHABET.index(char)
        if value > 0xFFFFFFFF:
            return None
        out += value.to_bytes(4, "big")
    return bytes(out)


@given(st.text(alphabet=ALPHABET, min_size=125, max_size=700).map(lambda t: t[: len(t) // 5 * 5]))
def test_long_texts_of_any_alphabet_characters_decode_as_the_reference(text: str) -> None:
    # Past 120 characters a plainly valid text takes the translate + dot-product path; one with a
    # group that could overflow (first digit >= 82) takes the checked path, which raises for a
    # group above 2**32 - 1. Either way the answer is the reference's.
    want = _reference_decode(text)
    if want is None:
        with pytest.raises(DeletionVectorError, match="above 2\\*\\*32"):
            z85_decode(text)
    else:
        assert z85_decode(text) == want


@given(st.binary(min_size=100, max_size=2000), st.integers(min_value=0, max_value=3))
def test_long_texts_with_top_words_round_trip(data: bytes, pad: int) -> None:
    # Words of 0xFF.. bytes encode with a first digit >= 82 (the checked path); the rest do not.
    data = b"\xff" * (4 * pad) + data
    text = z85_encode(data)
    assert text == _reference_encode(data)
    assert z85_decode(text, len(data)) == data


@pytest.mark.parametrize(("text", "message"), [
    ("0" * 125 + "Hel\"o", "outside the Z85 alphabet: '\"' at position 128"),
    ("0" * 125 + "#####", "group '#####' at position 125"),
    ("0" * 125 + "Helé0", "non-ASCII"),
])
def test_long_bad_text_names_the_position(text: str, message: str) -> None:
    with pytest.raises(DeletionVectorError, match=message.replace("*", "\\*")):
        z85_decode(text)


def _random_bytes(n: int, seed: int, top: bool = False) -> bytes:
    """``n`` random bytes; ``top``: with a 0xFF word every few words (groups of first digit 82)."""
    rng = random.Random(seed)
    data = bytearray(rng.getrandbits(8) for _ in range(n))
    if top:
        for i in range(0, n - 3, 12):
            data[i : i + 4] = b"\xff\xff\xff\xff"
    return bytes(data)


# Byte lengths whose texts sit on both sides of the 120-character switch to the vectorised paths
# (92..100 bytes = 115..125 characters), at padding lengths 0-3, and past a few KB.
_EDGE_LENGTHS = [0, 1, 2, 3, 4, 5, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 4093, 4094, 4095, 4096, 4097, 65_537]


@pytest.mark.parametrize("top", [False, True], ids=["random", "with-0xff-words"])
@pytest.mark.parametrize("n", _EDGE_LENGTHS)
def test_edge_lengths_against_the_reference_codec(n: int, top: bool) -> None:
    for seed in range(3):
        data = _random_bytes(n, seed * 100_003 + n, top)
        text = _reference_encode(data)
        assert z85_encode(data) == text
        assert z85_decode(text) == _reference_decode(text)
        assert z85_decode(text, n) == data


def test_long_plainly_valid_texts_skip_the_checked_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past 120 characters a text of alphabet characters whose groups all start below digit 82
    (so none can exceed 2**32 - 1) is decoded by the translate + dot-product path, never the
    checked one (made unusable here); the largest values it takes (first digit 81, the rest 84)
    and 0 are exact."""
    top_of_fast = ALPHABET[81] + ALPHABET[84] * 4  # 81 * 85**4 + 84 * (85**3 + 85**2 + 85 + 1)
    assert _reference_decode(top_of_fast) == (4_280_451_249).to_bytes(4, "big")
    texts = [
        top_of_fast * 25,
        "00000" * 24 + top_of_fast,
        _reference_encode(_random_bytes(96, 1).replace(b"\xff", b"\x00")),  # 120 characters: plain Python
        _reference_encode(_random_bytes(4096, 2).replace(b"\xff", b"\x00")),
    ]
    monkeypatch.setattr("dvengine.dv.z85._DECODE_TABLE", None)
    for text in texts:
        assert z85_decode(text) == _reference_decode(text)


@pytest.mark.parametrize(("group", "valid"), [
    ("%nSc0", True),  # 2**32 - 1: first digit 82, checked path
    ("%nSc1", False),  # 2**32
    ("%0000", True),  # 82 * 85**4, the smallest value with first digit 82
    ("#0000", False),  # first digit 84: always above
])
def test_long_texts_with_a_group_of_first_digit_82_or_more(group: str, valid: bool) -> None:
    text = "00000" * 30 + group + "HelloWorld"
    want = _reference_decode(text)
    assert (want is not None) == valid
    if valid:
        assert z85_decode(text) == want
    else:
        with pytest.raises(DeletionVectorError, match=f"group '{group}' at position 150"):
            z85_decode(text)
