"""Z85 against the ZeroMQ test vector, Delta's padding rule, and a naive reference codec."""

from __future__ import annotations

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
