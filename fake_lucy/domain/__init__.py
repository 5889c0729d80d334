"""The rules of the fake: lifecycle, recall, billing, idempotency, faults, clock.

Nothing here knows about HTTP: functions take a ``sqlite3.Connection`` inside a transaction the
caller opened, and raise ``DomainError`` for every refusal.
"""
