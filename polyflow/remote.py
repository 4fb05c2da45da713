"""The compile service's Python client: the local API's calls, compiled by a `polyflow serve`.

    with polyflow.remote.Client("http://build-box:8000", api_key="...") as client:
        scale = client.compile_c(source, "scale", opt_level=3)   # as polyflow.compile_c
        scale.mlir("affine-opt"), scale.report, scale.warnings   # as a local result reads
        scale.save("kernel.o", "scale.o")                        # the object, to link locally
        mv = client.tc.define("def mv(float(M,K) A, float(K) x) -> (C) { ... }")
        mv.compile(M=64, K=32).report                            # a TC compiles for given sizes

Results read as local ones do (`mlir(stage)`, `stages`, `report` (a real `CompileReport`),
`warnings`, `notes`, `cached`), plus what only the service has: the cache `key`, the service's
`diagnostics`, and the `artifacts` (`kernel.o`, `kernel.so`, `kernel.h`; PTX for CUDA). The
service compiles, it never runs code: results are not callable; link `kernel.o` (or load
`kernel.so`) where they should run.

Options are checked here, by the same `Options` model as the local API, before any request.
Errors: a C/TC error is a `polyflow.CompileError` at the server's line and column (all of its
diagnostics on `.diagnostics`); a request field the service refuses is an `InvalidRequest`
(a `ValueError` naming the field); a missing or refused API key an `AuthenticationError` (a
`PermissionError`); every other status a `RemoteError` with the status and the service's
detail. A full queue (503) and a bad gateway (502) are retried with exponential backoff,
honouring `Retry-After`, as are connections refused; a compile that passed the service's time
limit (504) is not, since it would only fail again.

Nothing here loads MLIR: a TC definition is parsed and checked here (the same checks as
`polyflow.tc.define`, which need no MLIR) and compiled by the service.
"""

from __future__ import annotations

import base64
import email.utils
import logging
import math
import os
import ssl
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import httpx

from polyflow.errors import CompileError
from polyflow.options import Options, PipelineStage
from polyflow.report import CompileReport, ReportViews
from polyflow.source_input import given_c_source, source_text
from polyflow.version import __version__

__all__ = [
    "AuthenticationError",
    "Client",
    "InvalidRequest",
    "RemoteCompileError",
    "RemoteError",
    "RemoteResult",
    "RemoteTcFunction",
    "RemoteTimeout",
    "RemoteTuning",
    "Retry",
    "ServiceUnreachable",
    "retry_delay",
]

log = logging.getLogger("polyflow.remote")

# The stages a result keeps unless `emit=` says otherwise: what a local compile keeps ("grad" and
# "gpu" exist only when a gradient or a CUDA build was asked for); LLVM IR ("llvm") only on request.
DEFAULT_STAGES: tuple[PipelineStage, ...] = (
    "mlir",
    "affine",
    "grad",
    "affine-opt",
    "gpu",
    "llvm-dialect",
)
# What `polyflow.tc.define` changes of the defaults, less `march=native`: the service's machine
# is not the one its objects may run on, so the code stays generic x86-64 unless asked.
TC_REMOTE_DEFAULTS: dict[str, Any] = {"opt_level": 3}
# connect quickly or not at all; a compile may take as long as the service allows (120 s default)
DEFAULT_TIMEOUT = httpx.Timeout(300.0, connect=10.0)
RETRY_STATUSES = frozenset({502, 503})
API_KEY_VARIABLE = "POLYFLOW_API_KEY"
FINISHED = frozenset({"done", "failed", "cancelled"})


# ----------------------------------------------------------------------------------- errors


