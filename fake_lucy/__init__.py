"""A fake of Lucy Agent Memory HTTP v1 for development and tests."""

__version__ = "0.1.0"

__all__ = ["__version__"]
