"""Names and descriptors of deletion vectors: UUID file names, prefixes, inline DVs.

A ``storageType "u"`` descriptor does not store a file name; it stores an optional random
prefix (a sub-folder of the table, spreading DV files across object-store key ranges) followed
by the 20-character Z85 text of the file's UUID (16 bytes, most significant first). The file is
``<table>/<prefix>/deletion_vector_<uuid>.bin``. ``"p"`` stores an absolute, percent-encoded URI.
``"i"`` stores the serialized bitmap itself as Z85.
"""

from __future__ import annotations

import os
import secrets
import string
import uuid
from urllib.parse import unquote, urlparse

from pyroaring import BitMap64

from dvengine.dv.bitmap import serialize_bitmap
from dvengine.dv.z85 import z85_decode, z85_encode
from dvengine.errors import DeletionVectorError
from dvengine.protocol.actions import STORAGE_INLINE, STORAGE_PATH, STORAGE_UUID, DeletionVectorDescriptor
from dvengine.storage.uris import canonical_object_uri, is_object_uri, join

UUID_Z85_LENGTH = 20
# Delta Spark draws prefixes from alphanumerics; anything path-safe works for readers.
_PREFIX_ALPHABET = string.ascii_letters + string.digits


def _dv_file_name(file_uuid: uuid.UUID) -> str:
    return f"deletion_vector_{file_uuid}.bin"


def _relative_path(prefix: str, file_uuid: uuid.UUID) -> str:
    name = _dv_file_name(file_uuid)
    return f"{prefix}/{name}" if prefix else name


def new_dv_file_id(random_prefix_len: int = 0) -> tuple[str, str]:
    """A fresh DV file identity: ``(pathOrInlineDv, relative file path)``.

    ``pathOrInlineDv`` is the random prefix plus the Z85 of a random UUID; the relative path is
    ``<prefix>/deletion_vector_<uuid>.bin`` (no folder when the prefix is empty).
    """
    if random_prefix_len < 0:
        raise DeletionVectorError(f"random_prefix_len must be >= 0, got {random_prefix_len}")
    prefix = "".join(secrets.choice(_PREFIX_ALPHABET) for _ in range(random_prefix_len))
    file_uuid = uuid.uuid4()
    return prefix + z85_encode(file_uuid.bytes), _relative_path(prefix, file_uuid)


def dv_file_relative_path(path_or_inline_dv: str) -> str:
    """Relative path (to the table root) of the file named by a ``"u"`` descriptor."""
    if len(path_or_inline_dv) < UUID_Z85_LENGTH:
        raise DeletionVectorError(
            f"'u' deletion vector pathOrInlineDv {path_or_inline_dv!r} has {len(path_or_inline_dv)} characters; "
            f"expected an optional prefix plus a {UUID_Z85_LENGTH}-character Z85 UUID"
        )
    prefix = path_or_inline_dv[:-UUID_Z85_LENGTH]
    encoded = path_or_inline_dv[-UUID_Z85_LENGTH:]
    try:
        raw = z85_decode(encoded)
    except DeletionVectorError as exc:
        raise DeletionVectorError(f"'u' deletion vector pathOrInlineDv {path_or_inline_dv!r}: bad UUID: {exc}") from exc
    if prefix.startswith("/") or ".." in prefix.split("/"):
        raise DeletionVectorError(f"'u' deletion vector prefix {prefix!r} must not escape the table directory")
    return _relative_path(prefix, uuid.UUID(bytes=raw))


def absolute_dv_path(table_root: str, dv: DeletionVectorDescriptor) -> str:
    """Local filesystem path of the file holding a ``"u"`` or ``"p"`` deletion vector."""
    if dv.storage_type == STORAGE_UUID:
        return join(table_root, dv_file_relative_path(dv.path_or_inline_dv))
    if dv.storage_type == STORAGE_PATH:
        text = dv.path_or_inline_dv
        if is_object_uri(text):
            return canonical_object_uri(unquote(text))
        parsed = urlparse(text)
        if parsed.scheme not in ("", "file"):
            raise DeletionVectorError(
                f"'p' deletion vector path {text!r} uses scheme {parsed.scheme!r}; only local file paths are supported"
            )
        path = unquote(parsed.path)
        if not os.path.isabs(path):
            raise DeletionVectorError(f"'p' deletion vector path {text!r} is not an absolute path")
        return path
    raise DeletionVectorError(f"deletion vector of storageType {dv.storage_type!r} is inline and has no file path")


def inline_descriptor(rows: BitMap64) -> DeletionVectorDescriptor:
    """An ``"i"`` descriptor holding ``rows`` as Z85 text in the log itself."""
    serialized = serialize_bitmap(rows)
    return inline_descriptor_from_serialized(serialized, len(rows))


def inline_descriptor_from_serialized(serialized: bytes, cardinality: int) -> DeletionVectorDescriptor:
    """Like :func:`inline_descriptor` for bytes already serialized (avoids a second serialization)."""
    return DeletionVectorDescriptor(
        storage_type=STORAGE_INLINE,
        path_or_inline_dv=z85_encode(serialized),
        size_in_bytes=len(serialized),
        cardinality=cardinality,
    )
