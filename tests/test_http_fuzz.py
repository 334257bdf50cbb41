"""Fuzz a real session's HTTP listener from protocol/openapi.json with schemathesis.

A real `python -m sidecar` child runs an `ask`-mode session (no tools that
act, only update_plan: no generated message can run a shell command; `/sleep` and `/fail`, which the
offline provider treats specially, are filtered out). Schemathesis generates
requests for every documented operation, schema-valid and schema-violating,
with and without the bearer token, and every answer must conform to the
document. Afterwards the sidecar, the fuzzed session and a bystander session
must be as healthy as before.

Schemathesis's client is synchronous (`requests`), so each batch runs in a
worker thread while the event loop keeps reading the sidecar's notifications
(a blocked reader would let the child's stdout pipe fill up).

`GET /agent/events` is an endless stream: schemathesis reads an event stream
until the read times out, so its cases get a short timeout, and the bytes read
are parsed as SSE frames here as well.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from harness import Sidecar
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import load_all_checks
from schemathesis.errors import FailureGroup

OPENAPI = Path(__file__).resolve().parent.parent / "protocol" / "openapi.json"
EXAMPLES = 40  # per operation, per generation mode, per token variant
EVENT_EXAMPLES = 12  # idle event streams cost EVENT_TIMEOUT each
EVENT_TIMEOUT = (5.0, 0.25)  # (connect, read): an idle stream is cut after 0.25 s of silence
REQUEST_TIMEOUT = 10.0
# Each run explores new inputs; a failure report names the seed to replay it with.
SEED = int(os.environ.get("HTTP_FUZZ_SEED") or random.randrange(2**32))
EVENTS = "GET /agent/events"
# Without extra parameters or credentials to spoil, these have nothing to make invalid.
NEGATIVE_CAN_BE_EMPTY = (
    "status negative token",
    "abort negative token",
    "GET /agent/permissions negative token",
)
LABELS = {
    "POST /agent/send",
    "GET /agent/status",
    "POST /agent/abort",
    "GET /agent/messages",
    "GET /agent/changes",
    EVENTS,
    "POST /agent/resize",
    "GET /agent/permissions",
    "POST /agent/permissions",
}

# Every answer: a documented status and content type, a body matching the
# documented schema, and never a server error (5xx; /fail, the one scripted 502,
# is never sent).
CONFORMANCE = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
# With the token: what the document calls valid is accepted, what it calls invalid is refused.
ACCEPTANCE = ("positive_data_acceptance", "negative_data_rejection")


def _schema(*, strict: bool) -> Any:
    """The document as schemathesis reads it. `strict`: generate only the parameters
    the document declares and no security parameters (the test supplies the token),
    so that "valid" and "invalid" mean exactly what the document says."""
    schema = schemathesis.openapi.from_path(str(OPENAPI))
    if strict:
        schema.config.generation.update(
            allow_extra_parameters=False, with_security_parameters=False
        )
    return schema


def _operations(schema: Any) -> dict[str, Any]:
    operations = {result.ok().label: result.ok() for result in schema.get_all_operations()}
    assert set(operations) == LABELS, f"the document's operations changed: {sorted(operations)}"
    return operations


def _checks(names: tuple[str, ...]) -> list[Any]:
    load_all_checks()
    from schemathesis.checks import CHECKS

    return list(CHECKS.get_by_names(list(names)))


def _harmless(case: Any) -> bool:
    """Keep messages the offline provider would sleep on (`/sleep inf`), fail on,
    or (in a mode with tools) run as a command, out of the fuzzing."""
    body = case.body
    if not isinstance(body, dict) or not isinstance(body.get("message"), str):
        return True
    return not body["message"].strip().startswith(("/sleep", "/fail", "$ ", "/bash "))


def _as_text(value: Any) -> str:
    # A generated object or array is sent as an empty value.
    return "" if isinstance(value, dict | list) else str(value)


def _replay_point_leniency(case: Any) -> bool:
    """Whether an events request that violates the document is rightly served anyway:
    a valid Last-Event-ID header wins over the query parameter (as documented), and
    an empty Last-Event-ID or lastEventId counts as absent (EventSource never sends
    an empty one; tolerating it is harmless; the report mentions it)."""
    headers = {name.lower(): value for name, value in (case.headers or {}).items()}
    header = headers.get("last-event-id")
    if header is not None:
        text = _as_text(header)
        return not text.strip() or (text.isascii() and text.isdigit() and len(text) <= 18)
    query = (case.query or {}).get("lastEventId")
    return query is not None and not _as_text(query).strip()


# aiohttp's HTTP parser limit for the request line and each header (its default, which
# the listener keeps): a longer request is refused by the parser before any route or the
# guard sees it, so it cannot be told apart by its token.
PARSER_LINE_LIMIT = 8190


def _refusals(case: Any, request: Any) -> set[int]:
    """What a request without the token may get: 401, or 403 if a generated extra
    header happens to be one the guard checks first (Host, Origin), or 400 if the
    request line or a header is over the parser's limit (`request` as sent)."""
    names = {name.lower() for name in (case.headers or {})}
    refusals = {401, 403} if names & {"host", "origin"} else {401}
    lines = [f"{request.method} {request.path_url} HTTP/1.1"]
    lines += [f"{name}: {value}" for name, value in request.headers.items()]
    if any(len(line.encode()) > PARSER_LINE_LIMIT for line in lines):
        refusals.add(400)
    return refusals