class RemoteError(RuntimeError):
    """The service answered with an error status (`status`; None: no answer at all) and
    `detail`, its explanation; `request_id` names the request in the service's log."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        detail: Any = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.detail = detail
        self.request_id = request_id


class AuthenticationError(RemoteError, PermissionError):
    """401: the service needs an API key and got none, or not one it knows."""


class InvalidRequest(RemoteError, ValueError):
    """422 for a request field (an option, the sizes, ...); `fields` names each refused one as
    a dotted path (`options.cc`)."""

    def __init__(self, message: str, *, fields: Sequence[str] = (), **kw: Any) -> None:
        super().__init__(message, **kw)
        self.fields = list(fields)


class RemoteTimeout(RemoteError, TimeoutError):
    """No answer within the client's timeout (or a tuning not done within `tune`'s)."""


class ServiceUnreachable(RemoteError, ConnectionError):
    """The service could not be reached (after the retries)."""


class RemoteCompileError(CompileError):
    """A C or TC error the service found, at its file, line and column (the first of its
    diagnostics); `diagnostics` holds every one, each a `CompileError`."""

    def __init__(
        self, diagnostics: Sequence[CompileError], *, request_id: str | None = None
    ) -> None:
        first = diagnostics[0]
        super().__init__(
            first.message,
            file=first.file,
            line=first.line,
            column=first.column,
            source_line=first.source_line,
        )
        self.diagnostics = list(diagnostics)
        self.status = 422
        self.request_id = request_id


# ---------------------------------------------------------------------------------- retries


@dataclass(frozen=True)
class Retry:
    """One retry the client is about to make: which (1 = the first retry), after how many
    seconds, and why (`status` 502/503, or None for a connection that failed)."""

    attempt: int
    delay: float
    status: int | None
    reason: str


def retry_delay(
    attempt: int,
    retry_after: str | None,
    *,
    backoff: float,
    max_backoff: float,
    now: float | None = None,
) -> float:
    """Seconds to wait before retry number `attempt` (0-based): what the service's
    `Retry-After` says (seconds, or an HTTP date) when it says something readable, else
    `backoff * 2**attempt`, at most `max_backoff`. Never negative."""
    if retry_after is not None:
        text = retry_after.strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = math.nan
            try:
                when = email.utils.parsedate_to_datetime(text)
            except (TypeError, ValueError, IndexError):
                when = None
            if when is not None and when.tzinfo is not None:
                seconds = when.timestamp() - (time.time() if now is None else now)
        if math.isfinite(seconds):
            return max(seconds, 0.0)
    return max(min(backoff * 2.0**attempt, max_backoff), 0.0)


# ---------------------------------------------------------------------------------- results


class RemoteResult(ReportViews):
    """A compile's result as the service answered it, read as a local result is: `mlir(stage)`,
    `stages`, `report`, `warnings`, `notes`, `cached`; and `key` (the content address of the
    result), `entry`, `diagnostics` (the service's warnings and notes, with positions), `tuned`
    (the tuned choices the service used, or None), `service_ms` (milliseconds per compile
    step), and the artifacts, by name (`artifacts`, `artifact(name)`, `save(name, path)`)."""

    def __init__(self, client: Client, answer: Mapping[str, Any], *, request_id: str) -> None:
        self._client = client
        try:
            self.key: str = str(answer["key"])
            self.cached: bool = bool(answer["cached"])
            self.entry: str | None = answer.get("entry")
            self.stages: dict[str, str] = dict(answer.get("stages") or {})
            self.diagnostics: list[dict[str, Any]] = list(answer.get("diagnostics") or [])
            self.tuned: dict[str, Any] | None = answer.get("tuned")
            self.service_ms: dict[str, float] = dict(answer.get("timings") or {})
            # base64 as received, decoded on first use (kernel.so may be megabytes)
            self._encoded: dict[str, str] = dict(answer.get("artifacts") or {})
            report = answer.get("report")
            self.report = CompileReport.from_dict(report) if report else CompileReport()
        except (KeyError, TypeError, ValueError) as exc:
            raise RemoteError(
                f"the service's answer is not a compile result this client reads ({exc}); "
                f"is it the same polyflow version ({__version__})?",
                request_id=request_id,
            ) from None
        self._decoded: dict[str, bytes] = {}
        # what was asked for (the body sent, and the source's file name): what the display shows
        self.request: dict[str, Any] = {}

    def _repr_html_(self) -> str:
        from polyflow.display import render_html

        return render_html(self._display_view())

    def _repr_markdown_(self) -> str:
        from polyflow.display import render_markdown

        return render_markdown(self._display_view())

    def _display_view(self) -> Any:
        """A `polyflow.display.KernelView` of this result: what was compiled, where, with
        which options, and the report and stages the service answered."""
        from polyflow.display import KernelView

        body = self.request
        language = str(body.get("language", "c"))
        name = self.entry or "every function"
        sizes = body.get("sizes") or {}
        details = [f"compiled by the service at {self._client.url} (key {self.key[:12]}…)"]
        if sizes:
            details.append("sizes: " + ", ".join(f"{k}={v}" for k, v in sizes.items()))
        try:
            options = Options(**(body.get("options") or {}), target=body.get("target", "cpu"))
        except ValueError:
            options = None
        return KernelView(
            name=name,
            language=language,
            signature=f"{name} ({'TC' if language == 'tc' else 'C'}, remote)",
            details=details,
            report=self.report,
            stages=dict(self.stages),
            options=options,
            source=body.get("source"),
            file=body.get("file"),
            cached=self.cached,
        )

    @property
    def artifacts(self) -> list[str]:
        """The names of the result's artifacts (`kernel.o`, `kernel.so`, `kernel.h`, ...)."""
        return sorted({*self._encoded, *self._decoded})

    def artifact(self, name: str) -> bytes:
        """The bytes of artifact `name`: decoded from the answer where it came inline, else
        downloaded from `/v1/artifacts/{key}/{name}` (once; kept after)."""
        if name not in self._decoded:
            encoded = self._encoded.pop(name, None)
            if encoded is not None:
                self._decoded[name] = base64.b64decode(encoded)
            else:
                self._decoded[name] = self._client.artifact(self.key, name)
        return self._decoded[name]

    def save(self, name: str, path: str | os.PathLike[str]) -> Path:
        """Write artifact `name` to `path`; returns the path."""
        target = Path(path)
        target.write_bytes(self.artifact(name))
        return target

    def mlir(self, stage: str = "mlir") -> str:
        """The IR after a pipeline stage ('mlir', 'affine', 'affine-opt', 'llvm-dialect'; those
        asked for with `emit=`)."""
        if stage not in self.stages:
            raise KeyError(
                f"stage '{stage}' not kept (have: {', '.join(self.stages) or 'none'}; ask for "
                f"it with emit=[...])"
            )
        return self.stages[stage]

    def __repr__(self) -> str:
        return (
            f"<RemoteResult {self.entry or '(all functions)'} key={self.key[:12]}… "
            f"cached={self.cached} stages={list(self.stages)} artifacts={self.artifacts}>"
        )


class RemoteTcFunction:
    """A TC definition, checked here, compiled by the service for given sizes:
    `fn.compile(M=64, K=32)` returns a `RemoteResult`. `size_names` lists the sizes a compile
    needs; `mlir`, `report`, `warnings`, `cached` and `key` read the last compile's result (as
    the local `TcFunction`'s read the last call's)."""

    def __init__(
        self,
        client: Client,
        source: str,
        name: str,
        size_names: list[str],
        *,
        file: str,
        target: str,
        options: dict[str, Any],
        emit: list[str],
    ) -> None:
        self._client = client
        self.source = source
        self.name = name
        self.size_names = size_names
        self.file = file
        self.target = target
        self.options = options  # the fields sent: the TC defaults and what the caller gave
        self.emit = emit
        self.last: RemoteResult | None = None

    def compile(self, **sizes: int) -> RemoteResult:
        """The service's compile of this definition for `sizes` (each of `size_names`, a
        positive int); a ValueError naming a missing, unknown or bad size, before any
        request."""
        unknown = sorted(set(sizes) - set(self.size_names))
        if unknown:
            known = ", ".join(self.size_names) or "none"
            raise ValueError(f"{self.name} has no size {', '.join(unknown)} (its sizes: {known})")
        missing = [name for name in self.size_names if name not in sizes]
        if missing:
            raise ValueError(
                f"{self.name} needs the size of every symbolic dimension: give "
                f"{', '.join(f'{n}=...' for n in missing)}"
            )
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(
                    f"size {name} of {self.name} must be a positive int, not {value!r}"
                )
        body = {
            "language": "tc",
            "source": self.source,
            "entry": self.name,
            "target": self.target,
            "options": self.options,
            "emit": self.emit,
            "sizes": dict(sizes),
        }
        self.last = self._client._compile(body, source=self.source, file=self.file)
        return self.last

    def _result(self) -> RemoteResult:
        if self.last is None:
            raise ValueError(
                f"{self.name} has not been compiled yet: call compile("
                f"{', '.join(f'{n}=...' for n in self.size_names)})"
            )
        return self.last

    def mlir(self, stage: str = "mlir") -> str:
        """The IR after `stage` of the last compile."""
        return self._result().mlir(stage)

    @property
    def report(self) -> CompileReport:
        """The compile report of the last compile."""
        return self._result().report

    @property
    def warnings(self) -> list[str]:
        """What the compiler could not do in the last compile ([] before the first)."""
        return [] if self.last is None else self.last.warnings

    @property
    def cached(self) -> bool:
        """Whether the last compile's result came from the service's cache."""
        return self.last is not None and self.last.cached

    @property
    def key(self) -> str | None:
        """The cache key of the last compile's result."""
        return None if self.last is None else self.last.key

    def __repr__(self) -> str:
        return f"<RemoteTcFunction {self.name}({', '.join(self.size_names)}) at {self._client.url}>"


@dataclass
class RemoteTuning:
    """A tuning on the service (POST /v1/tune): `status` (queued, running, done, failed,
    cancelled), `progress` (candidates, best and default seconds, speedup, elapsed), `message`
    (why it failed or how it was cancelled) and, once done, `result` (see the service's docs);
    `view` is the service's whole answer."""

    id: str
    status: str
    progress: dict[str, Any] = field(default_factory=dict)
    message: str | None = None
    result: dict[str, Any] | None = None
    view: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, view: Mapping[str, Any]) -> RemoteTuning:
        """The tuning of the service's answer `view`."""
        return cls(
            id=str(view["id"]),
            status=str(view["status"]),
            progress=dict(view.get("progress") or {}),
            message=view.get("message"),
            result=view.get("result"),
            view=dict(view),
        )

    @property
    def best_choices(self) -> dict[str, Any] | None:
        """The best options found (None before the tuning is done)."""
        return None if self.result is None else self.result.get("best_choices")

    @property
    def speedup(self) -> float | None:
        """The default build's time over the best's (None until known)."""
        return None if self.result is None else self.result.get("speedup")


