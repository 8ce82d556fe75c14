"""Engine-independent reading of a snapshot's rows (Arrow), with deletion vectors applied."""

from dvengine.read.arrow_reader import (
    deleted_row_mask,
    open_data_file,
    physical_row_count,
    read_file_arrow,
    read_physical_rows,
    relabel_by_position,
)
from dvengine.read.arrow_scan import scan_snapshot_arrow
from dvengine.read.many_files import read_files_arrow, read_snapshot_arrow
from dvengine.read.scan_plan import ScanPlan, plan_scan

__all__ = [
    "ScanPlan",
    "deleted_row_mask",
    "open_data_file",
    "physical_row_count",
    "plan_scan",
    "read_file_arrow",
    "read_files_arrow",
    "read_physical_rows",
    "read_snapshot_arrow",
    "relabel_by_position",
    "scan_snapshot_arrow",
]
