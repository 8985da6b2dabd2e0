"""Chaos scenarios: one pytest file per case of docs/catalog.md, marked ``chaos`` (``pytest -m chaos``)."""
