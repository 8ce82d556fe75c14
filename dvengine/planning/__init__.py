"""DML planning: which files can hold matching rows, and what to do with each touched file."""
