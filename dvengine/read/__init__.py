"""Engine-independent reading of a snapshot's rows (Arrow), with deletion vectors applied."""

from dvengine.read.arrow_reader import read_file_arrow, read_snapshot_arrow

__all__ = ["read_file_arrow", "read_snapshot_arrow"]