class _TcNamespace:
    """`client.tc`: the remote counterpart of `polyflow.tc` (its `define`)."""

    def __init__(self, client: Client) -> None:
        self._client = client

    def define(
        self,
        source: str | bytes,
        name: str | None = None,
        *,
        options: Options | Mapping[str, Any] | None = None,
        file: str = "<tc>",
        target: Literal["cpu", "cuda"] | None = None,
        emit: Iterable[str] | None = None,
        **fields: Any,
    ) -> RemoteTcFunction:
        """The TC definition `name` of `source` (the only one when None), parsed and checked
        here as `polyflow.tc.define` does it (a CompileError at its position, a ValueError
        for an unknown or ambiguous name), to be compiled by the service with
        `.compile(**sizes)`. Options: `options` and/or `fields` (Options fields) over the TC
        defaults (-O3; `march` stays generic: the code is built on the service's machine)."""
        from polyflow.frontend.tc.ranges import inferred_definitions

        text = source_text(source, file)
        sent = _options_fields(options, fields, target=target, defaults=TC_REMOTE_DEFAULTS)
        stages = _stages(emit)
        # range errors here too, as a local define finds them
        name, inferred = inferred_definitions(text, name, file=file)
        sizes = sorted(
            {
                dim
                for tensor in inferred[name].definition.inputs
                for dim in (tensor.dims or ())
                if isinstance(dim, str)
            }
        )
        return RemoteTcFunction(
            self._client,
            text,
            name,
            sizes,
            file=file,
            target=str(sent.get("target", "cpu")),
            options=sent,
            emit=stages,
        )