def _error_shaped(response: schemathesis.Response) -> str | None:
    """None if a >= 400 answer is JSON {"error": "<string>"}, else what is wrong."""
    if response.status_code < 400:
        return None
    content_type = ",".join(response.headers.get("content-type", []))
    if content_type.split(";")[0].strip() != "application/json":
        return f"error {response.status_code} is not JSON: Content-Type {content_type!r}"
    try:
        body = json.loads(response.content)
    except ValueError:
        return f"error {response.status_code} body is not JSON: {response.content[:200]!r}"
    if not (isinstance(body, dict) and set(body) == {"error"} and isinstance(body["error"], str)):
        return f"error {response.status_code} body is not {{'error': str}}: {body!r}"
    return None


def _sse_problem(content: bytes) -> str | None:
    """None if `content` is whole SSE frames (id, event, one-line JSON object data)
    with consecutive ids, and ping comments; else what is wrong."""
    ids: list[int] = []
    for block in content.decode("utf-8", "replace").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.partition(": ")[::2] for line in lines)
        if set(fields) != {"id", "event", "data"} or len(lines) != 3:
            return f"malformed SSE frame: {block!r}"
        try:
            data = json.loads(fields["data"])
            ids.append(int(fields["id"]))
        except ValueError:
            return f"SSE frame with a bad id or non-JSON data: {block!r}"
        if not isinstance(data, dict):
            return f"SSE frame whose data is not a JSON object: {block!r}"
    if ids and ids != list(range(ids[0], ids[0] + len(ids))):
        return f"SSE ids not consecutive: {ids}"
    return None


