"""Request ids: ``req_`` and 22 url-safe characters, never the same twice (in a forked child too)."""

from __future__ import annotations

import os
import re
import warnings

from fake_lucy.domain.ids import random_request_id

SHAPE = re.compile(r"req_[A-Za-z0-9_-]{22}")


def test_request_ids_have_their_shape_and_do_not_repeat() -> None:
    ids = [random_request_id() for _ in range(20_000)]
    assert all(SHAPE.fullmatch(request_id) for request_id in ids)
    assert len(set(ids)) == len(ids)


def test_a_forked_worker_draws_other_request_ids_than_its_parent() -> None:
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of a fork beside threads; the child only writes
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.write(write, " ".join(random_request_id() for _ in range(100)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    parent = {random_request_id() for _ in range(100)}
    assert len(child) == 100
    assert not child & parent
