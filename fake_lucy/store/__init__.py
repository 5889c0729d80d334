"""Persistence: the SQLite tables, the connection and transaction helpers."""
