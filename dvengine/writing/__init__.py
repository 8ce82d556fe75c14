"""Pure helpers for writing tables: stats from Parquet footers, schema checks, building actions."""
