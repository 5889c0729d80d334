"""The errors of the testing helpers that the pytest plugin names at load time: this module imports
nothing, so naming them costs a session that uses no fake nothing (``fake_lucy.testing.shared``
raises them)."""

from __future__ import annotations

__all__ = ["SharedFakeError"]


class SharedFakeError(RuntimeError):
    """The shared fake could not be reached, or refused to create or delete the session's tenant."""
