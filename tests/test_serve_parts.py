"""The router service's parts that need no model or server: micro-batch isolation, the circuit
breaker, Retry-After, the request-body checks and the decision log's JSON (tests/test_serve.py
covers the whole service over HTTP)."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
from pydantic import ValidationError

from evalprism.serve.batcher import MicroBatcher
from evalprism.serve.decisions import DecisionLine, DecisionLog, json_line
from evalprism.serve.health import HealthBoard
from evalprism.serve.schemas import ChatCompletionRequest, check_values
from evalprism.serve.upstream import retry_after_seconds


def test_one_failing_item_fails_only_its_own_request() -> None:
    """16 concurrent items, one of which makes the batch function raise (as the tokenizer did on a
    lone surrogate): the 15 others get their results, in every round, and batches really were shared."""
    calls: list[int] = []

    def reciprocal(items: list[int]) -> list[float]:
        calls.append(len(items))
        return [1 / x for x in items]

    async def rounds() -> list[list[object]]:
        batcher: MicroBatcher[int, float] = MicroBatcher(reciprocal, window_s=0.05, max_batch=16)
        await batcher.start()
        out = []
        for _ in range(5):
            out.append(
                await asyncio.gather(
                    *(batcher.submit(0 if i == 9 else i + 1) for i in range(16)), return_exceptions=True
                )
            )
        await batcher.stop()
        return out

    for results in asyncio.run(rounds()):
        assert isinstance(results[9], ZeroDivisionError)
        assert [r for i, r in enumerate(results) if i != 9] == [1 / (i + 1) for i in range(16) if i != 9]
    assert max(calls) > 1  # the poisoned item really shared batches with innocent ones


def test_a_lone_item_never_waits_for_a_batch() -> None:
    """An item that finds the queue empty runs at once, whatever the window: with a 30 s window the old
    batcher held it 30 s. Concurrent items still share batches."""
    calls: list[int] = []

    def double(items: list[int]) -> list[int]:
        calls.append(len(items))
        return [2 * x for x in items]

    async def run() -> tuple[int, list[int]]:
        batcher: MicroBatcher[int, int] = MicroBatcher(double, window_s=30.0, max_batch=16)
        await batcher.start()
        alone = await asyncio.wait_for(batcher.submit(21), timeout=10)
        together = await asyncio.wait_for(asyncio.gather(*(batcher.submit(i) for i in range(16))), timeout=10)
        await batcher.stop()
        return alone, together

    alone, together = asyncio.run(run())
    assert alone == 42 and together == [2 * i for i in range(16)]
    assert calls[0] == 1 and max(calls[1:]) > 1


@pytest.mark.parametrize("inline", [True, False])
def test_batches_run_inline_when_the_batch_function_asks(inline: bool) -> None:
    """A batch function marked ``inline`` (the routing core of a static backbone) runs in the event
    loop's thread; any other in the batcher's worker thread. Failures are isolated either way."""
    import threading

    threads: set[int] = set()

    class Reciprocal:
        def __init__(self) -> None:
            self.inline = inline

        def __call__(self, items: list[int]) -> list[float]:
            threads.add(threading.get_ident())
            return [1 / x for x in items]

    async def run() -> tuple[int, list[object]]:
        batcher: MicroBatcher[int, float] = MicroBatcher(Reciprocal(), max_batch=8)
        await batcher.start()
        out = await asyncio.gather(*(batcher.submit(i) for i in range(4)), return_exceptions=True)
        await batcher.stop()
        return threading.get_ident(), out

    loop_thread, out = asyncio.run(run())
    assert isinstance(out[0], ZeroDivisionError) and out[1:] == [1.0, 0.5, 1 / 3]
    assert (threads == {loop_thread}) == inline and len(threads) == 1


def test_circuit_opens_after_threshold_failures_and_half_opens_after_the_cool_down() -> None:
    now = [100.0]
    board = HealthBoard(["a", "b"], threshold=3, cooldown_s=30.0, clock=lambda: now[0])
    board.failure(board.acquire("a"), "boom")
    board.failure(board.acquire("a"), "boom")
    assert board.state("a") == "closed"
    board.success(board.acquire("a"))  # a success in between resets the count
    for _ in range(3):
        board.failure(board.acquire("a"), "boom")
    assert board.state("a") == "open" and board.acquire("a") is None and board.acquire("b") is not None
    assert board.report()["a"].retry_in_s == 30.0 and board.report()["a"].consecutive_failures == 3
    now[0] += 29.9
    assert board.state("a") == "open"
    now[0] += 0.2
    assert board.state("a") == "half_open" and board.admits("a")
    trial = board.acquire("a")
    board.failure(trial, "still down")  # the trial failed: open for another cool-down
    assert board.state("a") == "open" and board.report()["a"].retry_in_s == 30.0
    now[0] += 31
    board.success(board.acquire("a"))
    assert board.state("a") == "closed" and board.report()["a"].consecutive_failures == 0


def test_a_half_open_circuit_gives_one_trial_ticket_at_a_time() -> None:
    now = [0.0]
    board = HealthBoard(["a"], threshold=1, cooldown_s=10.0, clock=lambda: now[0])
    board.failure(board.acquire("a"), "boom")
    assert board.acquire("a") is None
    now[0] = 10.0
    tickets = [board.acquire("a") for _ in range(16)]
    trial = tickets[0]
    assert trial is not None and trial.trial and tickets[1:] == [None] * 15
    assert board.blocked_by_trial("a") and board.acquire("a", force=True) is None
    board.release(trial)  # the trial's client left: no verdict, the slot is free again
    assert board.state("a") == "half_open" and board.report()["a"].consecutive_failures == 1
    second = board.acquire("a")
    assert second is not None and second.trial
    board.success(second)
    board.failure(second, "reported twice")  # a ticket reports once; the second report is ignored
    assert board.state("a") == "closed" and board.report()["a"].consecutive_failures == 0
    board.failure(board.acquire("a"), "boom")  # open again: only a forced request (no other candidate) gets in
    assert board.acquire("a") is None
    forced = board.acquire("a", force=True)
    assert forced is not None and forced.trial and board.acquire("a", force=True) is None


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    now = datetime(2026, 11, 24, 12, 0, 0, tzinfo=UTC)
    assert retry_after_seconds("7") == 7.0
    assert retry_after_seconds(format_datetime(datetime(2026, 11, 24, 12, 1, 30, tzinfo=UTC), usegmt=True), now) == 90.0
    assert retry_after_seconds("Tue, 24 Nov 2026 11:00:00 GMT", now) == 0.0  # in the past: retry now
    assert retry_after_seconds("soon") is None and retry_after_seconds(None) is None
    assert retry_after_seconds("inf") is None


@pytest.mark.parametrize(
    "body,kind,param",
    [
        ({"messages": [{"role": "user", "content": "cut \ud83d"}]}, "invalid_text", "messages.0.content"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "x\udc00"}]}]},
            "invalid_text",
            "messages.0.content.0.text",
        ),
        ({"messages": [{"role": "user", "content": "hi"}], "metadata": {"k\udbed": "v"}}, "invalid_text", "metadata"),
        (
            {"messages": [{"role": "user", "content": "hi"}], "temperature": float("nan")},
            "non_finite_number",
            "temperature",
        ),
        (
            {"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"5": float("-inf")}},
            "non_finite_number",
            "logit_bias.5",
        ),
    ],
)
def test_body_checks_name_the_place(body: dict, kind: str, param: str) -> None:
    with pytest.raises(ValidationError) as info:
        ChatCompletionRequest.model_validate(body)
    error = info.value.errors()[0]
    assert (error["type"], error["ctx"]["param"]) == (kind, param)


def test_valid_text_passes_the_checks() -> None:
    check_values({"messages": [{"content": "emoji \U0001f600 and accents é, 1.5e300"}], "n": 1, "t": 1e308})


def test_decision_log_lines_are_strict_json(tmp_path) -> None:
    assert json_line({"x": float("inf"), "y": [1.0, float("nan")], "z": 2.5}) == '{"x":null,"y":[1.0,null],"z":2.5}'
    log = DecisionLog(tmp_path / "d.jsonl")
    log.write(DecisionLine(endpoint="/v1/route", prompt_sha256="a", chosen="m", budget=float("inf")))
    log.close()

    def refuse(constant: str) -> None:
        raise ValueError(constant)

    line = json.loads((tmp_path / "d.jsonl").read_text(), parse_constant=refuse)
    assert line["budget"] is None and line["chosen"] == "m"


def _sse_response(lines: list[bytes]) -> httpx.Response:
    """A real httpx response whose body streams ``lines`` (what an upstream sends)."""

    async def body():
        for line in lines:
            yield line

    return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})


CHUNK = b'data: {"model": "up-m", "choices": [{"delta": {"content": "hi"}}]}\n\n'
USAGE = b'data: {"model": "up-m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\n'


@pytest.mark.parametrize(
    "lines,end",
    [
        ([CHUNK, USAGE, b"data: [DONE]\n\n"], "completed"),
        ([CHUNK, USAGE], "stream_broken"),  # the upstream closed without [DONE]
    ],
)
def test_a_relayed_stream_says_how_it_ended(lines: list[bytes], end: str) -> None:
    """A chat stream relayed: the candidate's name replaces the upstream's model id in every chunk (the
    id goes to the first chunk's evalprism), the usage chunk gets the realised cost, and the end says
    whether [DONE] came."""
    from evalprism.serve.apis.base import relay_events
    from evalprism.serve.apis.chat import ChatWatcher
    from evalprism.serve.upstream import Relayed

    async def relay() -> tuple[Relayed, bytes]:
        relayed = Relayed()
        watcher = ChatWatcher("m", {"decided": "m"}, lambda usage: usage["prompt_tokens"] * 0.5)
        out = b"".join([chunk async for chunk in relay_events(_sse_response(lines), watcher, relayed)])
        return relayed, out

    relayed, out = asyncio.run(relay())
    assert relayed.end == end and relayed.usage["completion_tokens"] == 2
    events = [json.loads(line[5:]) for line in out.decode().splitlines() if line.startswith("data: {")]
    assert events[0]["evalprism"] == {"decided": "m", "upstream_model": "up-m"}
    assert events[1]["evalprism"] == {"realised_cost": 1.5}
    assert [e["model"] for e in events] == ["m", "m"]


def test_a_stream_the_client_leaves_is_cut() -> None:
    from evalprism.serve.apis.base import relay_events
    from evalprism.serve.apis.chat import ChatWatcher
    from evalprism.serve.upstream import Relayed

    async def leave_after_one() -> tuple[Relayed, int]:
        relayed = Relayed()
        stream = relay_events(_sse_response([CHUNK, CHUNK, b"data: [DONE]\n\n"]), ChatWatcher("m", {}), relayed)
        first = await anext(stream)
        await stream.aclose()  # what Starlette does when the client disconnects or the server shuts down
        return relayed, len(first)

    relayed, sent = asyncio.run(leave_after_one())
    assert relayed.end == "cut" and sent > 0


_TWO = "models:\n  a: {base_url: 'http://127.0.0.1:9/v1', cost: 1}\n  b: {base_url: 'http://127.0.0.1:9/v1', cost: 2}\n"


@pytest.mark.parametrize(
    "text,message",
    [
        (
            "models: {a: {base_url: 'http://x/v1', cost: true}}\n",
            "models.a.cost: expected a number, not the boolean true",
        ),
        (_TWO + "budget: false\n", "budget: expected a number, not the boolean false"),
        (_TWO + "opponent: {a: true, b: 1}\n", "opponent.a: expected a number, not the boolean true"),
        ("models: {a: {base_url: 'http:///v1', cost: 1}}\n", "models.a.base_url: expected a URL with a host"),
        (
            "models: {a: {base_url: 'http://x:99999/v1', cost: 1}}\n",
            "models.a.base_url: expected a port number between 1 and 65535 after the host (got 'http://x:99999/v1')",
        ),
        ("models: {a: {base_url: 'http://x:80a/v1', cost: 1}}\n", "models.a.base_url: expected a port number"),
        ("models: {a: {base_url: 'http://x:/v1', cost: 1}}\n", "models.a.base_url: expected a port number"),
        ("models: {a: {base_url: 'http://x /v1', cost: 1}}\n", "models.a.base_url: expected a URL without spaces"),
        (_TWO + "router_name: ''\n", "router_name: expected a non-empty name"),
        (_TWO + "router_name: b\n", "router_name: expected a name that is not also a candidate's"),
        (_TWO + "timeout_s: .inf\n", "timeout_s: expected a finite number (got .inf)"),
        (_TWO + "breaker_cooldown_s: .inf\n", "breaker_cooldown_s: expected a finite number (got .inf)"),
        (_TWO + "connect_timeout_s: .inf\n", "connect_timeout_s: expected a finite number (got .inf)"),
        (_TWO + "batch_window_ms: .inf\n", "batch_window_ms: Input should be less than or equal to 1000 (got .inf)"),
        (_TWO + "batch_window_ms: 60000\n", "batch_window_ms: Input should be less than or equal to 1000 (got 60000)"),
        (
            _TWO + "  a: {base_url: 'http://127.0.0.1:9/v1', cost: 5}\n",
            "models.a: the key 'a' is given twice (lines 2 and 4); expected each key once",
        ),
        (
            "models:\n  a: {base_url: 'http://x/v1', cost: 1}\nbudget: 2\nbudget: 3\n",
            "budget: the key 'budget' is given twice (lines 3 and 4)",
        ),
    ],
)
def test_config_values_the_service_would_misuse_are_refused(tmp_path, text: str, message: str) -> None:
    """Each is refused by load_config with one message naming the file and the key path (before,
    a boolean cost was 1.0, a duplicate model the later one, a window of .inf a service never healthy)."""
    from evalprism.errors import EvalprismError
    from evalprism.serve.config import load_config

    path = tmp_path / "router.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EvalprismError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value), str(info.value)
    assert "more problem" not in str(info.value)


def test_config_limits_that_are_fine_pass(tmp_path) -> None:
    from evalprism.serve.config import load_config

    path = tmp_path / "router.yaml"
    path.write_text(
        _TWO.replace("127.0.0.1:9", "[::1]:65535") + "batch_window_ms: 1000\nrouter_name: auto\n"
        "timeout_s: 1\nopponent: {a: 1, b: 3}\n",
        encoding="utf-8",
    )
    config = load_config(path)
    assert config.batch_window_ms == 1000 and config.router_name == "auto" and config.timeout_s == 1.0
    assert config.models["a"].base_url == "http://[::1]:65535/v1" and config.opponent == {"a": 1.0, "b": 3.0}


def test_a_real_enospc_is_reported_and_the_decision_kept(tmp_path) -> None:
    """/dev/full fails every write with the kernel's ENOSPC: the log says why, keeps the decision
    (marked late, refused) and never raises anything but DecisionLogUnwritable."""
    import os

    from evalprism.serve.decisions import DecisionLogUnwritable

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    log = DecisionLog("/dev/full")
    with pytest.raises(DecisionLogUnwritable) as info:
        log.write(DecisionLine(endpoint="/v1/route", prompt_sha256="ab"))
    assert str(info.value) == "the decision log /dev/full cannot be written (the disk is full)"
    assert (log.error, log.unwritten, log.count) == ("the disk is full", 1, 0)
    assert not log.retry() and log.unwritten == 1
    with pytest.raises(DecisionLogUnwritable):
        log.require()
    log.close()


def test_decisions_kept_while_the_log_fails_are_bounded_and_counted(tmp_path, monkeypatch) -> None:
    from helpers import FillingDisk

    from evalprism.serve import decisions
    from evalprism.serve.decisions import DecisionLogUnwritable

    monkeypatch.setattr(decisions, "MAX_UNWRITTEN", 3)
    disk: list[FillingDisk] = []

    def full_disk(path):  # the log's file, on a disk that is full from the start
        if not disk:
            disk.append(FillingDisk(path))
            disk[0].full = True
        return disk[0]

    log = DecisionLog(tmp_path / "d.jsonl", opener=full_disk)
    for k in range(5):
        with pytest.raises(DecisionLogUnwritable):
            log.write(DecisionLine(endpoint="/v1/route", prompt_sha256=str(k)), answered=k == 4)
    assert (log.unwritten, log.dropped) == (3, 2)
    disk[0].full = False
    assert log.retry() and log.error is None and log.count == 3
    log.close()
    lines = [json.loads(line) for line in (tmp_path / "d.jsonl").read_text().splitlines()]
    assert [r["prompt_sha256"] for r in lines] == ["2", "3", "4"]  # the oldest two were dropped
    assert [r["late"]["answered"] for r in lines] == [False, False, True]


@pytest.mark.parametrize(
    "text,reason",
    [
        ('{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n', None),
        (
            '{"time":"t","endpoint":"/v1/chat/completions","prompt_sha256":"a","late":{"answered":true,"reason":"r"}}\n',
            None,
        ),
        ('{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n\n', "line 2 is not a JSON object"),
        ('{"_name_or_path": "x",\n "hidden_size": 384}\n', "line 1 is not a JSON object"),
        ('{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n[1, 2]\n', "line 2 is not a JSON object"),
        (
            '{"time":"t","endpoint":"/v1/leaderboard","prompt_sha256":"a"}\n',
            "line 1 is not a routing decision (expected time, endpoint and prompt_sha256)",
        ),
        ("models:\n  a: {cost: 1}\n", "line 1 is not a JSON object"),
    ],
)
def test_what_counts_as_a_decision_log(tmp_path, text: str, reason: str | None) -> None:
    from evalprism.serve.decisions import not_a_decision_log

    (tmp_path / "log.jsonl").write_text(text, encoding="utf-8")
    assert not_a_decision_log(tmp_path / "log.jsonl") == reason


def test_a_long_decision_log_is_recognised_by_its_head_and_tail(tmp_path) -> None:
    """A log of many decisions is read at both ends only (a service's log of millions of decisions must not
    cost seconds at start), and a foreign text appended after its first lines is still found at its end."""
    from evalprism.serve.decisions import not_a_decision_log

    line = '{"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}\n'
    log = tmp_path / "log.jsonl"
    log.write_text(line * 50, encoding="utf-8")
    assert not_a_decision_log(log, sample_lines=10) is None
    log.write_text(line * 50 + "models:\n  a: {cost: 1}\n", encoding="utf-8")
    assert not_a_decision_log(log, sample_lines=10) == "a line near its end is not a JSON object"
    log.write_text(line * 5 + "oops\n" + line * 50, encoding="utf-8")
    assert not_a_decision_log(log, sample_lines=10) == "line 6 is not a JSON object"


def test_the_output_rules_for_an_appended_file(tmp_path) -> None:
    from evalprism.errors import EvalprismError
    from evalprism.io.outputs import check_output_file

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    config = tmp_path / "router.yaml"
    config.write_text("models: {}\n")
    (tmp_path / "link.jsonl").symlink_to(model / "config.json")
    (tmp_path / "empty.jsonl").touch()
    (tmp_path / "foreign.txt").write_text("hello\n")
    inputs = [model, config]

    def refusal(path) -> str:
        with pytest.raises(EvalprismError) as info:
            check_output_file(path, "decision log", inputs=inputs, not_ours=lambda p: "line 1 is not mine")
        return str(info.value)

    assert refusal(model / "config.json").endswith(
        f"it is inside the input {model}, which appending would change; name a file outside the run's inputs"
    )
    assert refusal(model / "sub" / "new.jsonl").startswith(
        f"{model / 'sub' / 'new.jsonl'}: cannot be the decision log: it is inside the input {model}"
    )
    assert f"it is the input {config}" in refusal(config)
    assert "it is a symbolic link" in refusal(tmp_path / "link.jsonl")
    assert "it is a directory" in refusal(tmp_path)
    assert refusal(tmp_path / "foreign.txt") == (
        f"{tmp_path / 'foreign.txt'}: cannot be the decision log: the file exists and is not a decision log evalprism "
        "wrote (line 1 is not mine); evalprism appends only to its own decision logs; name a new file"
    )
    assert "foreign.txt is a file, not a directory" in refusal(tmp_path / "foreign.txt" / "d.jsonl")
    for fine in (tmp_path / "empty.jsonl", tmp_path / "new" / "d.jsonl"):
        assert check_output_file(fine, "decision log", inputs=inputs, not_ours=lambda p: "never") == fine
    assert (model / "config.json").read_text() == "{}\n" and not (tmp_path / "new").exists()


@pytest.mark.parametrize("budget", [None, 1.5, 2.6])
def test_routing_decisions_draw_as_numpy_choice_does(budget: float | None) -> None:
    """The batch's decisions, vectorised, are the per-prompt loop they replaced: each model drawn by
    ``Generator.choice(p=...)`` from the same seed (numpy as the oracle, draw for draw), the
    distribution's non-zero entries, and the affordable other candidates as fallbacks, best first."""
    import numpy as np
    from serve_harness import ConstantBackbone

    from evalprism.p2l.routing import route
    from evalprism.serve.config import ServeConfig
    from evalprism.serve.router import RoutingCore

    names = ["a", "b", "c", "d"]
    costs = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    config = ServeConfig.model_validate(
        {"models": {n: {"base_url": f"http://{n}.test/v1", "cost": c} for n, c in costs.items()}, "seed": 3}
    )
    core = RoutingCore(ConstantBackbone.model(names, [0.0] * 4), config)
    coefs = np.random.default_rng(0).normal(0.0, 1.0, (400, 4))
    decisions = core.decide(coefs, budget)

    rng = np.random.default_rng(3)
    want = route(
        coefs[:, core.columns], core.costs, budget, core.opponent, names=names, value=core.route_value
    )  # as the core calls it
    limit_of = np.inf if budget is None else budget
    assert len(decisions) == 400
    mixed = 0
    for k, d in enumerate(decisions):
        p = np.clip(want.probs[k], 0.0, None)
        pick = int(rng.choice(4, p=p / p.sum()))
        limit = max(limit_of, costs[names[pick]])
        order = [int(j) for j in np.argsort(-want.values[k], kind="stable") if j != pick and costs[names[j]] <= limit]
        assert d.chosen == names[pick]
        assert d.probs == {names[j]: float(p[j]) for j in np.flatnonzero(p > 0)}
        assert d.fallbacks == tuple(names[j] for j in order)
        assert d.expected_winrate == float(want.expected_winrate[k])
        assert d.router_coef == float(want.router_coef[k]) and d.expected_cost == float(want.expected_cost[k])
        mixed += len(d.probs) > 1
    assert budget is None or mixed > 0  # a budget between costs mixes two models: the draw is exercised


# --- the decision-log line: one versioned model, written by line_json and read back by read_line ---

#: a chat line exactly as the service wrote it before lines carried schema_version (version 1)
_V1_CHAT_LINE = (
    '{"time":"2025-06-01T12:00:00.123456+00:00","endpoint":"/v1/chat/completions","request_id":"req_1",'
    '"stream":false,"routed":true,"decided":"alpha","distribution":{"alpha":0.75,"beta":0.25},"budget":null,'
    '"expected_winrate":0.62,"router_coef":0.4,"expected_cost":1.5,"prompt_sha256":"ab12","routing_ms":3.21,'
    '"model":"beta","attempts":[{"model":"alpha","status":500,"error":"alpha: upstream answered 500",'
    '"latency_ms":12.5,"retry_after":null,"skipped":false,"busy":false},{"model":"beta","status":200,'
    '"error":null,"latency_ms":40.0,"retry_after":null,"skipped":false,"busy":false}],"status":200,'
    '"realised_cost":0.002,"outcome":"completed","latency_ms":55.5}'
)


def test_a_decision_line_round_trips_with_only_the_fields_that_apply(tmp_path) -> None:
    """A stream's line, written late, goes through the log's file and comes back equal; the JSON has
    schema_version first and none of the /v1/route fields (absent, not null), while a field that applies
    but has no value (no budget) is written as null."""
    from evalprism.serve.decisions import SCHEMA_VERSION, AttemptRecord, LateWrite, line_json, read_log

    line = DecisionLine(
        endpoint="/v1/chat/completions",
        request_id="req_7",
        client_retry=2,
        prompt_sha256="cd34",
        routed=False,
        decided="beta",
        routing_ms=0.5,
        stream=True,
        model="beta",
        attempts=[AttemptRecord(model="beta", status=200, latency_ms=9.75)],
        status=200,
        outcome="stream_broken",
        realised_cost=None,
        bytes_relayed=120,
        stream_error="upstream stream broke off (ReadError)",
        latency_ms=80.25,
        late=LateWrite(answered=True, reason="the disk is full"),
    )
    written = json.loads(line_json(line))
    assert list(written)[:5] == ["schema_version", "time", "endpoint", "request_id", "client_retry"]
    assert written["schema_version"] == SCHEMA_VERSION == 3 and written["client_retry"] == 2
    assert written["realised_cost"] is None and "budget" not in written and "chosen" not in written
    assert written["attempts"] == [
        {"model": "beta", "status": 200, "error": None, "latency_ms": 9.75, "retry_after": None}
        | {"skipped": False, "busy": False, "starved": False}
    ]
    (tmp_path / "d.jsonl").write_text(line_json(line) + "\n" + line_json(line) + "\n", encoding="utf-8")
    assert read_log(tmp_path / "d.jsonl") == [line, line]
    assert datetime.fromisoformat(line.time).tzinfo == UTC


def test_a_line_written_before_schema_version_is_read_as_version_1(tmp_path) -> None:
    """A line of the earlier format (no schema_version) reads with its own values, as version 1; a file
    holding such lines and current ones is still this service's log (it appends to it)."""
    from evalprism.serve.decisions import line_json, not_a_decision_log, read_line

    old = read_line(_V1_CHAT_LINE)
    assert old.schema_version == 1
    assert (old.decided, old.model, old.status, old.outcome, old.realised_cost) == (
        "alpha",
        "beta",
        200,
        "completed",
        0.002,
    )
    assert old.distribution == {"alpha": 0.75, "beta": 0.25} and old.budget is None
    assert [(a.model, a.status, a.error) for a in old.attempts or []] == [
        ("alpha", 500, "alpha: upstream answered 500"),
        ("beta", 200, None),
    ]
    assert old.bytes_relayed is None and old.chosen is None  # not on a plain chat line
    route = DecisionLine(endpoint="/v1/route", prompt_sha256="ef", chosen="alpha", latency_ms=1.0)
    (tmp_path / "mixed.jsonl").write_text(_V1_CHAT_LINE + "\n" + line_json(route) + "\n", encoding="utf-8")
    assert not_a_decision_log(tmp_path / "mixed.jsonl") is None


@pytest.mark.parametrize(
    "text,reason",
    [
        (
            '{"schema_version":4,"time":"t","endpoint":"/v1/route","prompt_sha256":"a"}',
            "line 1 was written by a newer evalprism (decision log schema_version 4; this one reads up to 3)",
        ),
        (
            '{"time":"t","endpoint":"/v1/route","prompt_sha256":"a","status":"fine"}',
            "line 1 is not a routing decision of this log (status: Input should be a valid integer, "
            "unable to parse string as an integer)",
        ),
        (
            '{"time":"t","endpoint":"/v1/route","prompt_sha256":"a","tokens":3}',
            "line 1 is not a routing decision of this log (tokens: Extra inputs are not permitted)",
        ),
        (
            '{"time":"t","endpoint":"/v1/route"}',
            "line 1 is not a routing decision (expected time, endpoint and prompt_sha256)",
        ),
    ],
)
def test_a_line_of_another_schema_is_not_this_logs(tmp_path, text: str, reason: str) -> None:
    from evalprism.serve.decisions import not_a_decision_log

    (tmp_path / "log.jsonl").write_text(text + "\n", encoding="utf-8")
    assert not_a_decision_log(tmp_path / "log.jsonl") == reason


# --- the upstream failure kinds: one exception class each, giving the attempt's outcome and metric label ---


def _upstreams(handler, **settings):
    from evalprism.serve.config import ServeConfig, UpstreamConfig
    from evalprism.serve.upstream import Upstreams

    config = ServeConfig(
        models={name: UpstreamConfig(base_url=f"http://{name}.test/v1", cost=1.0) for name in ("alpha", "beta")},
        pool_timeout_s=0.25,
        **settings,
    )
    return Upstreams(config, {"alpha": None, "beta": None}, httpx.MockTransport(handler))


def _counted(attempts) -> dict[tuple[str, str], float]:
    """The attempts as /metrics counts them: (metric, result label or '') -> value, for upstream alpha."""
    from evalprism.serve.metrics import Metrics

    metrics = Metrics()
    metrics.observe_attempts(attempts)
    counted = {}
    for metric in metrics.registry.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels.get("upstream") == "alpha" and sample.value:
                counted[(sample.name, sample.labels.get("result", ""))] = sample.value
    return counted


_NOT_JSON = httpx.Response(200, text="<html>down</html>")
_ANSWER = {"id": "c", "object": "chat.completion", "choices": []}


@pytest.mark.parametrize(
    "answer,kind,outcome,error",
    [
        (httpx.ConnectError("refused"), "UpstreamUnreachable", "failed", "alpha: upstream unreachable (ConnectError)"),
        (httpx.ReadTimeout("slow"), "UpstreamTimeout", "failed", "alpha: upstream timed out"),
        (httpx.Response(503), "UpstreamStatusError", "failed", "alpha: upstream answered 503"),
        (
            httpx.Response(404),
            "UpstreamStatusError",
            "failed",
            "alpha: upstream answered 404: no such endpoint or model there (check its base_url and upstream_model)",
        ),
        (_NOT_JSON, "UpstreamInvalidBody", "failed", "alpha: upstream answered 200 with a body that is not JSON"),
        (
            httpx.Response(200, json=[1]),
            "UpstreamInvalidBody",
            "failed",
            "alpha: upstream answered a JSON list, expected an object",
        ),
        (
            httpx.Response(429, headers={"retry-after": "7"}),
            "UpstreamRateLimited",
            "rate_limited",
            "alpha: upstream answered 429",
        ),
        (
            httpx.PoolTimeout("no connection"),
            "UpstreamBusy",
            "busy",
            "alpha: busy: all 128 connections of the router to this upstream (its max_connections) stayed in use "
            "for 0.25 s (pool_timeout_s)",
        ),
        (httpx.Response(400, json={"error": {}}), None, "ok", None),  # the client's request: passed back as it is
        (httpx.Response(200, json=_ANSWER), None, "ok", None),
    ],
)
def test_each_failure_kind_is_its_own_class_outcome_and_metric(answer, kind, outcome, error) -> None:
    """What the upstream does decides the exception class, the attempt's outcome (which is its metric
    label, and its record's skipped/busy flags), and whether it counts against the circuit and as an
    upstream error: only the upstream's own failures (``failed``) do."""
    from evalprism.serve import upstream

    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, Exception):
            raise answer
        return answer

    if kind is not None:
        with pytest.raises(getattr(upstream, kind)) as raised:
            asyncio.run(_upstreams(handler)._attempt("alpha", {}, stream=False))
        assert type(raised.value) is getattr(upstream, kind) and raised.value.outcome == outcome
        assert isinstance(raised.value, upstream.UpstreamFailure) and str(raised.value) == error
    upstreams = _upstreams(handler, max_attempts=1)
    attempts: list[upstream.Attempt] = []
    asyncio.run(upstreams.complete(["alpha", "beta"], {}, attempts=attempts))
    assert [(a.model, a.outcome, a.error) for a in attempts] == [("alpha", outcome, error)]
    assert (attempts[0].record()["skipped"], attempts[0].record()["busy"]) == (False, outcome == "busy")
    assert upstreams.health.report()["alpha"].consecutive_failures == (outcome == "failed")
    errors = {("evalprism_upstream_errors_total", ""): 1.0} if outcome == "failed" else {}
    assert _counted(attempts) == {("evalprism_upstream_attempts_total", outcome): 1.0} | errors