def _fuzz(
    operation: Any,
    mode: GenerationMode,
    base_url: str,
    token: str | None,
    checks: tuple[str, ...],
    failures: list[str],
) -> int:
    """Run schemathesis cases for one operation in this (worker) thread. Failures
    are collected rather than raised (so one run reports all of them) and not shrunk."""
    events = operation.label == EVENTS
    if events:
        # schemathesis validates each SSE event against the response schema, which
        # (OpenAPI 3.1 style) describes the stream as one string; frames and error
        # bodies are checked by _sse_problem and _error_shaped instead.
        checks = tuple(name for name in checks if name != "response_schema_conformance")
    check_functions = _checks(checks)
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    timeout = EVENT_TIMEOUT if events else REQUEST_TIMEOUT
    where = f"{operation.label} [{mode.value}, {'token' if token else 'no token'}]"
    sent = 0
    http = requests.Session()

    @settings(
        max_examples=EVENT_EXAMPLES if events else EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.explicit, Phase.generate],
    )
    @seed(SEED)
    @given(case=operation.as_strategy(generation_mode=mode).filter(_harmless))
    def run(case: Any) -> None:
        nonlocal sent
        sent += 1
        response = case.call(base_url=base_url, session=http, headers=headers, timeout=timeout)
        curl = case.as_curl_command(headers=headers, base_url=base_url)
        case_checks = check_functions
        if events and mode == GenerationMode.NEGATIVE and _replay_point_leniency(case):
            case_checks = [c for c in check_functions if c.__name__ != "negative_data_rejection"]
        try:
            case.validate_response(
                response,
                checks=case_checks,
                headers=headers,
                transport_kwargs={"headers": headers, "timeout": timeout},
            )
        except FailureGroup as exc:
            failures.append(f"{where}: {exc}")
            return
        problem = _error_shaped(response)
        if (
            problem is None
            and token is None
            and response.status_code not in _refusals(case, response.request)
        ):
            problem = f"no token, yet {response.status_code}: {response.content[:200]!r}"
        if problem is None and events and response.status_code == 200:
            problem = _sse_problem(response.content)
        if problem is not None:
            failures.append(f"{where}: {problem}\n    {curl}")

    try:
        run()
    except Unsatisfiable:
        # Nothing to make invalid: no parameters or body, and (strict) no extra ones.
        assert mode == GenerationMode.NEGATIVE and sent == 0, where
    finally:
        http.close()
    return sent


async def _fuzz_all(
    schema: Any,
    url: str,
    tokens: tuple[str | None, ...],
    checks_for: dict[str | None, tuple[str, ...]],
) -> tuple[dict[str, int], list[str]]:
    """Every operation x both generation modes x each token variant; events last
    (so their replays carry the events the other operations caused)."""
    failures: list[str] = []
    counts: dict[str, int] = {}
    operations = _operations(schema)
    ordered = sorted(operations, key=lambda label: label == EVENTS)
    started = time.monotonic()
    for label in ordered:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for token in tokens:
                key = f"{label} {mode.value} {'token' if token else 'no-token'}"
                counts[key] = await asyncio.to_thread(
                    _fuzz, operations[label], mode, url, token, checks_for[token], failures
                )
    print(f"\nfuzzed {sum(counts.values())} requests in {time.monotonic() - started:.1f} s")
    empty = [key for key, count in counts.items() if not count]
    assert all(key.endswith(NEGATIVE_CAN_BE_EMPTY) for key in empty), (
        f"some operation generated no cases: {counts}"
    )
    return counts, failures


def _report(failures: list[str]) -> str:
    """One entry per distinct first line (the same defect recurs across examples)."""
    distinct: dict[str, str] = {}
    for failure in failures:
        distinct.setdefault(failure.splitlines()[0], failure)
    return (
        f"{len(failures)} non-conforming responses, {len(distinct)} distinct "
        f"(replay with HTTP_FUZZ_SEED={SEED}):\n\n" + "\n\n".join(distinct.values())
    )


async def _endpoint(sidecar: Sidecar, summary: dict[str, Any]) -> tuple[str, str]:
    """The listener URL and token; the token comes from `_session/http`, not the summary."""
    http = summary["http"]
    assert http is not None, f"session has no HTTP endpoint: {summary}"
    url, token = await sidecar.endpoint(summary["sessionId"])
    assert http == {"url": url}, f"the summary's http is not the listener's URL alone: {http}"
    return url, token


