"""The HTTP side: a Starlette app speaking OpenAI's API for one decoder.

Routes: ``GET /`` (the chat page, :mod:`iron.lm.serve.page`), ``GET
/health`` (503 once the model can no longer answer; with the slots free),
``GET /metrics`` (Prometheus' text format, :mod:`iron.lm.serve.metrics`),
``GET /v1/models`` (and ``/v1/models/{id}``), ``POST /v1/completions``,
``POST /v1/chat/completions``; a request may name any model (one is
served). Every error is OpenAI's error object with its status: 401 (a
wrong or missing bearer token when the server has an API key), 403 (a
``Host`` header the server does not answer: by default only the
loopback's names, against DNS rebinding), 404 (an unknown path), 405, 408
(a body slower than ``BODY_SECONDS``), 413 (a body over the limit), 415 (a
POST body not sent as ``Content-Type: application/json``), 400 (anything
else wrong with a request, named) and 503 (the queue is full, with
``Retry-After``; the server is stopping; the model's checkpoint changed on
disk). Cross-origin (CORS) headers are sent only for the origins the
server is given. Requests are decoded together in the model's slots
(:mod:`iron.lm.serve.scheduler`). The prefix cache is reused only by the
caller that wrote it. Streams are server-sent events
of OpenAI's chunks, ending ``data: [DONE]``; a client that goes away cancels
its generation at the next token. A request that asks for log-probabilities
gets them for the tokens whose text it is sent (a streamed chunk carries
those of its text), read from each step's logits on the host loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request as HTTPRequest
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from iron.lm.checkpoint import CheckpointChangedError
from iron.lm.penalties import Penalties
from iron.lm.serve import page
from iron.lm.serve.logprobs import (
    Scored,
    Scorer,
    chat_logprobs,
    completion_logprobs,
)
from iron.lm.serve.metrics import CONTENT_TYPE, Metrics
from iron.lm.serve.protocol import (
    APIError,
    Request,
    Sampling,
    choice,
    envelope,
    new_id,
    now,
    parse_request,
    usage,
)
from iron.lm.serve.reply import Reply
from iron.lm.serve.scheduler import Listening, Scheduler
from iron.lm.serve.tools import check_tool_messages, parse_structure, render_messages
from iron.lm.serve.worker import Job, QueueFull
from iron.operators.sample import MAX_TOP_K

if TYPE_CHECKING:
    from iron.lm.generate import Decoder

__all__ = ["LOOPBACK_HOSTS", "create_app"]

logger = logging.getLogger("iron.lm.serve")

#: How often a waiting non-streamed request checks that its client is there.
POLL_S = 0.25
#: Seconds a request body may take to arrive once its head has (else 408).
BODY_SECONDS = 20.0
#: The ``Host`` names a loopback server answers (with any port, or none).
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


def _error(error: APIError, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


def _host_name(host: str) -> str:
    """``host`` without its port, lower-cased: ``[::1]:8000`` -> ``[::1]``."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.partition(":")[0]


