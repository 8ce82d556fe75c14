"""How Spark names files in ``_metadata.file_path``, so DV keys join without a Python UDF.

Spark reports a file as Hadoop's ``Path.toUri().toString()``: ``file:`` followed by the absolute
path with java.net.URI quoting, which percent-encodes ASCII characters outside the URI path
grammar (space, ``%``, ``#``, ``?`` ...) but keeps ``=``, ``:``, ``@``, sub-delimiters and non-ASCII
letters as they are. Reproducing that exactly lets us build (file_path, row_index) keys on the
driver that compare equal to the values Spark produces on executors.
"""

from __future__ import annotations

import unicodedata

from dvengine.errors import UnsupportedStorageError
from dvengine.storage import is_object_uri

_KEEP_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$&'()*+,;=:@/")


def _quote_char(ch: str) -> str:
    if ch in _KEEP_ASCII:
        return ch
    if ord(ch) > 127 and not ch.isspace() and unicodedata.category(ch)[0] != "C":
        return ch
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8"))


def refuse_object_store(path: str) -> None:
    """The Spark executor and reader still work on local paths only (spec_notes/storage.md)."""
    if is_object_uri(path):
        raise UnsupportedStorageError(
            f"{path}: Spark jobs on object-store tables are not implemented yet; open the table without a "
            "SparkSession (DeltaTable.forPath(None, uri), dvengine.write(arrow_data, uri)) or pass engine='local'"
        )


def spark_file_uri(absolute_path: str) -> str:
    """The string Spark puts in ``_metadata.file_path`` for a local absolute path."""
    refuse_object_store(absolute_path)
    return "file:" + "".join(_quote_char(ch) for ch in absolute_path)
