"""Reading a table's change data feed (``DeltaTable.changes``, ``readChangeFeed``), as Arrow."""

from dvengine.changes.options import read_change_feed_options
from dvengine.changes.reader import read_changes

__all__ = ["read_change_feed_options", "read_changes"]