async def _sessions(sidecar: Sidecar, workspace: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The session to fuzz and a bystander that has had one turn."""
    target = await sidecar.new_session(workspace, mode="ask", title="fuzzed")
    other = await sidecar.new_session(workspace, mode="ask", title="bystander")
    await sidecar.prompt(other["sessionId"], "before the fuzzing")
    return target, other


async def _assert_healthy(
    sidecar: Sidecar, target: dict[str, Any], other: dict[str, Any], other_before: dict[str, Any]
) -> None:
    """The sidecar answers over stdio, the fuzzed session is idle in the same
    generation and takes a turn, and the bystander is untouched and takes a turn."""
    assert sidecar.client.process.returncode is None, "the sidecar exited during the fuzzing"
    status = await sidecar.status(target["sessionId"])
    assert (status["status"], status["live"], status["generation"]) == (
        "idle",
        True,
        target["generation"],
    ), status
    assert status["http"] is not None and status["http"]["url"] == target["http"]["url"]
    assert await sidecar.status(other["sessionId"]) == other_before, (
        "the bystander session changed while another session was fuzzed"
    )
    other_url, other_token = await _endpoint(sidecar, other)
    response = await asyncio.to_thread(
        requests.post,
        f"{other_url}/agent/send",
        json={"message": "after the fuzzing"},
        headers={"Authorization": f"Bearer {other_token}"},
        timeout=REQUEST_TIMEOUT,
    )
    assert response.status_code == 200, response.text
    assert response.json() == {"response": "Echo: after the fuzzing", "stopReason": "end_turn"}
    result = await sidecar.prompt(target["sessionId"], "still works")
    assert result["_meta"]["response"] == "Echo: still works"


async def test_fuzzed_responses_conform_to_the_document(sidecar: Sidecar, workspace: Path) -> None:
    """Anything goes in (extra parameters and headers, generated and missing
    credentials): every answer is documented, JSON `{"error"}` when it is an
    error, 401 without the token, never 5xx; nothing else is disturbed."""
    target, other = await _sessions(sidecar, workspace)
    other_before = await sidecar.status(other["sessionId"])
    url, token = await _endpoint(sidecar, target)

    counts, failures = await _fuzz_all(
        _schema(strict=False), url, (token, None), {token: CONFORMANCE, None: CONFORMANCE}
    )
    assert not failures, _report(failures)
    sent = (await sidecar.status(target["sessionId"]))["messageCount"]
    assert sent > 0, "no generated message ever reached a turn: the send fuzzing is vacuous"
    print(f"{sent} transcript messages from fuzzed sends; cases per batch: {counts}")

    await _assert_healthy(sidecar, target, other, other_before)


async def test_fuzzed_valid_input_is_accepted_and_invalid_refused(
    sidecar: Sidecar, workspace: Path
) -> None:
    """With the token and only documented parameters: a request the document
    calls valid gets 2xx, one it calls invalid gets 4xx. A failure here means
    protocol/openapi.json and the listener disagree about what is valid."""
    target, other = await _sessions(sidecar, workspace)
    other_before = await sidecar.status(other["sessionId"])
    url, token = await _endpoint(sidecar, target)

    _, failures = await _fuzz_all(
        _schema(strict=True), url, (token,), {token: CONFORMANCE + ACCEPTANCE}
    )
    assert not failures, _report(failures)

    await _assert_healthy(sidecar, target, other, other_before)


# -- what the fuzzer finds, pinned down: the document and the listener must agree ----------


_MESSAGES_PARAMS = "#/paths/~1agent~1messages/get/parameters"
_EVENTS_PARAMS = "#/paths/~1agent~1events/get/parameters"
BIG = 10**19  # 20 digits


@pytest.mark.parametrize(
    ("method", "target", "headers", "body", "schema", "instance", "fix"),
    [
        pytest.param(
            "POST",
            "/agent/send",
            {},
            {"message": " \t"},
            "#/components/schemas/SendRequest",
            {"message": " \t"},
            "protocol/openapi.json SendRequest.message only has minLength 1, but sidecar/http.py "
            "_parse_message refuses messages that are all str.isspace() whitespace (as the "
            "description says). Add a pattern naming exactly Python's whitespace, e.g. "
            '"[^\\\\t-\\\\r\\\\u001c- \\\\u0085\\\\u00a0\\\\u1680\\\\u2000-\\\\u200a\\\\u2028'
            '\\\\u2029\\\\u202f\\\\u205f\\\\u3000]" in the JSON (a bare \\S differs between '
            "regex engines: ECMA-262 \\s lacks \\x1c-\\x1f and \\x85 and has \\ufeff)",
            id="whitespace-only-message",
        ),
        pytest.param(
            "GET",
            f"/agent/messages?offset={BIG}",
            {},
            None,
            f"{_MESSAGES_PARAMS}/0/schema",
            BIG,
            'protocol/openapi.json: give offset (and Last-Event-ID, lastEventId) "maximum": '
            "999999999999999999, the most sidecar/http.py accepts (_INT_RE and _last_event_id "
            "allow at most 18 digits)",
            id="offset-over-18-digits",
        ),
        pytest.param(
            "GET",
            "/agent/events",
            {"Last-Event-ID": str(BIG)},
            None,
            f"{_EVENTS_PARAMS}/0/schema",
            BIG,
            'protocol/openapi.json: give Last-Event-ID (and lastEventId, offset) "maximum": '
            "999999999999999999, the most sidecar/http.py _last_event_id accepts",
            id="last-event-id-over-18-digits",
        ),
        pytest.param(
            "POST",
            "/agent/resize",
            {},
            {"rows": 24.0, "cols": 80},
            "#/components/schemas/ResizeRequest",
            {"rows": 24.0, "cols": 80},
            "JSON has one number type: 24.0 is an integer to JSON Schema (and to any JSON client "
            "that writes floats). Accept integral numbers in sidecar/runtime.py resize (now "
            "`type(value) is not int`), or, if the strictness is intended, say in "
            "protocol/openapi.json that integers must be written without a fraction",
            id="integral-float-size",
        ),
        pytest.param(
            "POST",
            "/agent/resize",
            {},
            {"rows": 24, "cols": 80, "extra": True},
            "#/components/schemas/ResizeRequest",
            {"rows": 24, "cols": 80, "extra": True},
            "protocol/openapi.json ResizeRequest says additionalProperties: false, but "
            "sidecar/http.py _resize ignores unknown keys (as the stdio params do by design, "
            "protocol/models.py StrictParams); drop additionalProperties: false from the request "
            "schema (it is shared with the 200 response), or refuse unknown keys in _resize",
            id="resize-unknown-key",
        ),
    ],
)
async def test_the_document_and_the_listener_agree_on_edge_inputs(
    sidecar: Sidecar,
    workspace: Path,
    method: str,
    target: str,
    headers: dict[str, str],
    body: Any,
    schema: str,
    instance: Any,
    fix: str,
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    doc = json.loads(OPENAPI.read_text())
    root = {"$ref": schema, **{k: v for k, v in doc.items() if k != "$ref"}}
    valid = jsonschema.Draft202012Validator(root).is_valid(instance)
    url, token = await _endpoint(sidecar, await sidecar.new_session(workspace, mode="ask"))

    def call() -> tuple[int, bytes]:
        with requests.request(
            method,
            url + target,
            headers={"Authorization": f"Bearer {token}", **headers},
            json=body,
            timeout=(REQUEST_TIMEOUT, 0.5),
            stream=True,
        ) as response:
            # An event stream never ends; its status line is the answer.
            content = b"" if response.status_code == 200 and method == "GET" else response.content
            return response.status_code, content

    status, content = await asyncio.to_thread(call)
    verdict = "valid" if valid else "invalid"
    agrees = 200 <= status < 300 if valid else 400 <= status < 500
    assert agrees, (
        f"{method} {target} {json.dumps(body) if body is not None else headers}: "
        f"protocol/openapi.json calls this {verdict}, the listener answered {status} "
        f"{content[:200]!r}. Fix: {fix}"
    )
