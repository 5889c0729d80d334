"""Lucy Agent Memory: a typed async SDK for Agent Memory HTTP v1."""

__all__: list[str] = []
