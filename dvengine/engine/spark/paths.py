"""How Spark names a table's files: Hadoop paths to hand it, and the URIs it reports back.

dvengine spells a table root as an absolute local path or ``scheme://bucket/key`` with ``s3://``
for S3 (``dvengine.storage.uris``). Spark reaches files through Hadoop's FileSystem, which knows
S3 as ``s3a://`` on open-source Hadoop; GCS (``gs://``) and ADLS (``abfs[s]://``) keep their
spelling. A local folder is ``file:`` unless the session sets ``dvengine.spark.localFileScheme``
to another Hadoop scheme serving the same local paths (the tests use a recording FileSystem,
``dvtest:``, to prove every Spark-side byte goes through Hadoop's API).

Spark reports a file in ``_metadata.file_path`` as Hadoop's ``Path.toUri().toString()``: scheme,
``//authority`` when there is one, then the path with java.net.URI quoting, which percent-encodes
ASCII characters outside the URI path grammar (space, ``%``, ``#``, ``?`` ...) but keeps ``=``,
``:``, ``@``, sub-delimiters and non-ASCII letters as they are. Reproducing that exactly lets the
driver build (file_path, row_index) keys that compare equal to the values Spark produces.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from dvengine.commands.options import session_conf
from dvengine.errors import UnsupportedStorageError
from dvengine.storage import is_object_uri
from dvengine.storage.uris import split_object_uri

_KEEP_ASCII = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$&'()*+,;=:@/")
# Session conf: the Hadoop scheme through which Spark reaches tables in local folders.
CONF_LOCAL_SCHEME = "dvengine.spark.localFileScheme"
# dvengine's canonical object-store schemes -> the Hadoop scheme Spark reaches them with.
_HADOOP_SCHEMES = {"s3": "s3a", "gs": "gs", "abfs": "abfs", "abfss": "abfss"}


def _quote_char(ch: str) -> str:
    if ch in _KEEP_ASCII:
        return ch
    if ord(ch) > 127 and not ch.isspace() and unicodedata.category(ch)[0] != "C":
        return ch
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class HadoopNames:
    """How one session names files for Hadoop: the scheme local folders are served under."""

    local_scheme: str = "file"

    def _split(self, path: str) -> tuple[str, str]:
        """(``scheme:`` plus ``//authority`` if any, the raw path) of a dvengine path."""
        if not is_object_uri(path):
            return f"{self.local_scheme}:", path
        base, key = split_object_uri(path)
        scheme, bucket = base.split("://", 1)
        hadoop = _HADOOP_SCHEMES.get(scheme)
        if hadoop is None:
            raise UnsupportedStorageError(
                f"{path}: Spark reaches Azure through abfss://container@account.dfs.core.windows.net/path; the "
                f"{scheme}:// spelling names no account, so open the table by its abfss:// URI"
            )
        return f"{hadoop}://{bucket}", "/" + key

    def path(self, path: str) -> str:
        """The Hadoop path string (unquoted) for a dvengine path: what ``new Path(String)`` takes."""
        head, raw = self._split(path)
        return head + raw

    def uri(self, path: str) -> str:
        """The string Spark puts in ``_metadata.file_path`` for a dvengine path."""
        head, raw = self._split(path)
        return head + "".join(_quote_char(ch) for ch in raw)

    @property
    def through_jvm(self) -> bool:
        """Whether local tables are served by a non-``file`` Hadoop scheme (object stores always are)."""
        return self.local_scheme != "file"

    def jvm_io(self, table_root: str) -> bool:
        """Whether Spark tasks must reach this table through Hadoop's FileSystem in the JVM (anything
        but a plain local folder): Python workers then read nothing from the table themselves and
        hand the files they encode to the JVM to write (``engine.spark.jvm_files``)."""
        return is_object_uri(table_root) or self.through_jvm


LOCAL = HadoopNames()


def hadoop_names(spark: object) -> HadoopNames:
    """The naming of a session (``dvengine.spark.localFileScheme``, default ``file``)."""
    raw = None if getattr(spark, "conf", None) is None else session_conf(spark)(CONF_LOCAL_SCHEME)
    scheme = (raw or "file").strip().lower()
    return LOCAL if scheme == "file" else HadoopNames(scheme)


def spark_file_uri(absolute_path: str) -> str:
    """The string Spark puts in ``_metadata.file_path`` for a path under the ``file:`` naming."""
    return LOCAL.uri(absolute_path)