# ----------------------------------------------------------------------------------- client


class Client:
    """A client of the compile service at `url` (`http://host:port`, any path prefix kept).

    `api_key`: sent as `Authorization: Bearer KEY` (default: `$POLYFLOW_API_KEY`, if set).
    `timeout`: seconds per request, or an `httpx.Timeout` (default: 10 s to connect, 300 s for
    an answer). `retries`: how many times a request is retried after a 503 (queue full), a 502
    or a refused connection, waiting what `Retry-After` says, else `backoff * 2**n` seconds (at
    most `max_backoff`); `on_retry` is called with a `Retry` before each wait. `verify`: whether
    to check an https service's certificate (or the `ssl.SSLContext` to check it with). Use it
    as a context manager, or `close()` it.
    """

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: int = 3,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        on_retry: Callable[[Retry], None] | None = None,
        verify: bool | ssl.SSLContext = True,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"url must start with http:// or https://, not {url!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ValueError(f"retries must be an int >= 0, not {retries!r}")
        if backoff < 0 or max_backoff < 0:
            raise ValueError(f"backoff and max_backoff must be >= 0, not {backoff}, {max_backoff}")
        self.url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get(API_KEY_VARIABLE) or None
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.on_retry = on_retry
        headers = {"user-agent": f"polyflow-remote/{__version__}"}
        if self.api_key:
            headers["authorization"] = f"Bearer {self.api_key}"
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
            verify=verify,
        )
        self.tc = _TcNamespace(self)

    # -- lifetime

    def close(self) -> None:
        """Close the connections (the client cannot be used after)."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<polyflow.remote.Client {self.url}{' (with a key)' if self.api_key else ''}>"

    # -- the service's calls

    def healthz(self) -> dict[str, Any]:
        """The service's state: workers, busy ones, queue, tuning (GET /v1/healthz)."""
        return dict(self._json(self._request("GET", "/v1/healthz")[0]))

    def version(self) -> dict[str, str]:
        """polyflow's, MLIR's and isl's versions, and hashes of the service's code."""
        return dict(self._json(self._request("GET", "/v1/version")[0]))

    def compile_c(
        self,
        source: str | bytes | os.PathLike[str] | None = None,
        entry: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        options: Options | Mapping[str, Any] | None = None,
        target: Literal["cpu", "cuda"] | None = None,
        grad: str | Sequence[str] | bool | None = None,
        emit: Iterable[str] | None = None,
        explore: bool = False,
        **fields: Any,
    ) -> RemoteResult:
        """The service's compile of function `entry` of C `source` (text or UTF-8 bytes) or of
        the file at `path` (None: every function it can compile). Options as the local
        `polyflow.compile_c` takes them (`options`, `target`, `grad`: True needs `entry`) and
        as keywords (`opt_level=3`), checked here first; `emit`: the stages to keep (default:
        those a local compile keeps); `explore`: also what the web explorer shows (`explore`:
        per-loop badges, stages with source positions, dependences), and keep the request so
        that `result(key)` and the explorer's share link `/#key=...` find it."""
        text, filename, _ = given_c_source(source, path)  # no directory: the service has none
        sent = _options_fields(options, fields, target=target)
        if grad is not None and grad is not False:
            if grad is True and entry is None:
                raise ValueError(
                    "grad=True needs entry=: name the function to differentiate (the client "
                    "does not parse C)"
                )
            specs = [grad] if isinstance(grad, str) else [entry] if grad is True else list(grad)
            sent["grad"] = [*(sent.get("grad") or []), *specs]
            Options(**sent)  # the specs checked as the local API checks them
        body = {
            "language": "c",
            "source": text,
            "entry": entry,
            "target": sent.get("target", "cpu"),
            "options": sent,
            "emit": _stages(emit),
            **({"explore": True} if explore else {}),
        }
        return self._compile(body, source=text, file=filename)

    def result(self, key: str) -> RemoteResult:
        """The result the service keeps under `key` (GET /v1/results/{key}): one compiled with
        `explore` (the explorer's share links `/#key=...` name these), with what was asked for
        in `request`; a RemoteError (404) for another key."""
        response, request_id = self._request("GET", f"/v1/results/{key}")
        shared = self._json(response)
        result = RemoteResult(self, shared["result"], request_id=request_id)
        result.request = dict(shared.get("request") or {})
        return result

    def artifact(self, key: str, name: str) -> bytes:
        """Artifact `name` of the result with cache key `key` (GET /v1/artifacts/{key}/{name})."""
        return self._request("GET", f"/v1/artifacts/{key}/{name}")[0].content

    def tune(
        self,
        source: str | bytes,
        *,
        language: Literal["c", "tc"],
        entry: str | None = None,
        sizes: Mapping[str, int] | None = None,
        options: Options | Mapping[str, Any] | None = None,
        search: Literal["genetic", "random", "tpe"] = "genetic",
        budget: float | None = None,
        candidates: int | None = None,
        timeout: float | None = None,
        progress: Callable[[RemoteTuning], None] | None = None,
        poll_interval: float = 0.5,
        **fields: Any,
    ) -> RemoteTuning:
        """Tune a kernel on the service (started with `--allow-run`) and wait for the end:
        C `source` is a whole program whose `main` calls the kernel (`entry`: the timed
        function(s)); TC is a definition run on random inputs of `sizes`. `budget` (seconds)
        and/or `candidates` bound it; `progress` is called with the tuning whenever its
        progress changes. Returns the tuning once done (or cancelled); a RemoteError if it
        failed; past `timeout` seconds it is cancelled and RemoteTimeout raised. Later
        compiles of the same kernel at -O3 use the result (their `tuned`)."""
        text = source_text(source, "<input>" if language == "c" else "<tc>")
        body: dict[str, Any] = {
            "language": language,
            "source": text,
            "entry": entry,
            "options": _options_fields(options, fields, target=None),
            "search": search,
        }
        if sizes is not None:
            body["sizes"] = dict(sizes)
        if budget is not None:
            body["budget_seconds"] = budget
        if candidates is not None:
            body["max_candidates"] = candidates
        # not repeated after a broken connection: the first may have been queued
        response, request_id = self._request("POST", "/v1/tune", json=body, source=text,
                                             idempotent=False)  # fmt: skip
        tuning = RemoteTuning.of(self._json(response))
        deadline = None if timeout is None else time.monotonic() + timeout
        seen: Any = None
        while True:
            if progress is not None and (tuning.status, tuning.progress) != seen:
                seen = (tuning.status, tuning.progress)
                progress(tuning)
            if tuning.status in FINISHED:
                break
            if deadline is not None and time.monotonic() >= deadline:
                self.cancel_tuning(tuning.id)
                raise RemoteTimeout(
                    f"tuning {tuning.id} did not end within {timeout} s (it was "
                    f"{tuning.status}, {tuning.progress.get('candidates', 0)} candidates); "
                    f"it has been cancelled",
                    detail=tuning.view,
                    request_id=request_id,
                )
            time.sleep(poll_interval)  # the service has no push: poll it
            tuning = self.tuning(tuning.id)
        if tuning.status == "failed":
            raise RemoteError(
                f"tuning {tuning.id} failed: {tuning.message}",
                detail=tuning.view,
                request_id=request_id,
            )
        return tuning

    def tuning(self, tune_id: str) -> RemoteTuning:
        """The state of tuning `tune_id` (GET /v1/tune/{id})."""
        return RemoteTuning.of(self._json(self._request("GET", f"/v1/tune/{tune_id}")[0]))

    def cancel_tuning(self, tune_id: str) -> RemoteTuning:
        """Cancel tuning `tune_id` (DELETE /v1/tune/{id}); its state after."""
        return RemoteTuning.of(self._json(self._request("DELETE", f"/v1/tune/{tune_id}")[0]))

    # -- the plumbing

    def _compile(self, body: dict[str, Any], *, source: str, file: str) -> RemoteResult:
        """POST /v1/compile; the result, with positions in `file` where the service says
        `<input>` (C) or `<tc>` (TC)."""
        response, request_id = self._request(
            "POST", "/v1/compile", json=body, source=source, file=file
        )
        answer = self._json(response)
        if file not in ("<input>", "<tc>"):
            _rename_file(answer, "<input>" if body["language"] == "c" else "<tc>", file)
        result = RemoteResult(self, answer, request_id=request_id)
        result.request = {**body, "file": file}
        return result

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        source: str | None = None,
        file: str | None = None,
        idempotent: bool = True,
    ) -> tuple[httpx.Response, str]:
        """(the answer, its request id) of a request that succeeded, after the retries; the
        error an answer's status means otherwise (`source` and `file`: what a 422's
        positions point into)."""
        attempt = 0
        started = time.monotonic()
        while True:
            request_id = uuid.uuid4().hex
            where = f"{method} {self.url}{path}"
            status: int | None = None
            retry_after: str | None = None
            failure: Exception | None = None  # a connection that failed (no answer)
            try:
                response = self._http.request(
                    method, path, json=json, headers={"x-request-id": request_id}
                )
            except httpx.TimeoutException as exc:
                if not isinstance(exc, httpx.ConnectTimeout):
                    raise RemoteTimeout(
                        f"{where}: no answer within the client's timeout "
                        f"({exc.__class__.__name__}); raise Client(timeout=...) for long compiles",
                        request_id=request_id,
                    ) from exc
                reason, failure = f"connecting timed out: {exc}", exc
            except httpx.TransportError as exc:
                # a refused connection sent nothing; a dropped one may have, so only a
                # request that may be repeated is
                if not (idempotent or isinstance(exc, httpx.ConnectError)):
                    raise ServiceUnreachable(
                        f"{where}: the connection failed: {exc}", request_id=request_id
                    ) from exc
                reason, failure = f"the connection failed: {exc}", exc
            else:
                if response.is_success:
                    return response, request_id
                if response.status_code not in RETRY_STATUSES:
                    raise _error(self, response, request_id, source=source, file=file)
                status, retry_after = response.status_code, response.headers.get("retry-after")
                reason, failure = f"{status}: {_detail_text(response)}", None
            if attempt >= self.retries:
                tries = f"{attempt + 1} tr{'y' if attempt == 0 else 'ies'}"
                spent = time.monotonic() - started
                if failure is not None:
                    raise ServiceUnreachable(
                        f"cannot reach the compile service at {self.url} ({reason}); gave up "
                        f"after {tries} in {spent:.1f} s",
                        request_id=request_id,
                    ) from failure
                busy = "busy" if status == 503 else "unavailable"
                raise RemoteError(
                    f"the compile service at {self.url} is {busy} ({reason}); gave up after "
                    f"{tries} in {spent:.1f} s (Client(retries=...) tries longer)",
                    status=status,
                    detail=reason,
                    request_id=request_id,
                )
            delay = retry_delay(
                attempt, retry_after, backoff=self.backoff, max_backoff=self.max_backoff
            )
            attempt += 1
            retry = Retry(attempt=attempt, delay=delay, status=status, reason=reason)
            log.info(
                "%s: %s; retry %d of %d in %.2f s", where, reason, attempt, self.retries, delay
            )
            if self.on_retry is not None:
                self.on_retry(retry)
            time.sleep(delay)  # the backoff itself

    def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError:
            raise RemoteError(
                f"{response.request.method} {response.request.url}: the answer is not JSON "
                f"({response.headers.get('content-type', 'no content type')}); is {self.url} "
                f"a polyflow service?",
                status=response.status_code,
            ) from None


