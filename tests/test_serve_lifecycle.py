"""The service's life beside others: a graceful shutdown under load (serve.drain) and several services
on one decision log (serve.file_lock). The shutdown and the shared log run `evalprism serve` itself in
subprocesses (a small trained P2L model, fake upstreams on loopback), under concurrent load over real
HTTP; the lock's cut-back case runs on the log's own class.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import FillingDisk
from serve_harness import CLIENT_TIMEOUT_S, FakeUpstreams, ServiceProcess, topic_model, write_config

from evalprism.serve.decisions import DecisionLine, DecisionLog, DecisionLogUnwritable, read_log
from evalprism.serve.drain import accept_the_queued, queued_connections

COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}
ENV = {"FAKE_UPSTREAM_KEY": "upstream-key"}
DECIDING = ("/v1/route", "/v1/chat/completions")


# --- one lock around each append ---------------------------------------------------------------------


class _InterleavedDisk(FillingDisk):
    """The log's file on a disk that fills up mid-line, while another service appends to the same log:
    each write first lets ``other`` write its line (in a thread, given up to 0.3 s), then puts out half
    its own bytes and fails with ENOSPC, so the log cuts its half line back off."""

    def __init__(self, path: Path, other: DecisionLog) -> None:
        super().__init__(path)
        self.other = other
        self.thread: threading.Thread | None = None

    def write(self, data: bytes) -> int:
        self.thread = threading.Thread(
            target=self.other.write, args=(DecisionLine(endpoint="/v1/route", prompt_sha256="other"),)
        )
        self.thread.start()
        self.thread.join(0.3)  # with the lock held, the other service waits until this append is over
        self.file.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_failed_append_is_cut_back_without_cutting_another_services_line(tmp_path: Path) -> None:
    """Two logs on one file (two services): one append fails half-written while the other service
    appends. The cut-back removes only the failed half line; the other service's line, which waited for
    the lock, is whole (without the lock it landed inside the range that was cut back off)."""
    path = tmp_path / "decisions.jsonl"
    other = DecisionLog(path)
    disk = _InterleavedDisk(path, other)
    log = DecisionLog(path, opener=lambda _: disk)  # type: ignore[arg-type,return-value]
    with pytest.raises(DecisionLogUnwritable):
        log.write(DecisionLine(endpoint="/v1/route", prompt_sha256="failed"))
    assert disk.thread is not None
    disk.thread.join()
    assert [line.prompt_sha256 for line in read_log(path)] == ["other"]
    log.close()
    other.close()


# --- the connections queued on a listening socket ----------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the accept queue is read through Linux's TCP_INFO")
def test_the_connections_queued_on_a_listening_socket_are_accepted_before_it_closes() -> None:
    """Eight connections complete while the event loop is busy (the kernel queues them: closing the socket
    now would reset them, requests and all). The shutdown's first step shrinks the queue to nothing and
    returns once the loop has accepted all eight."""

    async def scenario() -> tuple[int | None, int | None, int, int]:
        accepted: list[asyncio.BaseTransport] = []

        class Accepting(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                accepted.append(transport)

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        server = await asyncio.get_running_loop().create_server(Accepting, sock=sock)
        clients = [socket.create_connection(sock.getsockname()) for _ in range(8)]  # the loop does not run meanwhile
        queued = queued_connections(sock)
        await accept_the_queued([sock])
        left, length = (
            queued_connections(sock),
            struct.unpack_from("I", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104), 28)[0],
        )
        server.close()
        for client in clients:
            client.close()
        return queued, left, length, len(accepted)

    assert asyncio.run(scenario()) == (8, 0, 0, 8)


# --- services in subprocesses ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return topic_model(tmp_path_factory.mktemp("p2l"))


def _request(worker: int, k: int) -> tuple[str, dict[str, Any]]:
    """The k-th request of a load worker: routing, a chat, a streamed chat (named poet-7b, which answers)."""
    text = [{"role": "user", "content": f"worker {worker} question {k}"}]
    if k % 3 == 0:
        return "/v1/route", {"messages": text}
    return "/v1/chat/completions", {"model": "poet-7b", "messages": text, "stream": k % 3 == 2}


async def _send(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    async with client.stream("POST", path, json=body) as response:
        text = (await response.aread()).decode()
    return {"path": path, "status": response.status_code, "headers": response.headers, "text": text}


async def _worker(client: httpx.AsyncClient, worker: int, results: list[dict[str, Any]], stop: asyncio.Event) -> None:
    """Send requests back to back until the service refuses the connection (it stopped accepting) or
    ``stop`` is set; record every answer, and any request the service accepted and dropped unanswered."""
    k = 0
    while not stop.is_set():
        path, body = _request(worker, k)
        try:
            results.append(await _send(client, path, body))
        except httpx.ConnectError:  # refused before anything was sent: the service no longer accepts
            return
        except httpx.TransportError as exc:  # sent and never answered: what a graceful shutdown must not do
            results.append({"path": path, "dropped": type(exc).__name__})
            return
        k += 1


async def _late(url: str, k: int, results: list[dict[str, Any]]) -> None:
    """One request on a new connection of its own (it waits in the service's accept queue)."""
    path, body = _request(99, k)
    async with httpx.AsyncClient(base_url=url, timeout=CLIENT_TIMEOUT_S) as client:
        try:
            results.append(await _send(client, path, body))
        except httpx.ConnectError:
            return
        except httpx.TransportError as exc:
            results.append({"path": path, "dropped": type(exc).__name__})


def _answered_lines(results: list[dict[str, Any]], log: Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """The request ids of the answered routing and chat requests, and the decision log's lines by id."""
    ids = [r["headers"]["x-request-id"] for r in results if "status" in r and r["path"] in DECIDING]
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) == len({line["request_id"] for line in lines})  # one line per request id
    return ids, {line["request_id"]: line for line in lines}


@pytest.mark.slow
def test_sigterm_under_load_answers_or_refuses_every_accepted_request(
    model_dir: Path, fake: FakeUpstreams, tmp_path: Path
) -> None:
    """16 clients send routing and chat requests back to back (keep-alive); a chat whose upstream holds
    its answer is in flight. Then the service is frozen (SIGSTOP: as starved as a service can be) while
    the 16 send their next requests and 24 more arrive on new connections (queued by the kernel,
    requests and all), and it gets SIGTERM as it resumes. No request the service accepted goes
    unanswered: the held chat is answered 200, the requests that arrived after the shutdown began get a
    503 with Retry-After (code shutting_down) and a decision-log line, and a new connection is refused
    (before anything is sent). The log has exactly one line per answered routing or chat request."""
    fake.behaviour["generalist-70b"] = "hang"
    # a client starved by other processes may take over the default 1 s to send its next request on a
    # kept-alive connection and race its close (a connection error the SDKs retry); 5 s keeps this test
    # about the service, not about how busy the machine is
    config = write_config(tmp_path / "router.yaml", fake, COSTS, budget=3.0, shutdown_linger_s=5.0)
    service = ServiceProcess(model_dir, config, ENV).start()
    results: list[dict[str, Any]] = []

    async def scenario() -> dict[str, Any]:
        limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
        async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S, limits=limits) as client:
            stop = asyncio.Event()
            body = {"model": "generalist-70b", "messages": [{"role": "user", "content": "held"}]}
            held = asyncio.ensure_future(_send(client, "/v1/chat/completions", body))
            workers = [asyncio.ensure_future(_worker(client, w, results, stop)) for w in range(16)]
            while len(results) < 120 or fake.arrivals("generalist-70b") < 1:
                await asyncio.sleep(0.01)
            os.kill(service.pid, signal.SIGSTOP)
            late = [asyncio.ensure_future(_late(service.url, k, results)) for k in range(24)]
            await asyncio.sleep(0.5)  # the kernel queues the new connections and buffers every request
            os.kill(service.pid, signal.SIGTERM)
            os.kill(service.pid, signal.SIGCONT)
            await asyncio.sleep(0.5)  # the shutdown has begun while the held chat waits on its upstream
            fake.released.set()
            answer = await held
            await asyncio.wait_for(asyncio.gather(*workers, *late), CLIENT_TIMEOUT_S)
            return answer

    try:
        held = asyncio.run(scenario())
    finally:
        code, output = service.stop()
    assert code in (0, -15), output
    assert [r for r in results if "dropped" in r] == []
    assert held["status"] == 200 and FakeUpstreams.answer("generalist-70b") in held["text"]
    refused = [r for r in results if r["status"] == 503]
    assert refused and {r["status"] for r in results} == {200, 503}
    assert all(r["headers"]["retry-after"] == "1" and '"shutting_down"' in r["text"] for r in refused)
    ids, lines = _answered_lines([*results, held], tmp_path / "decisions.jsonl")
    assert sorted(ids) == sorted(lines)
    assert {lines[r["headers"]["x-request-id"]]["outcome"] for r in refused if r["path"] in DECIDING} == {
        "shutting_down"
    }


