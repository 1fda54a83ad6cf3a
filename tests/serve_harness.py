"""Test and benchmark harness for the router service, over real HTTP on loopback.

- :class:`FakeUpstreams`: one small server standing in for the paid APIs. It answers, for every
  candidate, ``POST /<model>/v1/chat/completions`` (OpenAI Chat Completions), ``/<model>/v1/responses``
  (OpenAI Responses) and ``/<model>/v1/messages`` (Anthropic Messages), each streaming and not in its
  API's own event format, usage included, with tool calls when told to (``tool_rounds``: that many
  calls after each human turn before a text answer), and can be told, per model, to fail with a 500 or
  a 529, to refuse with a 429 and ``Retry-After``, to answer 400, 401, 403, 404 or 422, to stall (until
  it shuts down: past any timeout of the service, however slow the machine), to hang until the test
  releases it, to break a stream off, or to send a stream's first event and then hang. Messages
  threads are held by the upstream that answered (a continuation elsewhere is ``thread_not_found``,
  as the real API answers a thread it does not hold). It records what
  it received (to check the path, upstream model name, key and headers the service sent). Only this stands in for something: the service
  under test is evalprism's own, started with ``evalprism serve``, or in-process by
  :class:`InProcessService` (the same app on a real port, with a tiny stand-in P2L model).
- :class:`ServiceProcess`: ``evalprism serve`` in a subprocess on a free port, ready once /health
  answers, however long that takes while the process runs.

Clients of the service use :data:`CLIENT_TIMEOUT_S`: a bound for a hang only, never for a slow answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Self

import httpx
import uvicorn
import yaml
from fake_apis import PATHS, SHAPES, USAGE, Messages, Shape
from helpers import HANG_LIMIT_S, ProcessExited, wait_while_running
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

CLIENT_TIMEOUT_S = HANG_LIMIT_S
"""httpx/openai timeout of a test's request to the service: a slow machine answers late, not never."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LoopbackServer:
    """An ASGI app served by uvicorn on a free loopback port in a daemon thread of the test process. As a
    context manager it returns once uvicorn says it listens (an error if its thread ends first), and at
    exit asks the server to stop and waits for its thread."""

    STARTING = "the server"  # what the error names when it does not start
    POLL_S = 0.01  # how often the start is checked

    def __init__(self, app: Any, **config: Any) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", **config)
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + HANG_LIMIT_S
        while not self.server.started:  # uvicorn's own signal that it listens
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.STARTING} did not start")
            time.sleep(self.POLL_S)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=HANG_LIMIT_S)


