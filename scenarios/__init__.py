"""Chaos scenarios: one pytest file per CATALOG.md case, marked ``chaos`` (run with ``pytest -m chaos``)."""
