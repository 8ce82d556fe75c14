"""Benchmark harness: dvengine DML with deletion vectors vs copy-on-write vs delta-rs.

Layout (each module owns one concept):

- ``config``      what to run (sizes, workloads, repetitions), with the quick and full presets;
- ``data``        the generated data set, written once as Parquet, and the model that predicts
                  every workload's outcome independently of any engine;
- ``workloads``   the DELETE / UPDATE / MERGE shapes and their predicates;
- ``tables``      base Delta tables (one per engine), cheap fresh copies, folder and log diffs;
- ``contenders``  dvengine (dv / rewrite / auto), delta-rs, and the pyarrow floor;
- ``verify``      correctness checks run before a time is allowed to count;
- ``runner``      the measurement loop; ``results`` / ``report`` / ``plots`` the outputs;
- ``cli``         ``dvengine bench``.
"""
