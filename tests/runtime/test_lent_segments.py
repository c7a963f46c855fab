"""Answers read in place: a client keeps a same-host answer's large tensors as
views of the serving side's segment (no copy), and the serving side writes no
frame into that segment until the client names it back in a request's ``ret``."""

from __future__ import annotations

import gc
import os
import socket

import numpy as np
import pytest
from helpers import local_cluster, nbdist_memfds

import nbdist as nd
from nbdist.runtime.framed import wire
from nbdist.runtime.framed.wire import (
    Link,
    Outgoing,
    decode_tensors,
    recv_frame,
    send_frame,
)

N = 1 << 18  # float32: 1 MiB, through the segment


@pytest.fixture
def pair():
    """(serving end, its link, client end, its link) of one real connection."""
    served, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    links = Link(serves=True), Link()
    yield served, links[0], client, links[1]
    for end in (served, client):
        end.close()
    for link in links:
        link.close()


def _answer(sock, link, *values):
    out = Outgoing()
    for i, v in enumerate(values):
        out.add(f"t{i}", v)
    send_frame(sock, {"t": out.entries}, out, link)


def _read(sock, link):
    """(header, [values]) as ``SameHostChannel`` reads an answer."""
    header, payload, fds = recv_frame(sock, 1 << 40)
    return header, [v for _, v in decode_tensors(header["t"], payload, fds,
                                                 header.get("seg"), link)]


def _request(sock, link):
    """A client's next request: it names the segments it is done with."""
    header = {"op": "pull"}
    if link.returns:
        header["ret"] = link.take_returns()
    send_frame(sock, header, None, link)


def _serve_request(sock, link):
    header, _, _ = recv_frame(sock, 1 << 20)
    link.returned(header.get("ret"))


def test_a_held_answer_is_never_overwritten_and_its_segment_is_reused_once_back(pair):
    served, s_link, client, c_link = pair
    _answer(served, s_link, np.full(N, 1.0, np.float32))
    header, (first,) = _read(client, c_link)
    assert header["seg"].get("lend") == 1
    np.testing.assert_array_equal(first, 1.0)
    first += 1.0  # the client's to write while it holds it
    seg_id = header["seg"]["id"]
    for k in range(2, 6):  # held: every further answer goes elsewhere
        _request(client, c_link)
        _serve_request(served, s_link)
        _answer(served, s_link, np.full(N, float(k), np.float32))
        header, (later,) = _read(client, c_link)
        assert header["seg"]["id"] != seg_id
        np.testing.assert_array_equal(later, float(k))
        del later
    np.testing.assert_array_equal(first, 2.0)
    del first
    gc.collect()
    _request(client, c_link)  # names the segment back
    _serve_request(served, s_link)
    _answer(served, s_link, np.full(N, 9.0, np.float32))
    header, (value,) = _read(client, c_link)
    np.testing.assert_array_equal(value, 9.0)
    # Reused: no new descriptor, and the link kept at most its pool.
    assert "fd" not in header["seg"] and not header["seg"].get("once")
    assert len(s_link._pool) <= wire.POOL_SEGMENTS


def test_a_client_keeping_every_answer_gets_each_intact(pair):
    served, s_link, client, c_link = pair
    kept = []
    for k in range(8):
        if k:
            _request(client, c_link)
            _serve_request(served, s_link)
        _answer(served, s_link, np.arange(N, dtype=np.float32) + k,
                np.full(3, k, np.int64))
        kept.append(_read(client, c_link)[1])
    for k, (big, small) in enumerate(kept):
        np.testing.assert_array_equal(big, np.arange(N, dtype=np.float32) + k)
        np.testing.assert_array_equal(small, [k, k, k])
    assert len(s_link._pool) <= wire.POOL_SEGMENTS
    kept.clear()
    gc.collect()
    assert sorted(c_link.take_returns()) == [s.id for s in s_link._pool]