def test_an_upstream_whose_circuit_is_open_is_skipped() -> None:
    """breaker_failures 1: alpha's one failure opens its circuit; the next request skips it (outcome
    skipped, the record's ``skipped`` flag, no upstream error counted) and beta answers."""
    from evalprism.serve.upstream import Attempt

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500) if request.url.host == "alpha.test" else httpx.Response(200, json=_ANSWER)

    upstreams = _upstreams(handler, breaker_failures=1)
    asyncio.run(upstreams.complete(["alpha", "beta"], {}))
    attempts: list[Attempt] = []
    answered = asyncio.run(upstreams.complete(["alpha", "beta"], {}, attempts=attempts))
    assert answered.model == "beta" and not answered.failed_over
    assert [(a.model, a.outcome) for a in attempts] == [("alpha", "skipped"), ("beta", "ok")]
    assert attempts[0].error == "alpha: skipped, its circuit is open after 1 failures"
    assert attempts[0].record()["skipped"] and not attempts[0].record()["busy"]
    assert _counted(attempts[:1]) == {("evalprism_upstream_attempts_total", "skipped"): 1.0}


def test_an_attempt_cancelled_as_the_client_leaves_is_abandoned() -> None:
    """The request is cancelled while alpha is answering: the attempt is on record as abandoned (so
    counted under that label, not as alpha's error), and alpha's circuit is left as it was."""
    from evalprism.serve.upstream import Attempt

    async def scenario(attempts: list[Attempt]) -> None:
        called = asyncio.Event()

        async def handler(request: httpx.Request) -> httpx.Response:
            called.set()
            await asyncio.Event().wait()  # never answers
            raise AssertionError("unreachable")

        upstreams = _upstreams(handler)
        task = asyncio.ensure_future(upstreams.complete(["alpha", "beta"], {}, attempts=attempts))
        await called.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert upstreams.health.report()["alpha"].state == "closed"
        assert upstreams.health.admits("alpha") and upstreams.health.report()["alpha"].consecutive_failures == 0

    attempts: list[Attempt] = []
    asyncio.run(scenario(attempts))
    assert [(a.model, a.outcome, a.error) for a in attempts] == [
        ("alpha", "abandoned", "alpha: abandoned: the client left before the upstream answered")
    ]
    assert _counted(attempts) == {("evalprism_upstream_attempts_total", "abandoned"): 1.0}
