"""Repo-local glue only; the harness's fixtures live in the chaos pytest plugin (chaos/plugin.py)."""