@pytest.mark.slow
def test_two_services_share_one_decision_log(model_dir: Path, fake: FakeUpstreams, tmp_path: Path) -> None:
    """Two services started on one config (one decision log), under load at once, write one whole line
    per request each: the log reads back line by line, with exactly the request ids both answered."""
    config = write_config(tmp_path / "router.yaml", fake, COSTS, budget=3.0)
    services = [ServiceProcess(model_dir, config, ENV).start() for _ in range(2)]
    loads: list[list[dict[str, Any]]] = [[], []]

    async def load(service: ServiceProcess, out: list[dict[str, Any]]) -> None:
        async with httpx.AsyncClient(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
            stop = asyncio.Event()
            workers = [asyncio.ensure_future(_worker(client, w, out, stop)) for w in range(8)]
            while len(out) < 150:
                await asyncio.sleep(0.01)
            stop.set()
            await asyncio.gather(*workers)

    async def both() -> None:
        await asyncio.gather(*(load(service, out) for service, out in zip(services, loads, strict=True)))

    try:
        asyncio.run(both())
    finally:
        outputs = [service.stop() for service in services]
    assert all(code in (0, -15) for code, _ in outputs), outputs
    results = loads[0] + loads[1]
    assert all(r.get("status") == 200 for r in results)
    ids, lines = _answered_lines(results, tmp_path / "decisions.jsonl")
    assert sorted(ids) == sorted(lines) and len(read_log(tmp_path / "decisions.jsonl")) == len(ids)
    assert len({rid[:24] for rid in ids}) == 2  # each service's ids carry its own random prefix
