"""Which columns of a data file are worth a Parquet dictionary, decided per file from a sample.

pyarrow dictionary-encodes every column unless told otherwise, and falls back to plain encoding
once a column's dictionary outgrows its page limit (1 MiB). For a column whose values are (nearly)
unique, a key, a random double, an event time, that means hashing every value into a dictionary
that is then thrown away: measured on the soak's compacted files (a unique int64 key, a unique
double, a low-cardinality int64 and string), ``pq.write_table`` took 10.1 ms for 50,000 rows with
dictionaries on every column against 3.5 ms with dictionaries on the two repeating ones only,
40 ms against 16 ms at 250,000 and 91 against 63 ms at 1,000,000, and the files were 4-20 %
smaller (spec_notes/auto-compaction.md). Parquet-mr (Delta Spark's writer) behaves like pyarrow
here; the choice changes only the encoding, which every reader decodes either way.

The decision: a column gets a dictionary unless a sample of its values looks unique. Up to
:data:`SAMPLE_SIZE` evenly spaced values are counted (all of them in a smaller file); the number of
distinct values is estimated from the repeats in the sample (birthday bound: ``s`` draws from
``C`` equally likely values repeat about ``s^2 / 2C`` times), and a column whose estimate exceeds
half the file's rows (a value used less than twice on average) is written plain. Nested columns,
booleans and columns that are already Arrow dictionaries keep pyarrow's default. The sample costs
about 0.1 ms per column, independent of the file's rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SAMPLE_SIZE = 1024


def dictionary_columns(table: pa.Table) -> bool | list[str]:
    """pyarrow's ``use_dictionary`` for writing ``table``: True (every column) when no column looks
    unique, else the Parquet leaf paths that keep a dictionary (columns left out are written plain)."""
    keep: list[str] = []
    plain = False
    for field, column in zip(table.schema, table.columns):
        if _worth_a_dictionary(field.type, column):
            keep.extend(leaf_paths(field.name, field.type))
        else:
            plain = True
    return keep if plain else True


def leaf_paths(name: str, data_type: pa.DataType) -> list[str]:
    """The dotted Parquet column paths of one Arrow field, as pyarrow's writer names them (compliant
    nested types: ``list.element`` for list items, ``key_value.key`` / ``.value`` for maps)."""
    if pa.types.is_struct(data_type):
        return [path for i in range(data_type.num_fields)
                for path in leaf_paths(f"{name}.{data_type.field(i).name}", data_type.field(i).type)]
    if pa.types.is_map(data_type):
        return leaf_paths(f"{name}.key_value.key", data_type.key_type) + leaf_paths(f"{name}.key_value.value", data_type.item_type)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type) or pa.types.is_fixed_size_list(data_type):
        return leaf_paths(f"{name}.list.element", data_type.value_type)
    return [name]


def _worth_a_dictionary(data_type: pa.DataType, column: pa.ChunkedArray) -> bool:
    if pa.types.is_nested(data_type) or pa.types.is_dictionary(data_type) or pa.types.is_boolean(data_type) or pa.types.is_null(data_type):
        return True
    rows = len(column)
    sample = column if rows <= SAMPLE_SIZE else column.take(pa.array(np.linspace(0, rows - 1, SAMPLE_SIZE).astype(np.int64)))
    drawn = len(sample) - sample.null_count
    if drawn == 0:
        return True
    distinct = pc.count_distinct(sample).as_py()
    repeats = drawn - distinct
    if rows <= SAMPLE_SIZE:
        estimate = float(distinct)
    elif repeats == 0:
        return False
    else:
        estimate = max(float(distinct), drawn * drawn / (2.0 * repeats))
    return estimate * 2 <= rows
