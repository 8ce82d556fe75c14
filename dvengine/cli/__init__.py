"""The ``dvengine`` command-line tool: ``main`` parses and dispatches, one module per command group.

``dvengine/cli/errors.py`` turns every failure into one ``dvengine: error: ...`` line.
"""
