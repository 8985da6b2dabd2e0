"""The event model lives in :mod:`chaos.run.events`, below every stage (the workload emits events without
importing the history); this module re-exports it for the history's readers."""

from chaos.run.events import *  # noqa: F403