def test_a_small_tensor_of_a_large_segment_is_copied_and_the_segment_given_back(pair):
    served, s_link, client, c_link = pair
    _answer(served, s_link, np.zeros(4 * N, np.float32))  # a 4 MiB segment
    header, values = _read(client, c_link)
    del values
    gc.collect()
    _request(client, c_link)
    _serve_request(served, s_link)
    _answer(served, s_link, np.full(N // 2, 7.0, np.float32))  # 512 KiB of it
    header, (small,) = _read(client, c_link)
    assert "lend" not in header["seg"]  # not lent: a copy, the segment free
    assert not c_link.returns
    _answer(served, s_link, np.full(4 * N, 3.0, np.float32))  # into it again
    header, (big,) = _read(client, c_link)
    assert "fd" not in header["seg"]
    np.testing.assert_array_equal(small, 7.0)
    np.testing.assert_array_equal(big, 3.0)


def test_a_segment_regrown_while_another_is_lent_leaves_the_lent_one_mapped(pair):
    """The serving side drops the free segment that is too small for a larger
    answer while the client still holds the other: the client forgets the
    dropped one, keeps the held one, and reads it again once it is reused."""
    served, s_link, client, c_link = pair

    def exchange(n, value):
        if c_link.returns or exchange.calls:
            _request(client, c_link)
            _serve_request(served, s_link)
        exchange.calls += 1
        _answer(served, s_link, np.full(n, value, np.float32))
        return _read(client, c_link)

    exchange.calls = 0
    _, (held,) = exchange(N, 1.0)  # segment A, lent and held
    _, values = exchange(N, 2.0)  # segment B, lent, then given back
    del values
    _, (large,) = exchange(4 * N, 3.0)  # B is too small: dropped, C made
    del large, held  # A and C given back
    for k in range(4, 8):  # A and C reused, no descriptor sent again
        header, (value,) = exchange(N if k % 2 else 4 * N, float(k))
        assert "fd" not in header["seg"]
        np.testing.assert_array_equal(value, float(k))
        del value
    assert len(c_link._peer_segments) <= wire.POOL_SEGMENTS


def test_a_request_is_copied_out_even_from_a_one_off_segment(pair, monkeypatch):
    """The serving side never keeps a view of a client's segment: the client
    could still write into it, or shrink it under the server."""
    served, s_link, client, c_link = pair
    monkeypatch.setattr(wire, "KEEP_SEGMENT_BYTES", 1 << 20)  # 4 MiB: one-off
    out = Outgoing()
    out.add("feed", np.full(4 * N, 5.0, np.float32))
    send_frame(client, {"op": "run", "t": out.entries}, out, c_link)
    header, payload, fds = recv_frame(served, 1 << 20)
    assert header["seg"].get("once")
    (_, value), = decode_tensors(header["t"], payload, fds, header["seg"], s_link)
    assert nbdist_memfds(os.getpid()) == 0  # nothing of the segment kept
    np.testing.assert_array_equal(value, 5.0)


def test_returns_naming_anything_else_are_ignored(pair):
    served, s_link, client, c_link = pair
    _answer(served, s_link, np.ones(N, np.float32))
    header, (held,) = _read(client, c_link)
    for ret in ("1", {"1": 1}, [None, "x", 1.5], list(range(10, 5000))):
        send_frame(client, {"op": "pull", "ret": ret})
        _serve_request(served, s_link)
        assert all(s.lent for s in s_link._pool if s.id == header["seg"]["id"])
    np.testing.assert_array_equal(held, 1.0)


def _ps_variable(servers):
    """(worker server, a 1 MiB variable on the ps, an op adding 1 to it)."""
    cluster = local_cluster(ps=1, worker=1)
    servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    with nd.device("/job:ps/task:0"):
        v = nd.Variable(np.zeros(N, np.float32), name="v")
        bump = nd.assign_add(v, np.ones(N, np.float32))
    return worker, v, bump


def test_a_task_keeps_fetched_values_of_a_variable_it_goes_on_updating(servers, graph):
    """End to end: values a session fetched through the same-host path stay as
    they were fetched while the ps updates the variable and answers again."""
    worker, v, bump = _ps_variable(servers)
    with nd.device("/job:worker/task:0"):
        doubled = v.read_value() * 2.0
    with nd.Session(worker.target) as s:
        s.run(v.initializer)
        fetched = []
        for _ in range(6):
            fetched.append(s.run([v, doubled]))
            s.run(bump)
        for k, (value, twice) in enumerate(fetched):
            np.testing.assert_array_equal(value, float(k))
            np.testing.assert_array_equal(twice, 2.0 * k)
        fetched.clear()
        gc.collect()
        for k in range(6, 9):  # given back: the steps go on right
            np.testing.assert_array_equal(s.run(v), float(k))
            s.run(bump)


def test_a_long_run_makes_no_new_segments(servers, graph, monkeypatch):
    """Lent segments come back: once warm, step after step goes through the
    same segments (no new memfd per answer), and no more stay mapped."""
    worker, v, bump = _ps_variable(servers)
    with nd.device("/job:worker/task:0"):
        total = nd.reduce_sum(v.read_value())
    made = []
    memfd_create = os.memfd_create

    def counted(*args):
        made.append(args[0])
        return memfd_create(*args)

    with nd.Session(worker.target) as s:
        s.run(v.initializer)
        for _ in range(5):
            s.run([bump, total])
        early = nbdist_memfds(os.getpid())
        monkeypatch.setattr(os, "memfd_create", counted)
        for k in range(5, 60):
            s.run(bump)
            assert s.run(total) == float(N * (k + 1))
        # Not one per answer (55 if lent segments never came back); a few at
        # most: the step's two connections to the ps may swap roles under
        # load, each with its pool.
        assert len(made) <= 2 * wire.POOL_SEGMENTS, made
        assert nbdist_memfds(os.getpid()) <= early + 2 * wire.POOL_SEGMENTS