class _AllowedHosts:
    """Answers 403 to a request whose ``Host`` names none of ``hosts``.

    A page on another site that rebinds its own name to 127.0.0.1 (DNS
    rebinding) reaches the loopback with its own name in ``Host``; only a
    request meant for this machine names it by a loopback name.
    """

    def __init__(self, app: ASGIApp, hosts: Collection[str]) -> None:
        self.app = app
        self.hosts = {_host_name(h) for h in hosts}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and "*" not in self.hosts:
            given = ""
            for name, value in scope["headers"]:
                if name == b"host":
                    given = value.decode("latin-1")
                    break
            if _host_name(given) not in self.hosts:
                error = APIError(
                    f"the Host header {given!r} names no host this server answers "
                    f"({', '.join(sorted(self.hosts))}); a server meant to be "
                    "reached by another name is started with --allowed-hosts NAME",
                    status=403,
                    param="Host",
                    code="host_not_allowed",
                )
                await _error(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _AnswerWhenCancelled:
    """Ends a request cancelled by the server's shutdown with a JSON error.

    uvicorn cancels what runs at its shutdown deadline, or at a second
    Ctrl-C, and answers a cancelled request a plain-text 500; this answers
    503 ``shutting_down`` instead (or, in a stream already going, that
    error as its last event).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started: dict[str, Any] = {}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                started.update(message)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                if not started:
                    await _error(_stopping())(scope, receive, send)
                elif (b"content-type", b"text/event-stream") in [
                    (k.lower(), v.split(b";")[0]) for k, v in started["headers"]
                ]:
                    body = _sse(_stopping().body()).encode()
                    await send({"type": "http.response.body", "body": body})
            raise


class _CORS(CORSMiddleware):
    """Starlette's CORS, refusing a preflight with a JSON error."""

    def preflight_response(self, request_headers: Any) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        error = APIError(
            f"a cross-origin request refused ({bytes(response.body).decode()}); "
            "the server takes requests from the pages of --cors-origins only",
            status=response.status_code,
            param="Origin",
            code="cors_refused",
        )
        return _error(error)


class _Listener:
    """A request in a slot: its tokens, on the loop, into its reply's events."""

    def __init__(self, reply: Reply, job: Job) -> None:
        self.reply = reply
        self.job = job
        self.handle: Listening | None = None

    def token(self, token: int, logits: Any) -> None:
        if not self.reply.token(token, logits) and self.handle is not None:
            self.handle.close()  # an eos or a stop string: the slot is freed

    def end(self, error: BaseException | None) -> None:
        if error is not None:
            self.job.out.put_nowait(("error", error))
            return
        self.reply.finish(
            cancelled=self.job.outcome == "cancelled",
            cached=0 if self.handle is None else self.handle.cached_tokens,
            drafted=None,
        )


def _queue_full(error: QueueFull) -> APIError:
    return APIError(str(error), status=503, code="queue_full", kind="server_error")


def _sse(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


class _Server:
    """The app's state: the decoder, its worker, the limits."""

    def __init__(
        self,
        decoder: Decoder,
        *,
        model: str,
        sampling: Sampling,
        api_key: str | None,
        max_queue: int,
        max_body_bytes: int,
    ) -> None:
        if decoder.tokenizer is None:
            raise ValueError(
                "the decoder has no tokenizer; the server needs one to read prompts"
            )
        self.decoder = decoder
        self.tokenizer = decoder.tokenizer
        self.model = model
        self.sampling = sampling
        self.api_key = api_key
        self.max_queue = max_queue
        self.max_body_bytes = max_body_bytes
        self.created = now()
        self.eos = {*decoder.config.eos_token_ids, *self.tokenizer.eos_ids}
        self.prompt_limit = decoder.graph.context - decoder.graph.rows
        self.worker: Scheduler | None = None
        self.metrics = Metrics()
        #: Why the model can no longer answer (its checkpoint changed on disk).
        self.broken: str | None = None
        #: Prompts are rendered and tokenized on one thread of their own, off
        #: the event loop, at most max_queue + 1 waiting for it.
        self.prep = ThreadPoolExecutor(1, thread_name_prefix="iron-lm-prompt")
        self.preparing = 0

    # -- requests ---------------------------------------------------------------

    def authorize(self, request: HTTPRequest) -> None:
        if self.api_key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self.api_key.encode()
        ):
            raise APIError(
                "a missing or wrong API key: send 'Authorization: Bearer KEY' with "
                "the key the server was started with (--api-key)",
                status=401,
                code="invalid_api_key",
            )

    def unavailable(self) -> str | None:
        """Why the model cannot answer any more, or None: a checkpoint shard
        that changed on disk (a stat per shard) stays fatal until restart."""
        checkpoint = getattr(self.decoder.graph, "checkpoint", None)
        if self.broken is None and checkpoint is not None:
            try:
                checkpoint.verify()
            except CheckpointChangedError as e:
                self.broken = str(e)
        return self.broken

    def caller(self, request: HTTPRequest, req: Request) -> str:
        """Who ``req`` is, for the prefix cache: its bearer token and its
        ``user`` field. A request reuses the cache only when the one before
        it was the same caller's, so ``cached_tokens`` (and the time to the
        first token) never tell one caller about another's prompt."""
        token = request.headers.get("authorization", "")
        digest = hashlib.sha256(token.encode("latin-1", "replace")).hexdigest()
        return json.dumps([digest, req.user])

    async def body(self, request: HTTPRequest) -> Any:
        kind = request.headers.get("content-type")
        if kind is None or kind.partition(";")[0].strip().lower() != "application/json":
            # A browser sends text/plain and form types cross-site with no
            # preflight; JSON alone needs one, which CORS then governs.
            raise APIError(
                f"the request's Content-Type is {kind!r}; a POST body is JSON "
                "sent with the header 'Content-Type: application/json'",
                status=415,
                param="Content-Type",
                code="unsupported_media_type",
            )
        too_big = APIError(
            f"the request body is over the server's limit of {self.max_body_bytes} "
            "bytes (--max-body-bytes)",
            status=413,
            code="request_too_large",
        )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit():
            if int(declared) > self.max_body_bytes:
                raise too_big
        data = bytearray()
        try:
            async with asyncio.timeout(BODY_SECONDS):
                async for chunk in request.stream():
                    data += chunk
                    if len(data) > self.max_body_bytes:
                        raise too_big
        except TimeoutError:
            raise APIError(
                f"the request body did not arrive within {BODY_SECONDS:g} s "
                f"({len(data)} bytes came); send it whole",
                status=408,
                code="request_timeout",
            ) from None
        try:
            parsed = json.loads(data)
            # JSON may escape a lone surrogate ("\ud800"), which is no text
            json.dumps(parsed, ensure_ascii=False).encode()
        except UnicodeEncodeError as e:
            raise APIError(
                "the request body escapes a lone UTF-16 surrogate "
                f"({e.object[e.start : e.end]!r}), which is not text: send "
                "Unicode characters (or their surrogate pairs)",
                code="invalid_json",
            ) from None
        except (ValueError, UnicodeDecodeError) as e:
            raise APIError(
                f"the request body is not valid JSON: {e}", code="invalid_json"
            ) from None
        return parsed

    def prompt_ids(self, req: Request) -> list[int]:
        if req.messages is not None:
            check_tool_messages(req.messages)
            messages, variables = render_messages(
                req.messages, req.structure, self.tokenizer.chat_template
            )
            try:
                text = self.tokenizer.apply_chat_template(messages, **variables)
            except ValueError as e:  # ChatTemplateError: no template, or refused
                raise APIError(str(e), param="messages") from None
            ids = self.tokenizer.encode(text)
        elif isinstance(req.prompt, str):
            ids = self.tokenizer.encode(req.prompt)
        else:
            ids = list(req.prompt or [])
            vocab = self.decoder.config.vocab_size
            bad = [i for i in ids if not 0 <= i < vocab]
            if bad:
                raise APIError(
                    f"token id {bad[0]} is outside this model's vocabulary [0, {vocab})",
                    param="prompt",
                )
        if not ids:
            raise APIError("the prompt has no tokens", param="prompt")
        if len(ids) > self.prompt_limit:
            raise APIError(
                f"the prompt is {len(ids)} tokens; this model's context of "
                f"{self.decoder.graph.context} positions allows at most "
                f"{self.prompt_limit} for a prompt: shorten it",
                param="messages" if req.messages is not None else "prompt",
                code="context_length_exceeded",
            )
        return ids

    def start(self, req: Request, ids: list[int], caller: str) -> Job:
        """Start ``req``'s work; its job reports on the event loop.

        The job's queue gets the events of a :class:`Reply`: ``("text",
        piece)`` for each piece of text, preceded (when the request asks
        for log-probabilities) by ``("logprobs", [Scored, ...])`` for the
        tokens whose text begins in it, then ``("done", (finish_reason,
        completion_tokens, cached_tokens, drafted))``.

        A request runs in a slot beside others (the scheduler's batched
        steps), with no thread: its tokens come to the loop, a turn's all
        at once. One the batched path cannot serve runs alone on a thread
        of its own: speculation; a constrained reply, masked on the host
        step by step; min_p or a repetition penalty, likewise applied on
        the host. Either way it gets the tokens it would alone.

        Raises:
            APIError: 503, the queue is full.
        """
        assert self.worker is not None
        decoder, tokenizer = self.decoder, self.tokenizer
        steps = req.max_tokens or decoder.graph.context
        scorer = None if req.logprobs is None else Scorer(tokenizer, req.logprobs)
        eos = sorted(self.eos)
        settings: dict[str, Any] = {
            "max_new_tokens": steps,
            "seed": req.seed,
            # per-call values of the compiled model: nothing recompiles
            "temperature": req.temperature,
            "top_k": req.top_k,
            "top_p": req.top_p,
            "stop": eos,
        }
        loop = asyncio.get_running_loop()

        def reply(put: Any) -> Reply:
            return Reply(tokenizer, stop=req.stop, eos_ids=eos, scorer=scorer, put=put)

        constraint = (
            None
            if req.structure is None
            else req.structure.constraint(tokenizer, decoder.config.vocab_size)
        )
        drawn = constraint is not None or not req.penalties.neutral
        if not (req.speculate or drawn):
            job = Job(None, loop)
            listener = _Listener(
                reply(lambda kind, value: job.out.put_nowait((kind, value))), job
            )
            try:
                listener.handle = self.worker.listen(
                    job,
                    ids,
                    listener,
                    owner=caller,  # a prefix is reused only for its own caller
                    **settings,
                )
            except QueueFull as e:
                raise _queue_full(e) from None
            return job

        def run(job: Job) -> None:
            assert self.worker is not None
            masked = {} if constraint is None else {"constraint": constraint}
            if not req.penalties.neutral:
                masked.update(dataclasses.asdict(req.penalties))
            with self.worker.alone(job.cancelled) as alone:
                answer = reply(job.put)
                # generate()'s generator (typed an Iterator): closing it
                # stops the decode
                tokens: Any = alone.generate(
                    ids,
                    # a reply drawn on the host is never speculated
                    speculate=0 if drawn else req.speculate,
                    on_logits=None if scorer is None else scorer.logits,
                    **settings,
                    **masked,
                )
                with contextlib.closing(tokens):
                    for token in tokens:
                        if job.cancelled.is_set() or not answer.token(token):
                            break
                cancelled = job.cancelled.is_set()
                job.outcome = "cancelled" if cancelled else "done"
                stats = decoder.stats
                answer.finish(
                    cancelled=cancelled,
                    cached=stats.cached_tokens,
                    drafted=(stats.drafted_tokens, stats.accepted_tokens)
                    if req.speculate
                    else None,
                )

        job = Job(run, loop)
        try:
            self.worker.submit(job)
        except QueueFull as e:
            raise _queue_full(e) from None
        return job

    async def prepare(self, req: Request) -> list[int]:
        """:meth:`prompt_ids` on the prompt thread: a slow template or a long
        prompt holds neither the event loop nor, past the bound, memory."""
        if self.preparing > self.max_queue:
            raise APIError(
                f"{self.preparing} prompts wait to be tokenized, the most this "
                f"server holds (--max-queue {self.max_queue}); retry shortly",
                status=503,
                code="queue_full",
                kind="server_error",
            )
        self.preparing += 1
        try:
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.prep, self.prompt_ids, req)
        finally:
            self.preparing -= 1

    # -- answers ------------------------------------------------------------------

    def logprobs(
        self, req: Request, ids: list[int], scored: list[Scored]
    ) -> dict[str, Any] | None:
        """A choice's ``logprobs`` for ``scored`` (None when not asked)."""
        if req.logprobs is None:
            return None
        if req.endpoint == "chat":
            return chat_logprobs(scored)
        # text_offset counts from the start of the prompt's text
        if isinstance(req.prompt, str):
            start = len(req.prompt)
        else:
            start = len(self.tokenizer.decode(ids, skip_special_tokens=True))
        return completion_logprobs(scored, start)

    async def answer(self, request: HTTPRequest, endpoint: str) -> Response:
        self.authorize(request)
        why = self.unavailable()
        if why is not None:
            raise _unavailable(why)
        body = await self.body(request)
        req = parse_request(endpoint, body, sampling=self.sampling)
        if endpoint == "chat":
            req.structure = parse_structure(body)
        ids = await self.prepare(req)
        job = self.start(req, ids, self.caller(request, req))
        rid, created = new_id(endpoint), now()
        if req.stream:
            return StreamingResponse(
                self.events(job, req, ids, rid, created),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return await self.collect(request, job, req, ids, rid, created)

    async def collect(
        self,
        request: HTTPRequest,
        job: Job,
        req: Request,
        ids: list[int],
        rid: str,
        created: int,
    ) -> Response:
        pieces: list[str] = []
        scored: list[Scored] = []
        clock = asyncio.get_running_loop().time
        check = clock() + POLL_S
        value: Any
        try:
            while True:
                try:
                    kind, value = await asyncio.wait_for(job.out.get(), POLL_S)
                except TimeoutError:
                    kind, value = "", None
                if clock() >= check:  # every POLL_S, tokens coming or not
                    check = clock() + POLL_S
                    if await request.is_disconnected():
                        job.cancel()
                        return Response(status_code=499)
                if kind == "text":
                    pieces.append(value)
                elif kind == "logprobs":
                    scored += value
                elif kind == "done":
                    finish, completion, cached, drafted = value
                    text = "".join(pieces)
                    out = envelope(req.endpoint, rid, created, self.model, chunk=False)
                    logprobs = self.logprobs(req, ids, scored)
                    out["choices"] = [
                        choice(
                            req.endpoint, text, finish, chunk=False, logprobs=logprobs
                        )
                    ]
                    call = tool_call(req, text, finish)
                    if call is not None:
                        message = {"role": "assistant", "content": None}
                        out["choices"][0]["message"] = {**message, "tool_calls": [call]}
                        out["choices"][0]["finish_reason"] = "tool_calls"
                    out["usage"] = usage(len(ids), completion, cached, drafted)
                    return JSONResponse(out)
                elif kind == "error":
                    return _failed(value)
                elif kind == "cancelled":  # the server is stopping
                    return _error(_stopping())
        finally:
            job.cancel()  # a no-op once done

    async def events(
        self, job: Job, req: Request, ids: list[int], rid: str, created: int
    ) -> AsyncIterator[str]:
        endpoint = req.endpoint
        scored: list[Scored] = []  # those of the next chunk's text
        # a reply that may be a tool call is sent whole at the end
        held: list[str] | None = (
            [] if req.structure is not None and req.structure.calls_tools else None
        )

        def chunk(text: str | None, finish: str | None, **extra: Any) -> str:
            out = envelope(endpoint, rid, created, self.model, chunk=True)
            logprobs = self.logprobs(req, ids, scored) if scored else None
            scored.clear()
            out["choices"] = [
                choice(endpoint, text, finish, chunk=True, logprobs=logprobs)
            ]
            if req.include_usage:
                out["usage"] = None
            out.update(extra)
            return _sse(out)

        def render(kind: str, value: Any, sent: list[str]) -> bool:
            """Add the events ``(kind, value)`` makes to ``sent``; whether
            the stream ends with them."""
            nonlocal scored
            if kind == "text" and held is not None:
                held.append(value)
            elif kind == "text":
                sent.append(chunk(value, None))
            elif kind == "logprobs":
                scored += value
            elif kind == "done":
                finish, completion, cached, drafted = value
                if held is not None:
                    text = "".join(held)
                    call = tool_call(req, text, finish)
                    if call is None:
                        sent.append(chunk(text, None))
                    else:
                        finish = "tool_calls"
                        out = envelope(endpoint, rid, created, self.model, chunk=True)
                        delta = {"tool_calls": [{"index": 0, **call}]}
                        out["choices"] = [
                            {
                                "index": 0,
                                "delta": delta,
                                "logprobs": None,
                                "finish_reason": None,
                            }
                        ]
                        sent.append(_sse(out))
                sent.append(chunk(None if endpoint == "chat" else "", finish))
                if req.include_usage:
                    last = envelope(endpoint, rid, created, self.model, chunk=True)
                    last["choices"] = []
                    last["usage"] = usage(len(ids), completion, cached, drafted)
                    sent.append(_sse(last))
                sent.append("data: [DONE]\n\n")
                return True
            elif kind == "error":
                sent.append(_sse(_internal(value).body()))
                return True
            else:
                sent.append(_sse(_stopping().body()))
                return True
            return False

        try:
            if endpoint == "chat":
                first = envelope(endpoint, rid, created, self.model, chunk=True)
                first["choices"] = [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                ]
                if req.include_usage:
                    first["usage"] = None
                yield _sse(first)
            while True:
                # what came meanwhile goes in the same write (a socket write
                # and the client's wake cost more than the bytes)
                batch = [await job.out.get()]
                while not job.out.empty():
                    batch.append(job.out.get_nowait())
                sent: list[str] = []
                ended = any(render(kind, value, sent) for kind, value in batch)
                if sent:
                    yield "".join(sent)
                if ended:
                    return
        finally:
            job.cancel()  # the client went away, or it is done: a no-op then


def tool_call(req: Request, text: str, finish: str) -> dict[str, Any] | None:
    """The reply as a tool call (a complete one: finish ``stop``), or None."""
    if req.structure is None or finish != "stop":
        return None
    call: dict[str, Any] | None = req.structure.tool_call(text)
    return call


def _unavailable(why: str) -> APIError:
    return APIError(
        f"the model can no longer answer: {why}; restart the server",
        status=503,
        code="model_unavailable",
        kind="server_error",
    )


def _internal(error: BaseException) -> APIError:
    if isinstance(error, CheckpointChangedError):  # not the request's fault
        return _unavailable(str(error))
    if isinstance(error, ValueError):  # the decoder refused the request
        return APIError(str(error))
    return APIError(
        f"the device failed on this request: {type(error).__name__}: {error}",
        status=500,
        kind="server_error",
    )


def _failed(error: BaseException) -> JSONResponse:
    return _error(_internal(error))


def _stopping() -> APIError:
    return APIError(
        "the server is shutting down; the request was cancelled",
        status=503,
        code="shutting_down",
        kind="server_error",
    )


def create_app(
    decoder: Decoder,
    *,
    model: str,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    api_key: str | None = None,
    max_queue: int = 64,
    max_body_bytes: int = 1 << 20,
    allowed_hosts: Collection[str] = LOOPBACK_HOSTS,
    cors_origins: Sequence[str] = (),
    speculate: int = 0,
    penalties: Penalties | None = None,
) -> Starlette:
    """The ASGI app serving ``decoder`` (compiled, with a tokenizer) as ``model``.

    Args:
        decoder: The model; only the app's worker thread runs it.
        model: The id clients name (``GET /v1/models`` lists it).
        temperature: A request's sampling temperature when it gives none.
            Each request may give its own ``temperature``, ``top_k``,
            ``top_p`` and ``seed``: they are per-call values of the
            compiled decoder, so none recompiles anything.
        top_k: A request's ``top_k`` when it gives none; None is off (the
            device sampler's limit, ``min(256, vocab)``).
        top_p: A request's ``top_p`` when it gives none.
        api_key: If given, every ``/v1`` request must carry
            ``Authorization: Bearer <api_key>``.
        max_queue: Requests that may wait for the device; past it, 503.
        max_body_bytes: The largest request body; past it, 413.
        allowed_hosts: The ``Host`` header values (names, with any port)
            the app answers; others get 403. ``"*"`` answers any.
        cors_origins: The origins a browser page may call the app from
            (Starlette's ``CORSMiddleware`` for exactly these); none: no
            CORS headers, so browsers keep other sites' pages out.
        speculate: A request's ``speculate`` when it gives none: tokens
            drafted per pass by prompt lookup (0 is off); a request may ask
            up to the prompt chunk's rows less one.
        penalties: A request's ``min_p``, ``repeat_penalty``,
            ``repeat_last_n``, ``presence_penalty`` and ``frequency_penalty``
            for each it gives none of (default: all off, a window of 64). A
            request with any of them in effect runs alone, its decode loop
            from the host (:mod:`iron.lm.penalties`).

    Raises:
        ValueError: ``decoder`` has no tokenizer, or ``speculate`` is
            outside ``[0, rows - 1]``.
    """
    context = decoder.graph.context
    if not 0 <= speculate <= decoder.graph.rows - 1:
        raise ValueError(
            f"speculate={speculate} is outside [0, {decoder.graph.rows - 1}] for "
            f"prompt chunks of {decoder.graph.rows} rows"
        )
    server = _Server(
        decoder,
        model=model,
        sampling=Sampling(
            temperature,
            top_k,
            top_p,
            max_top_k=min(MAX_TOP_K, decoder.config.vocab_size),
            seed_limit=2**30 - 1 - context,
            speculate=speculate,
            max_speculate=decoder.graph.rows - 1,
            penalties=penalties or Penalties(),
        ),
        api_key=api_key,
        max_queue=max_queue,
        max_body_bytes=max_body_bytes,
    )

    async def health(request: HTTPRequest) -> Response:
        worker = server.worker
        assert worker is not None
        why = server.unavailable()
        return JSONResponse(
            {
                "status": "ok" if why is None else "unavailable",
                **({} if why is None else {"error": _unavailable(why).body()["error"]}),
                "model": model,
                "context": context,
                "waiting": worker.waiting,
                "done": worker.done,
                "cancelled": worker.cancelled,
                "slots": worker.slots,
                "slots_free": worker.slots_free,
                "kv_cache_bytes": worker.engine.cache_bytes,
            },
            status_code=200 if why is None else 503,
        )

    async def metrics(request: HTTPRequest) -> Response:
        return Response(server.metrics.render(), media_type=CONTENT_TYPE)

    def model_card() -> dict[str, Any]:
        return {
            "id": model,
            "object": "model",
            "created": server.created,
            "owned_by": "iron",
        }

    async def models(request: HTTPRequest) -> Response:
        server.authorize(request)
        return JSONResponse({"object": "list", "data": [model_card()]})

    async def one_model(request: HTTPRequest) -> Response:
        server.authorize(request)
        if request.path_params["model"] != model:
            raise APIError(
                f"the model {request.path_params['model']!r} does not exist here; "
                f"this server serves {model!r}",
                status=404,
                param="model",
                code="model_not_found",
            )
        return JSONResponse(model_card())

    async def completions(request: HTTPRequest) -> Response:
        return await server.answer(request, "completions")

    async def chat(request: HTTPRequest) -> Response:
        return await server.answer(request, "chat")

    async def on_api_error(request: HTTPRequest, error: Exception) -> Response:
        assert isinstance(error, APIError)
        headers = {}
        if error.status == 503 and error.code != "model_unavailable":
            headers["Retry-After"] = "1"
        if error.status in (408, 413):  # the body is left unread: end there
            headers["Connection"] = "close"
        return _error(error, headers)

    async def on_http_error(request: HTTPRequest, error: Exception) -> Response:
        assert isinstance(error, HTTPException)
        what = {404: f"no such path {request.url.path}", 405: "method not allowed"}
        message = what.get(error.status_code, str(error.detail))
        return _error(APIError(message, status=error.status_code), error.headers)

    async def on_crash(request: HTTPRequest, error: Exception) -> Response:
        logger.exception("a request failed")
        return _failed(error)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.worker = Scheduler(decoder, max_queue, server.metrics)
        try:
            yield
        finally:
            server.worker.stop()
            server.prep.shutdown(wait=False, cancel_futures=True)

    middleware = [
        Middleware(_AnswerWhenCancelled),
        Middleware(_AllowedHosts, hosts=allowed_hosts),
    ]
    if cors_origins:
        middleware.append(
            Middleware(
                _CORS,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["Authorization", "Content-Type"],
            )
        )
    return Starlette(
        middleware=middleware,
        routes=[
            *page.routes(),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/models/{model:path}", one_model, methods=["GET"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ],
        exception_handlers={
            APIError: on_api_error,
            HTTPException: on_http_error,
            Exception: on_crash,
        },
        lifespan=lifespan,
    )