# -------------------------------------------------------------------------------- helpers


def _error(
    client: Client,
    response: httpx.Response,
    request_id: str,
    *,
    source: str | None,
    file: str | None,
) -> Exception:
    """The exception an error answer means (see the module docstring)."""
    status = response.status_code
    detail = _detail(response)
    where = f"{response.request.method} {response.request.url.path}"
    if status == 401:
        if client.api_key is None:
            message = (
                f"the compile service at {client.url} needs an API key: "
                f"Client(url, api_key=...) or ${API_KEY_VARIABLE}"
            )
        else:
            message = (
                f"the compile service at {client.url} refused the API key (401): it is not one "
                f"of the service's keys (--api-key-file)"
            )
        return AuthenticationError(message, status=401, detail=detail, request_id=request_id)
    if status == 422 and isinstance(detail, list) and detail:
        positioned = [d for d in detail if isinstance(d, dict) and "line" in d and "message" in d]
        if len(positioned) == len(detail):
            lines = (source or "").replace("\r\n", "\n").split("\n")
            return RemoteCompileError(
                [_compile_error(d, lines, file) for d in positioned], request_id=request_id
            )
        refused = [d for d in detail if isinstance(d, dict)]
        fields = [_field_name(d) for d in refused]
        said = "; ".join(
            f"{_field_label(name)}: {d.get('msg', d)}"
            for name, d in zip(fields, refused, strict=True)
        )
        return InvalidRequest(
            f"the service refused the request: {said}",
            fields=fields,
            status=422,
            detail=detail,
            request_id=request_id,
        )
    text = detail if isinstance(detail, str) else repr(detail)
    if status == 422:
        return InvalidRequest(
            f"the service refused the request: {text}",
            status=422,
            detail=detail,
            request_id=request_id,
        )
    phrase = response.reason_phrase or httpx.codes.get_reason_phrase(status)
    return RemoteError(
        f"{where}: {status} {phrase}: {text} (request id {request_id})",
        status=status,
        detail=detail,
        request_id=request_id,
    )