class FakeUpstreams(LoopbackServer):
    """Chat Completions, Responses and Messages for every model under ``/<model>/v1``
    (the answers' shapes: tests/fake_apis.py)."""

    STARTING = "the fake upstream server"
    POLL_S = 0.02

    RETRY_AFTER: ClassVar[dict[str, str]] = {
        "poet-7b": "7",
        "calc-13b": "3",
        "coder-34b": "11",
        "generalist-70b": "5",
    }  # else "2"
    USAGE: ClassVar[dict[str, int]] = USAGE

    def __init__(self) -> None:
        # model -> "ok" (default) | "fail" (500) | "overloaded" (529) | "rate_limited" (429, Retry-After: RETRY_AFTER)
        #          | "slow" (no answer until the server shuts down) | "break" (a stream stops after its first event, the connection dropped)
        #          | "hang" (no answer until release() or shutdown) | "hang_after_first" (a stream's first event, then hang)
        #          | "status:NNN" (that status with an error body in the API's shape)
        self.behaviour: dict[str, str] = {}
        self.received: list[dict[str, Any]] = []
        self.released = threading.Event()
        self.tool_call = False  # answer a conversation whose last turn is the user's with a tool call
        self.tool_rounds = 0  # tool calls after each human message before a text answer (at least tool_call's 1)
        self.issued: dict[str, str] = {}  # Responses id -> the model that issued it
        self.check_previous = True  # refuse a previous_response_id another model issued, as OpenAI does
        # Messages threads: message id -> (the model holding it, the thread's messages up to and with it)
        self.threads: dict[str, tuple[str, list[dict[str, Any]]]] = {}
        routes = [Route(f"/{{model}}/v1/{path}", self._endpoint(api), methods=["POST"]) for api, path in PATHS.items()]
        super().__init__(Starlette(routes=routes), lifespan="off")

    def reset(self) -> None:
        """Forget every behaviour and request of earlier tests; hanging answers wait again."""
        self.behaviour.clear()
        self.received.clear()
        self.released.clear()
        self.issued.clear()
        self.threads.clear()
        self.tool_call = False
        self.tool_rounds = 0
        self.check_previous = True

    def base_url(self, model: str) -> str:
        return f"http://127.0.0.1:{self.port}/{model}/v1"

    @staticmethod
    def answer(model: str) -> str:
        return f"an answer from {model}"

    def _endpoint(self, api: str) -> Any:
        async def endpoint(request: Request) -> Response:
            return await self._serve(request, SHAPES[api])

        return endpoint

    async def _serve(self, request: Request, shape: Shape) -> Response:
        model = request.path_params["model"]
        body = await request.json()
        self.received.append(
            {
                "api": shape.name,
                "path_model": model,
                "body": body,
                "authorization": request.headers.get("authorization"),
                "headers": dict(request.headers),
            }
        )
        behaviour = self.behaviour.get(model, "ok")
        refused = await self._refusal(shape, model, behaviour, body)
        if refused is not None:
            return refused
        thread = body.get("thread") if isinstance(shape, Messages) else None
        history: list[dict[str, Any]] = []
        if isinstance(thread, dict) and thread.get("type") == "continue":
            held = self.threads.get(thread.get("previous_message_id", ""))
            if held is None or held[0] != model:  # held by another upstream, or lost
                return JSONResponse(Messages.thread_not_found(thread.get("previous_message_id", "")), status_code=404)
            history = held[1]
        seen = {**body, "messages": [*history, *body["messages"]]} if history else body
        call = shape.next_call(seen, max(self.tool_rounds, int(self.tool_call)))
        rid = f"resp_{model}_{len(self.issued) + 1}" if shape.name == "responses" else f"msg_{len(self.received)}"
        self.issued[rid] = model
        if isinstance(thread, dict) and isinstance(shape, Messages):
            self.threads[rid] = (model, [*seen["messages"], shape.reply(self.answer(model), call)])
        if body.get("stream"):
            events = shape.events(body["model"], self.answer(model), call, rid, body)
            return StreamingResponse(self._stream(events, behaviour), media_type="text/event-stream")
        return JSONResponse(shape.answer(body["model"], self.answer(model), call, rid))

    async def _refusal(self, shape: Shape, model: str, behaviour: str, body: dict[str, Any]) -> Response | None:
        """The failure ``behaviour`` asks for (after waiting, for slow and hang), or None to answer."""
        if behaviour in ("fail", "overloaded"):
            status = 500 if behaviour == "fail" else 529
            return JSONResponse(shape.error(status, "upstream exploded"), status_code=status)
        if behaviour == "rate_limited":
            retry = {"retry-after": self.RETRY_AFTER.get(model, "2")}
            return JSONResponse(shape.error(429, "slow down"), status_code=429, headers=retry)
        if behaviour.startswith("status:"):
            status = int(behaviour.split(":")[1])
            return JSONResponse(shape.error(status, f"fake upstream says {status}"), status_code=status)
        previous = body.get("previous_response_id")
        if (
            previous is not None and self.check_previous and self.issued.get(previous) != model
        ):  # as OpenAI: ids are per account
            message = f"Previous response with id '{previous}' not found."
            return JSONResponse(shape.error(400, message), status_code=400)
        if behaviour == "slow":  # stalls past any timeout of the service; released only to let the server exit
            while not self.server.should_exit:
                await asyncio.sleep(0.05)
        if behaviour == "hang":
            await self._hang()
        return None

    async def _hang(self) -> None:
        """Wait until the test releases the upstream (or the server shuts down)."""
        while not (self.released.is_set() or self.server.should_exit):
            await asyncio.sleep(0.01)

    def arrivals(self, model: str) -> int:
        """How many requests reached ``model``'s upstream so far."""
        return sum(r["path_model"] == model for r in list(self.received))

    async def _stream(self, events: Iterator[str], behaviour: str) -> Any:
        """The API's events; after the first, a stream told to hang or break does so."""
        for i, event in enumerate(events):
            yield event
            if i == 0 and behaviour == "hang_after_first":
                await self._hang()
            if i == 0 and behaviour == "break":
                raise ConnectionResetError("the fake upstream breaks the stream off")  # uvicorn drops the connection


