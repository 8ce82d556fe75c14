"""Z85 (ZeroMQ Base-85) as the Delta protocol uses it.

Delta stores two things as Z85 text: the 16 bytes of a DV file's UUID (in ``pathOrInlineDv`` of
``storageType "u"``) and whole serialized bitmaps of inline DVs (``storageType "i"``). The
ZeroMQ spec only defines Z85 for inputs whose length is a multiple of 4; Delta extends it by
padding the input with zero bytes up to a multiple of 4 and recording the true length elsewhere
(``sizeInBytes``), so the decoder takes an optional ``size`` to truncate the padding away.

Vectorised with numpy: inline DVs can be a few KiB and this runs on executors per file.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt

from dvengine.errors import DeletionVectorError

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"

_ENCODE_TABLE: npt.NDArray[np.uint8] = np.frombuffer(ALPHABET.encode("ascii"), dtype=np.uint8)
_DECODE_TABLE: npt.NDArray[np.int16] = np.full(256, -1, dtype=np.int16)
_DECODE_TABLE[_ENCODE_TABLE] = np.arange(85, dtype=np.int16)
# Most significant digit first: value = d0*85^4 + d1*85^3 + ... + d4.
_POWERS: npt.NDArray[np.uint64] = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)


def encoded_length(size: int) -> int:
    """Length of the Z85 text of ``size`` bytes after zero-padding to a multiple of 4."""
    return -(-size // 4) * 5


def z85_encode(data: bytes) -> str:
    """Encode ``data``, zero-padding it to a multiple of 4 bytes first (Delta's rule).

    The output length is ``ceil(len(data) / 4) * 5``; the padding is not recorded in the text.
    """
    pad = (-len(data)) % 4
    padded = data + b"\x00" * pad if pad else data
    if not padded:
        return ""
    words = np.frombuffer(padded, dtype=">u4").astype(np.uint64)
    digits = (words[:, None] // _POWERS[None, :]) % np.uint64(85)
    return _ENCODE_TABLE[digits.astype(np.intp)].tobytes().decode("ascii")


# Texts up to this many characters are decoded in plain Python: numpy's fixed cost is most of the
# time for the short inline DVs of point DML (~50 characters: ~4 us against ~8; a writer decodes
# every winner's, ~7 per op at 8 writers). Measured break-even ~130 characters.
_SMALL_TEXT = 120
_DIGIT = {c: i for i, c in enumerate(ALPHABET)}


def _decode_small(text: str) -> bytes | None:
    """The bytes of a short, valid Z85 text; None when anything is wrong with it (the vectorised
    path then raises the precise error)."""
    words = []
    digit = _DIGIT
    try:
        for i in range(0, len(text), 5):
            words.append(
                (((digit[text[i]] * 85 + digit[text[i + 1]]) * 85 + digit[text[i + 2]]) * 85 + digit[text[i + 3]]) * 85
                + digit[text[i + 4]]
            )
        return struct.pack(f">{len(words)}I", *words)
    except (KeyError, struct.error):
        return None


def z85_decode(text: str, size: int | None = None) -> bytes:
    """Decode Z85 ``text``; truncate the result to ``size`` bytes when given.

    Raises :class:`DeletionVectorError` when the text length is not a multiple of 5, a
    character is outside the Z85 alphabet, a 5-character group exceeds 2**32 - 1, or ``size``
    does not fit the text (the padding Delta adds is at most 3 bytes).
    """
    if len(text) % 5 != 0:
        raise DeletionVectorError(f"Z85 text length must be a multiple of 5, got {len(text)} characters: {text[:40]!r}")
    small = _decode_small(text) if len(text) <= _SMALL_TEXT else None
    if small is not None:
        return _truncate(small, text, size)
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        raise DeletionVectorError(f"Z85 text contains non-ASCII characters: {text[:40]!r}") from None
    codes = _DECODE_TABLE[np.frombuffer(raw, dtype=np.uint8)]
    if codes.size and int(codes.min()) < 0:
        bad_pos = int(np.argmax(codes < 0))
        raise DeletionVectorError(
            f"Z85 text has a character outside the Z85 alphabet: {text[bad_pos]!r} at position {bad_pos}"
        )
    groups = codes.astype(np.uint64).reshape(-1, 5)
    values = (groups * _POWERS[None, :]).sum(axis=1, dtype=np.uint64)
    if values.size and int(values.max()) > 0xFFFFFFFF:
        bad_group = int(np.argmax(values > 0xFFFFFFFF))
        raise DeletionVectorError(
            f"Z85 group {text[bad_group * 5 : bad_group * 5 + 5]!r} at position {bad_group * 5} "
            "encodes a value above 2**32 - 1"
        )
    return _truncate(values.astype(">u4").tobytes(), text, size)


def _truncate(decoded: bytes, text: str, size: int | None) -> bytes:
    if size is None:
        return decoded
    if size < 0 or size > len(decoded) or len(decoded) - size > 3:
        raise DeletionVectorError(
            f"Z85 text of {len(text)} characters decodes to {len(decoded)} bytes, "
            f"which cannot hold {size} bytes (expected text of {encoded_length(max(size, 0))} characters)"
        )
    return decoded[:size]