def _detail(response: httpx.Response) -> Any:
    """The service's `detail` (a message or a list), or the answer's text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:2000]
    return body.get("detail", body) if isinstance(body, dict) else body


def _detail_text(response: httpx.Response) -> str:
    detail = _detail(response)
    return detail if isinstance(detail, str) else repr(detail)


def _field_name(error: Mapping[str, Any]) -> str:
    """`options.cc` for a pydantic error at `["body", "options", "cc"]`."""
    loc = [str(part) for part in error.get("loc") or []]
    if loc and loc[0] == "body":
        loc = loc[1:]
    return ".".join(loc) or "body"


def _field_label(name: str) -> str:
    """`option 'cc'` for `options.cc`, `field 'sizes.M'` for others."""
    if name.startswith("options."):
        return f"option '{name[len('options.') :]}'"
    return f"field '{name}'"


def _compile_error(
    diagnostic: Mapping[str, Any], lines: list[str], file: str | None
) -> CompileError:
    """A diagnostic of the service as the local API raises it (its source line from the
    source sent; the file renamed to the caller's)."""
    line = int(diagnostic.get("line") or 0)
    server_file = str(diagnostic.get("file") or "<input>")
    named = file if file is not None and server_file in ("<input>", "<tc>") else server_file
    return CompileError(
        str(diagnostic["message"]),
        file=named,
        line=line,
        column=int(diagnostic.get("column") or 0),
        source_line=lines[line - 1] if 0 < line <= len(lines) else None,
    )


def _rename_file(answer: dict[str, Any], old: str, new: str) -> None:
    """Positions in `old` (the service's name for the source) said as in `new` (the file the
    caller compiled), in the diagnostics and the report."""
    records = [
        *(answer.get("diagnostics") or []),
        *((answer.get("report") or {}).get("remarks") or []),
    ]
    for record in records:
        if isinstance(record, dict) and record.get("file") == old:
            record["file"] = new


def _options_fields(
    options: Options | Mapping[str, Any] | None,
    fields: Mapping[str, Any],
    *,
    target: str | None,
    defaults: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The options a request sends (JSON): `defaults`, then `options`, then `fields`, then
    `target`, checked by `Options` as the local API checks them (its error, unchanged, before
    any request). Only the fields set are sent: the service's defaults are the local ones."""
    if options is not None and not isinstance(options, Options | Mapping):
        raise TypeError(f"options must be an Options or a dict, not {type(options).__name__}")
    given: dict[str, Any] = dict(defaults or {})
    if isinstance(options, Options):
        given.update({name: getattr(options, name) for name in options.model_fields_set})
    elif options is not None:
        given.update(options)
    given.update(fields)
    if target is not None:
        given["target"] = target
    checked = Options.of(given)  # a pydantic ValidationError (a ValueError) naming the field
    return checked.model_dump(mode="json", include=set(given))


def _stages(emit: Iterable[str] | None) -> list[str]:
    """The stages to keep, each one the pipeline has (ValueError naming one it has not)."""
    if emit is None:
        return list(DEFAULT_STAGES)
    if isinstance(emit, str):
        emit = [emit]
    known = get_args(PipelineStage)
    stages = list(emit)
    for stage in stages:
        if stage not in known:
            raise ValueError(f"unknown stage '{stage}' in emit (known: {', '.join(known)})")
    return stages