def write_config(
    path: Path,
    upstreams: FakeUpstreams,
    costs: dict[str, float],
    prices: dict[str, tuple[float, float]] | None = None,
    apis: list[str] | None = None,
    **extra: Any,
) -> Path:
    """A router.yaml for candidates ``costs`` served by ``upstreams`` (key in $FAKE_UPSTREAM_KEY);
    ``prices``: per-token (prompt, completion) prices of some of them; ``apis``: the APIs every
    candidate serves (default: the config's default, chat)."""
    prices = prices or {}
    config = {
        "models": {
            name: {
                "base_url": upstreams.base_url(name),
                "upstream_model": f"up-{name}",
                "api_key_env": "FAKE_UPSTREAM_KEY",
                "cost": cost,
                **({"apis": apis} if apis is not None else {}),
                **(
                    {"prompt_token_price": prices[name][0], "completion_token_price": prices[name][1]}
                    if name in prices
                    else {}
                ),
            }
            for name, cost in costs.items()
        },
        **extra,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


class ServiceProcess:
    """``evalprism serve MODEL_DIR --config CONFIG`` on a free loopback port."""

    def __init__(self, model_dir: Path, config: Path, env: dict[str, str], *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cli = Path(sys.executable).with_name("evalprism")
        self.cmd = [
            str(cli),
            "serve",
            str(model_dir),
            "--config",
            str(config),
            "--port",
            str(self.port),
            "--log-level",
            "warning",
            *args,
        ]
        self.env = {**os.environ, **env}
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> ServiceProcess:
        """Start the service and return once /health answers 200: no deadline while the process runs
        (loading a model on a busy machine takes what it takes); its output at once if it exits first,
        and a failure after :data:`HANG_LIMIT_S` of running without answering (a hang)."""
        self.proc = subprocess.Popen(
            self.cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            wait_while_running(self._healthy, self.proc, "evalprism serve answering /health")
        except ProcessExited as exc:
            raise RuntimeError(f"{exc}:\n{self.proc.stdout.read()}") from None
        except TimeoutError:
            _, output = self.stop()
            raise RuntimeError(
                f"evalprism serve ran {HANG_LIMIT_S:.0f} s without answering /health:\n{output}"
            ) from None
        return self

    def _healthy(self) -> bool:
        try:  # refused until uvicorn listens; a slow answer is waited for
            return httpx.get(self.url + "/health", timeout=CLIENT_TIMEOUT_S).status_code == 200
        except httpx.TransportError:
            time.sleep(0.1)
            return False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> tuple[int, str]:
        """SIGTERM and wait: (exit code, output)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=HANG_LIMIT_S)  # a graceful shutdown, however slow
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return self.proc.returncode, out


@contextmanager
def running_service(model_dir: Path, config: Path, env: dict[str, str], *args: str) -> Iterator[ServiceProcess]:
    service = ServiceProcess(model_dir, config, env, *args).start()
    try:
        yield service
    finally:
        service.stop()


class ConstantBackbone:
    """A stand-in P2L backbone for tests of the service's HTTP behaviour, not of P2L: every prompt gets
    the same one-dimensional feature, so the leaderboard is the head's bias and every routed request
    has the same decision and failover order (the order of ``bias``, best first)."""

    @staticmethod
    def model(models: list[str], bias: list[float]) -> Any:
        import torch

        from evalprism.p2l.backbones import Backbone
        from evalprism.p2l.model import CoefficientHead, P2LModel

        class _Constant(Backbone):
            spec, dim, trainable = "constant", 1, False

            def features(self, prompts: Any) -> torch.Tensor:
                return torch.ones((len(prompts), 1))

        head = CoefficientHead(1, len(models), "bt")
        with torch.no_grad():
            head.linear.bias.copy_(torch.tensor(bias))
        return P2LModel(_Constant(), head, models, {"outcome_model": "bt", "models": models})


class InProcessService(LoopbackServer):
    """The service's app (:func:`evalprism.serve.app.create_app`) served by uvicorn on a free loopback
    port in a thread of the test process: real HTTP, started in well under a second. Each one is a
    new app, with its own circuits, metrics, batcher and decision log: tests share none of them."""

    STARTING = "the in-process service"

    def __init__(
        self,
        model: Any,
        config_path: Path,
        log: Any,
        upstream_keys: dict[str, str | None],
        api_keys: tuple[str, ...] = (),
    ) -> None:
        """``log``: the decision log's path, or an open :class:`~evalprism.serve.decisions.DecisionLog`;
        ``api_keys``: the bearer tokens the service accepts (none: no auth)."""
        from evalprism.serve.app import create_app
        from evalprism.serve.config import Secrets, load_config

        config = load_config(config_path, model.models)
        app = create_app(model, config, Secrets(api_keys, upstream_keys), decision_log=log, precision="float32")
        super().__init__(app)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path: Path = Path(getattr(log, "path", log))
        self.app = app

    def starve(self, seconds: float) -> None:
        """Block the service's event loop for ``seconds`` from now, as CPU starvation would: a synchronous
        sleep run in its thread, through the loop the service's lag sampler measures (a test-only way in)."""
        loop = self.app.state.service.loop_lag.loop
        loop.call_soon_threadsafe(time.sleep, seconds)

    def log_lines(self) -> list[dict[str, Any]]:
        """The decision log's lines as written, each checked to read back as the service's own
        (:func:`~evalprism.serve.decisions.read_line`: its declared schema, of the current version)."""
        from evalprism.serve.decisions import SCHEMA_VERSION, read_line

        text = self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""
        lines = text.splitlines()
        assert all(read_line(line).schema_version == SCHEMA_VERSION for line in lines)
        return [json.loads(line) for line in lines]

    def log_line(self, request_id: str) -> dict[str, Any]:
        """The decision log's line of ``request_id``, once written (a stream's is written when it ends)."""
        deadline = time.monotonic() + HANG_LIMIT_S
        while True:
            found = [r for r in self.log_lines() if r.get("request_id") == request_id]
            if found:
                return found[-1]
            if time.monotonic() > deadline:
                raise AssertionError(f"no decision log line for request {request_id}")
            time.sleep(0.01)


# --- a service with the constant stand-in model, and what it reports -------------------------------

#: the candidates of :func:`constant_service`, best first: every routed request tries them in this order
MODELS = ["alpha", "beta", "gamma", "delta"]
ORDER = MODELS[:3]  # the routed failover order of constant_service (max_attempts 3)


def user(text: str) -> list[dict[str, Any]]:
    """A chat conversation of one user message."""
    return [{"role": "user", "content": text}]


COSTS = dict.fromkeys(MODELS, 1.0)


def topic_model(root: Path) -> Path:
    """A small P2L model really trained (frozen minilm, 3,000 simulated battles over three topics whose
    leaderboards disagree), saved in ``root``: the model `evalprism serve` runs in the tests."""
    from evalprism.p2l import TrainOptions, train_model
    from evalprism.p2l.simulate import simulate_topic_battles

    trained = train_model(
        simulate_topic_battles(3000, seed=0), TrainOptions(seed=0), cache_dir=str(root / "cache"), progress=False
    )
    return trained.save(root / "model")


def constant_service(fake: FakeUpstreams, tmp_path: Path, **settings: Any) -> InProcessService:
    """An in-process service over ``fake`` with the constant stand-in model (routed order alpha, beta,
    gamma, delta); ``settings``: config keys beyond its defaults (a 30 s upstream timeout, circuits that
    stay open an hour, seed 0)."""
    settings = {"timeout_s": 30.0, "breaker_cooldown_s": 3600.0, "seed": 0, **settings}
    config = write_config(tmp_path / "router.yaml", fake, COSTS, **settings)
    model = ConstantBackbone.model(MODELS, [3.0, 2.0, 1.0, 0.0])
    return InProcessService(model, config, tmp_path / "decisions.jsonl", dict.fromkeys(MODELS, "upstream-key"))


def health(svc: InProcessService | ServiceProcess) -> dict[str, Any]:
    return httpx.get(svc.url + "/health", timeout=CLIENT_TIMEOUT_S).json()


def metric_values(svc: InProcessService | ServiceProcess, name: str) -> dict[str, float]:
    """The samples of metric ``name`` on ``/metrics``, by their label text (``upstream="alpha"``; "" if none)."""
    out = {}
    for line in httpx.get(svc.url + "/metrics", timeout=CLIENT_TIMEOUT_S).text.splitlines():
        if line.startswith((name + "{", name + " ")):
            labels = line[len(name) :].split("}")[0].lstrip("{") if "{" in line else ""
            out[labels] = float(line.rsplit(" ", 1)[1])
    return out


def attempt_counts(svc: InProcessService, upstream: str) -> dict[str, float]:
    """/metrics' upstream attempts of ``upstream`` by result, and its upstream errors as ``errors``."""
    counts = {}
    for labels, value in metric_values(svc, "evalprism_upstream_attempts_total").items():
        if f'upstream="{upstream}"' in labels:
            counts[labels.split('result="')[1].split('"')[0]] = value
    errors = metric_values(svc, "evalprism_upstream_errors_total").get(f'upstream="{upstream}"')
    if errors is not None:
        counts["errors"] = errors
    return counts
