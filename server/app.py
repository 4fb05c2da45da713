"""The compile service: a FastAPI app over a worker pool and the compile cache.

    POST /v1/compile            compile C or TC (cached by content; see polyflow/storage/cache.py)
    GET  /v1/artifacts/{key}/{name}   an artifact of a cached result, as bytes
    GET  /v1/healthz            workers, queue, cache size
    GET  /v1/version            polyflow, MLIR and isl versions; hashes of polyflow's and the service's code
    GET  /metrics               Prometheus: requests, cache hits/misses, latency, queue depth

    POST   /v1/tune             tune a kernel's options (202 {"id", "status": "queued", ...});
                                only with `--allow-run` (else 403): it runs the submitted code
    GET    /v1/tune/{id}        a tuning's status (queued|running|done|failed|cancelled), its
                                progress, and when done its result
    DELETE /v1/tune/{id}        cancel a tuning; answers its state

    GET  /                      the web explorer (server/static/)
    POST /v1/compile + "explore": true   also the explorer's data (server/explore.py): loops
                                with badges and reasons, stages without locations with each
                                line's source position, schedule trees, dependences
    GET  /v1/results/{key}      an explorer's result with its request (share links); 404 else
    POST /v1/run                only with `--allow-run` (else 403): build the kernel with
                                polyflow and a baseline (gcc -O3 -march=native for a C program
                                with main, NumPy for TC), run both in the tuning sandbox,
                                compare outputs and best-of times (server/run.py)

Tuning (server/tuning.py): the body is /v1/compile's (`language`, `source`, `entry`, `options`,
TC `sizes`) plus `search` (genetic|random|tpe), `budget_seconds` (at most the service's
`--max-tune-seconds`) and/or `max_candidates`. A C source is a whole program whose `main` makes
the inputs and calls the kernel (`entry`: the timed function(s), comma-separated; they are then
the functions polyflow compiles); a TC definition runs on seeded random inputs of the `sizes`
given, with the dtypes of its signature. One tuning runs at a time, on a thread; each candidate
is a process of its own in a scratch directory, with a clean environment and the service's
limits (CPU seconds, memory, file size). The result goes to the service's tuning database
(`--tuning-db`), and a later /v1/compile of the same kernel (same source, entry, defines or TC
sizes, target, reassociation) at -O3 uses it: its answer's `tuned` gives the choices and a note
among its diagnostics says so (`options.tuned: false` compiles with the options as given). The
tuned choices are part of the compile's cache key, so no answer cached before a tuning is
served after it.

Errors are JSON `{"detail": ...}` and never carry a traceback: 422 for bad input (C/TC errors
with their position, unknown options naming the field), 413 for a source over the size limit,
401 without a valid API key (when keys are configured), 403 for a tuning or a run when the
service does not run submitted code, 404 for an unknown tuning or result, 503 with
`Retry-After` when the compile, tuning or run queue is full, 504 when a compile or a run passes
its time limit, 500 when a compile ran out of memory or its worker died mid-job.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import os
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from fastapi import Body, FastAPI, HTTPException, Request, Response
from fastapi.responses import FileResponse, JSONResponse, PlainTextResponse
from fastapi.staticfiles import StaticFiles
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
)

import polyflow
from polyflow.errors import CompileError
from polyflow.options import Options, PipelineStage
from polyflow.storage.cache import CompileCache, cache_key, code_fingerprint, compiler_versions
from polyflow.storage.tuning import Tuning, default_tuning_url, tuning_note

from .hot import HotResults
from .jobs import FORBIDDEN_OPTIONS, check_includes
from .metrics import CONTENT_TYPE, Metrics, route_template
from .tuning import TuneManager, TuneQueueFull, compile_tuning, task_options, tc_signature
from .workers import JobTimeout, QueueFull, WorkerDied, WorkerPool

log = logging.getLogger("polyflow.serve")

# the web explorer: a page and its plain modules, served as they are (no build step)
STATIC = Path(__file__).parent / "static"


@dataclass
class ServeConfig:
    """What `polyflow serve` sets (each also from a `POLYFLOW_SERVE_*` variable)."""

    workers: int = 2
    cache_dir: Path | None = None
    max_source_bytes: int = 1 << 20
    timeout: float = 120.0
    max_queue: int = 64
    memory_bytes: int | None = 4 << 30  # per job, over a loaded worker's size
    hot_bytes: int = 256 << 20  # recent results kept in memory in front of the SQLite cache
    api_keys: frozenset[str] = field(default_factory=frozenset)
    # tuning (POST /v1/tune) runs the submitted code: only when this is set
    allow_run: bool = False
    # a path, sqlite:///path or postgresql://...: where tunings go and compiles find them
    tuning_db: str = field(default_factory=default_tuning_url)
    max_tune_seconds: float = 600.0  # the largest budget a tuning may have
    max_tune_queue: int = 4  # tunings that may wait (one runs at a time)
    tune_workers: int = 1  # candidates built and run at once
    # each candidate's process (and the program it runs): memory over the loaded worker's size,
    # CPU seconds, bytes a file may reach
    tune_memory_bytes: int | None = 4 << 30
    tune_cpu_seconds: int | None = 600
    tune_file_bytes: int | None = 256 << 20
    # POST /v1/run (with allow_run): seconds each run of a build may take, runs of each
    run_seconds: float = field(
        default_factory=lambda: float(os.environ.get("POLYFLOW_SERVE_RUN_SECONDS", "10"))
    )
    run_repeats: int = 3


def _request_options_model() -> type[BaseModel]:
    """The request's `options`, derived from polyflow's `Options` (names, types, defaults,
    constraints and help text are written there once); the fields a request may not set
    (`FORBIDDEN_OPTIONS`) are listed and refused by name."""
    fields: dict[str, Any] = {}
    for name, info in Options.model_fields.items():
        if name in FORBIDDEN_OPTIONS:
            fields[name] = (
                Any,
                Field(default=None, description="may not be set through the service"),
            )
        else:
            fields[name] = (info.annotation, info)

    def refuse(cls: type, value: Any) -> Any:
        raise ValueError("may not be set through the service")

    return create_model(  # type: ignore[call-overload, no-any-return]
        "CompileOptions",
        __config__=ConfigDict(extra="forbid"),
        __doc__="Compile options: polyflow's Options (polyflow/options.py), all optional.",
        __validators__={
            "refuse_forbidden": field_validator(*sorted(FORBIDDEN_OPTIONS), mode="before")(refuse)
        },
        **fields,
    )


CompileOptions = _request_options_model()


class GradRequest(BaseModel):
    """Reverse-mode differentiation of one function of the request (polyflow.autodiff)."""

    model_config = ConfigDict(extra="forbid")

    entry: str = Field(description="the function (C) or definition (TC) to differentiate")
    wrt: list[str] | None = Field(
        default=None,
        description="C: the active parameters, each followed by its shadow in "
        "`__polyflow_<entry>_grad` (default: every float array and scalar); TC: checked "
        "names of float inputs (the gradient returns the adjoints of all of them)",
    )

    def spec(self) -> str:
        """As `Options.grad` writes it: `entry` or `entry:a,b`."""
        return f"{self.entry}:{','.join(self.wrt)}" if self.wrt else self.entry


class CompileRequest(BaseModel):
    """The body of POST /v1/compile."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["c", "tc"]
    source: str
    entry: str | None = None
    target: Literal["cpu", "cuda"] = "cpu"
    options: CompileOptions = Field(default_factory=CompileOptions)  # type: ignore[valid-type]
    emit: list[PipelineStage] = Field(default_factory=list)
    sizes: dict[str, int] | None = Field(
        default=None, description="TC only: the size of each symbolic dimension of the inputs"
    )
    grad: GradRequest | None = Field(
        default=None,
        description="also compile the reverse-mode gradient `<entry>_grad` of a function (CPU)",
    )
    explore: bool = Field(
        default=False,
        description="also answer `explore`, the web explorer's data (each loop's badges, the "
        "stages in `emit` without locations with each line's source position, the schedule "
        "trees, the dependences); the request is kept beside the result (GET /v1/results/KEY)",
    )


class SourcePosition(BaseModel):
    line: int
    column: int


class ExploreLoop(BaseModel):
    """A loop of the source (C `for`/`while`/`do`, a TC statement) and what became of it."""

    function: str
    line: int
    column: int
    badges: list[str] = Field(description="those that hold: raised, parallel, tiled, micro-kernel")
    why_not: list[str] = Field(
        description="why something did not happen: not raised and why, the notes and warnings "
        "of the polyhedral stage at this loop, a function not optimized"
    )
    details: dict[str, Any] = Field(
        description="facts: tile_sizes, micro_kernel (rows x vectors), vector_lanes, "
        "reductions, rescheduled, ..."
    )


class ExploreStage(BaseModel):
    text: str = Field(description="the stage's IR without location attributes")
    lines: list[SourcePosition | None] = Field(
        description="per line of `text`: the source position of the op on it (null: none)"
    )


class Dependence(BaseModel):
    kind: Literal["flow", "anti", "output", "reduction"]
    relation: str = Field(description="isl relation from source to sink statement instances")
    source: str | None = None
    sink: str | None = None
    source_line: int | None = None
    sink_line: int | None = None


class Explore(BaseModel):
    """The web explorer's data of a compile (asked for with `explore: true`)."""

    language: Literal["c", "tc"]
    loops: list[ExploreLoop]
    stages: dict[str, ExploreStage] = Field(description="the MLIR stages of `emit`")
    schedule_trees: dict[str, str] = Field(description="function -> isl schedule tree(s)")
    dependences: dict[str, list[Dependence]] = Field(
        description="per function the polyhedral stage analyzed: its dependences (at most "
        "200 per function)"
    )
    dependences_truncated: dict[str, int] = Field(
        default_factory=dict, description="per function: how many dependences were left out"
    )
    statements: dict[str, dict[str, SourcePosition]] = Field(
        description="per function: each isl statement's source position"
    )


class CompileResponse(BaseModel):
    key: str = Field(description="the content address of this result (SHA-256, hex)")
    entry: str | None = Field(description="the compiled function (None: every one that could be)")
    diagnostics: list[dict[str, Any]] = Field(
        description="warnings and notes of the compile (severity, message, and the file, line "
        "and column where known)"
    )
    report: dict[str, Any] = Field(
        default_factory=dict,
        description="the compile report (polyflow.report.CompileReport, versioned JSON): every "
        "remark of every stage with its source position, the schedule trees, the timings"
    )
    stages: dict[str, str] = Field(description="the MLIR/LLVM text of each stage asked for")
    artifacts: dict[str, str] = Field(description="name -> base64 bytes (also under /v1/artifacts)")
    timings: dict[str, float] = Field(description="milliseconds per compile stage")
    tuned: dict[str, Any] | None = Field(
        default=None,
        description="the tuned options (POST /v1/tune, or `polyflow tune` into the service's "
        "tuning database) this compile used for the kernel, over the request's; null: none",
    )
    cached: bool = Field(description="true when the result came from the cache")
    explore: Explore | None = Field(
        default=None, description="the web explorer's data (only with `explore: true`)"
    )


class StoredRequest(BaseModel):
    """The request of a result compiled with `explore: true`, as the service received it."""

    language: str
    source: str
    entry: str | None = None
    target: str = "cpu"
    options: dict[str, Any] = Field(description="the request's options as it gave them")
    sizes: dict[str, int] | None = None
    emit: list[str] = Field(default_factory=list)
    grad: GradRequest | None = None
    explore: bool = True


class StoredResult(BaseModel):
    """A result compiled with `explore: true` and its request (the explorer's share links)."""

    request: StoredRequest
    result: CompileResponse


class TuneRequest(BaseModel):
    """The body of POST /v1/tune: what to tune (as /v1/compile says it; CPU only) and how long."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["c", "tc"]
    source: str = Field(
        description="C: a whole program with `main`, which makes the inputs and calls the "
        "kernel (its output is checked against the default build's); TC: the definitions"
    )
    entry: str | None = Field(
        default=None,
        description="C: the timed function(s), comma-separated (default: every function "
        "polyflow compiles); TC: the definition (default: the only one)",
    )
    options: CompileOptions = Field(  # type: ignore[valid-type]
        default_factory=CompileOptions,
        description="the build's options, which the tuned choices change (-O3 unless given)",
    )
    sizes: dict[str, int] | None = Field(
        default=None,
        description="TC only: the size of each symbolic dimension of the inputs (the inputs "
        "are seeded random arrays of these shapes, of the signature's dtypes)",
    )
    search: Literal["genetic", "random", "tpe"] = "genetic"
    budget_seconds: float | None = Field(
        default=None,
        gt=0,
        description="how long to tune (default and at most: the service's maximum)",
    )
    max_candidates: int | None = Field(
        default=None, ge=1, le=100_000, description="stop after this many candidates"
    )


class RunRequest(BaseModel):
    """The body of POST /v1/run: a kernel to build and time against a baseline (CPU only)."""

    model_config = ConfigDict(extra="forbid")

    language: Literal["c", "tc"]
    source: str = Field(
        description="C: a whole program with `main` (it makes the inputs, calls the kernels, "
        "prints what is compared with gcc's build); TC: the definitions"
    )
    entry: str | None = Field(default=None, description="TC: the definition (default: the only one)")
    options: CompileOptions = Field(  # type: ignore[valid-type]
        default_factory=CompileOptions,
        description="polyflow's build options (-O3 and -march=native unless given)",
    )
    sizes: dict[str, int] | None = Field(
        default=None,
        description="TC only: the size of each symbolic dimension of the seeded random inputs",
    )


class RunResponse(BaseModel):
    """The times of polyflow's build and of the baseline's (best of `runs`)."""

    polyflow_ms: float
    baseline: str = Field(description='"gcc -O3 -march=native" (C) or "numpy" (TC)')
    baseline_ms: float | None
    speedup: float | None = Field(description="baseline_ms / polyflow_ms")
    outputs_match: bool | None = Field(
        description="C: both programs printed the same (numbers within 1e-6); TC: the outputs "
        "are np.allclose to NumPy's"
    )
    runs: int
    note: str = Field(description="how it was measured; how the outputs differ, where they do")


class TuneProgress(BaseModel):
    candidates: int = Field(description="candidates tried so far")
    in_flight: int = Field(description="candidates being built or run")
    best_seconds: float | None = Field(description="the best time so far (the default's at first)")
    default_seconds: float | None = Field(description="the default build's time")
    speedup: float | None = Field(description="default_seconds / best_seconds")
    elapsed: float = Field(description="seconds since the tuning started")


class TuneStatus(BaseModel):
    """A tuning: its state, its progress, and once done its result."""

    id: str
    status: Literal["queued", "running", "done", "failed", "cancelled"]
    language: str
    entry: str | None
    search: str
    budget_seconds: float
    max_candidates: int | None
    created: float = Field(description="when it was asked for (seconds since the epoch)")
    cancel_requested: bool
    progress: TuneProgress
    message: str | None = Field(description="why it failed or how it was cancelled")
    result: dict[str, Any] | None = Field(
        description="when done (or cancelled after the default build): the best choices, the "
        "default's and the best's times (measured again, alternating), the speedup, the "
        "option space, every candidate (choices, status, seconds, message) and `counts` of "
        "their statuses, and whether it was `stored` in the tuning database"
    )
    queue_position: int | None = Field(default=None, description="tunings queued before it")


class SourceDiagnostic(BaseModel):
    """A C or TC error at its place in the source (line and column 0: no one place)."""

    file: str
    line: int
    column: int
    message: str


class FieldError(BaseModel):
    """A request field that is missing, of the wrong type, or not allowed."""

    model_config = ConfigDict(extra="allow")

    loc: list[str | int]
    msg: str
    type: str | None = None


class ErrorBody(BaseModel):
    """Every error answer: a message, or the list of what was wrong."""

    detail: str | list[SourceDiagnostic | FieldError]


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    described = {
        400: "the body is not JSON",
        401: "no valid API key (only when the service has keys)",
        403: "the service does not run submitted code (started without --allow-run)",
        404: "no such result, artifact or tuning",
        413: "the source is over the size limit",
        422: "invalid request, or a C/TC error with its position",
        500: "the compile ran out of memory, or its worker died (it has been replaced)",
        503: "the compile (or tuning) queue is full; retry after `Retry-After` seconds",
        504: "the compile passed its time limit (its worker has been replaced)",
    }
    return {s: {"model": ErrorBody, "description": described[s]} for s in (401, *statuses)}


COMPILE_EXAMPLES = {
    "c": {
        "summary": "a C loop nest at -O3, with its affine stage",
        "value": {
            "language": "c",
            "source": "void scale(int n, double a[100]) {\n"
            "  for (int i = 0; i < n; i++) a[i] = 2 * a[i];\n}\n",
            "options": {"opt_level": 3},
            "emit": ["affine"],
        },
    },
    "tc": {
        "summary": "a Tensor Comprehension for given sizes",
        "value": {
            "language": "tc",
            "source": "def mv(float(M,K) A, float(K) x) -> (C) { C(i) +=! A(i,k) * x(k) }",
            "sizes": {"M": 64, "K": 32},
        },
    },
}


def create_app(config: ServeConfig | None = None) -> FastAPI:
    """The service's app; its worker pool starts and stops with the app's lifespan."""
    config = config or ServeConfig()
    cache = CompileCache(config.cache_dir)
    hot = HotResults(config.hot_bytes)
    pool = WorkerPool(config.workers, max_queue=config.max_queue, memory_bytes=config.memory_bytes)
    in_flight: dict[str, asyncio.Future[dict[str, Any]]] = {}  # key -> its compile task
    # the service's own code decides what it stores, as polyflow's decides what it compiles
    known_versions = {**compiler_versions(), "server_code": code_fingerprint("server")}
    metrics = Metrics()
    tunings = TuneManager(
        db_url=config.tuning_db,
        limits=_limits(config),
        max_queue=config.max_tune_queue,
        workers=config.tune_workers,
    )

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        pool.start()
        if config.allow_run:
            tunings.start()
        try:
            yield
        finally:
            pool.close()
            if config.allow_run:
                await asyncio.to_thread(tunings.close)

    app = FastAPI(title="polyflow compile service", version=polyflow.__version__, lifespan=lifespan)

    @app.middleware("http")
    async def request_id_and_keys(request: Request, call_next: Any) -> Response:
        request_id = request.headers.get("x-request-id") or uuid.uuid4().hex
        start = time.perf_counter()
        if (
            config.api_keys
            and request.url.path.startswith("/v1/")
            and not _authorized(request.headers.get("authorization", ""), config.api_keys)
        ):
            response: Response = JSONResponse(
                {"detail": "a valid API key is required (Authorization: Bearer KEY)"},
                status_code=401,
            )
        else:
            response = await call_next(request)
        response.headers["x-request-id"] = request_id
        metrics.request(
            request.method, route_template(app.router, request.scope), response.status_code
        )
        log.info(
            json.dumps(
                {
                    "request_id": request_id,
                    "method": request.method,
                    "path": request.url.path,
                    "status": response.status_code,
                    "ms": round((time.perf_counter() - start) * 1e3, 2),
                }
            )
        )
        return response

    @app.get("/v1/healthz", responses=_errors())
    async def healthz() -> dict[str, Any]:
        return {
            "status": "ok",
            "workers": pool.pids,
            "busy": sorted(pool.busy),
            "waiting": pool.waiting,
            "replaced": pool.replaced,
            "jobs": pool.jobs,
            "hot_results": len(hot),
            "tuning": {
                "allowed": config.allow_run,
                "running": tunings.running.id if tunings.running else None,
                "queued": tunings.queued,
                "finished": tunings.done,
            },
        }

    @app.get("/metrics", response_class=PlainTextResponse)
    async def prometheus_metrics() -> Response:
        text = metrics.render(
            queue_depth=pool.waiting, busy_workers=len(pool.busy), replaced_workers=pool.replaced
        )
        return Response(text, media_type=CONTENT_TYPE)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def explorer_page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    @app.get("/v1/version", responses=_errors())
    async def version() -> dict[str, str]:
        return known_versions

    async def compile_and_store(
        key: str, request: dict[str, Any], shown: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """The outcome of compiling `request`, stored under `key` when it may be; `shown`:
        the request as given, stored beside it (an explorer's compile: /v1/results)."""
        try:
            outcome = await pool.run(request, config.timeout)
            if "ok" in outcome and outcome.get("cacheable", True):
                blob = json.dumps(outcome["ok"]).encode()
                if shown is not None:  # first: the oldest rows go first, the result with it
                    cache.put(_request_key(key), json.dumps(shown).encode())
                cache.put(key, blob)
                hot.put(key, blob)
            return outcome
        finally:
            in_flight.pop(key, None)

    @app.post(
        "/v1/compile",
        response_model=CompileResponse,
        responses={
            200: {
                "description": "the compile's result",
                "links": {
                    "GetObjectFile": {
                        "operationId": "get_artifact",
                        "parameters": {"key": "$response.body#/key", "name": "kernel.o"},
                    }
                },
            },
            **_errors(400, 413, 422, 500, 503, 504),
        },
    )
    async def compile_source(
        body: Annotated[CompileRequest, Body(openapi_examples=COMPILE_EXAMPLES)],
    ) -> dict[str, Any] | Response:
        _check_size(body.source, config)
        given = cast(BaseModel, body.options).model_dump(exclude_unset=True)
        asked = dict(given)  # the options as the request gave them (an explorer's result keeps them)
        if given.get("target", body.target) != body.target:
            raise HTTPException(
                422,
                [{"loc": ["body", "options", "target"], "msg": "differs from the request's target"}],
            )
        # the compile entry refuses a target this build lacks (a 422 that names it)
        # the GPU mapping needs the polyhedral stage: -O3 unless the request says otherwise
        level = {"opt_level": 3} if body.target == "cuda" and "opt_level" not in given else {}
        if body.grad is not None:
            given["grad"] = (*(given.get("grad") or ()), body.grad.spec())
        options = _validated_options({**given, **level, "target": body.target})
        # what the tuning database holds for this kernel (a tuning may land at any time: the
        # choices are looked up here, once, and are both part of the key and what the worker uses)
        tuning = await asyncio.to_thread(
            compile_tuning, body.model_dump(), options, config.tuning_db
        )
        tuned = _tuned_for_job(tuning)
        key = cache_key(
            source=body.source,
            language=body.language,
            entry=body.entry,
            target=body.target,
            options={
                **options,
                "sizes": body.sizes,
                "emit": sorted(body.emit),
                # the explorer's answers hold more (an old key stays as it was without it)
                **({"explore": True} if body.explore else {}),
                # a tuned compile's key holds the tuning (an untuned one's is as before)
                **({} if tuning is None else {"tuned_choices": [tuning.choices, tuning.updated]}),
            },
            versions={
                **known_versions,
                **compiler_versions(march=options["march"], mtune=options["mtune"]),
            },
        )
        started = time.perf_counter()
        stored = hot.get(key)
        if stored is None:
            stored = cache.get(key)
            if stored is not None:
                hot.put(key, stored)
        if stored is not None:
            metrics.cache_hits.inc()
            metrics.latency.labels("hit").observe(time.perf_counter() - started)
            # the stored JSON object with the two fields of this answer added, as bytes: no
            # decoding and re-encoding of a result that may hold megabytes of base64
            tail = f',"key":{json.dumps(key)},"cached":true}}'.encode()
            return Response(stored[:-1] + tail, media_type="application/json")
        metrics.cache_misses.inc()
        # Identical requests in flight share one compile, which runs as a task of its own: a
        # handler cancelled mid-wait (the client went away) must not stop it between sending
        # the job and reading the answer, or the worker's next job would read this answer.
        task = in_flight.get(key)
        if task is None:
            request = {**body.model_dump(), "options": options, "tuning": tuned}
            shown = None
            if body.explore:
                shown = {
                    **body.model_dump(
                        include={"language", "source", "entry", "target", "sizes", "emit", "grad"}
                    ),
                    "options": asked,
                    "explore": True,
                }
            task = asyncio.ensure_future(compile_and_store(key, request, shown))
            task.add_done_callback(_retrieve)
            in_flight[key] = task
        try:
            outcome = await asyncio.shield(task)
        except QueueFull:
            raise HTTPException(
                503, "the compile queue is full", headers={"Retry-After": "1"}
            ) from None
        except JobTimeout:
            raise HTTPException(
                504, f"the compile took longer than {config.timeout} s and was stopped"
            ) from None
        except WorkerDied as died:
            raise HTTPException(
                500, f"the worker compiling this request died: {died}. It has been replaced"
            ) from None
        if "error" in outcome:
            error = outcome["error"]
            if error["status"] == 422:
                raise HTTPException(422, error["diagnostics"])
            raise HTTPException(error["status"], error.get("message", "compile failed"))
        metrics.latency.labels("miss").observe(time.perf_counter() - started)
        return {**outcome["ok"], "key": key, "cached": False}

    @app.get(
        "/v1/results/{key}",
        response_model=StoredResult,
        responses=_errors(404, 422),
    )
    async def stored_result(key: str) -> Response:
        """A result compiled with `explore: true`, with its request (the explorer's share
        links); 404 for any other key."""
        shown = await asyncio.to_thread(cache.get, _request_key(key))
        stored = hot.get(key) or (None if shown is None else await asyncio.to_thread(cache.get, key))
        if shown is None or stored is None:
            raise HTTPException(404, f"no result compiled for the explorer with key {key}")
        # the stored JSON as it is, with the answer's two fields added (no decoding)
        tail = f',"key":{json.dumps(key)},"cached":true}}'.encode()
        body = b'{"request":' + shown + b',"result":' + stored[:-1] + tail + b"}"
        return Response(body, media_type="application/json")

    @app.get(
        "/v1/artifacts/{key}/{name}",
        operation_id="get_artifact",
        response_class=Response,
        responses={
            200: {"content": {"application/octet-stream": {}}, "description": "the bytes"},
            **_errors(404, 422),
        },
    )
    async def artifact(key: str, name: str) -> Response:
        stored = hot.get(key) or cache.get(key)
        if stored is None:
            raise HTTPException(404, f"no result with key {key}")
        artifacts = json.loads(stored)["artifacts"]
        if name not in artifacts:
            raise HTTPException(404, f"result {key} has no artifact '{name}'")
        return Response(base64.b64decode(artifacts[name]), media_type="application/octet-stream")

    @app.post(
        "/v1/tune",
        status_code=202,
        response_model=TuneStatus,
        responses={
            202: {
                "description": "the tuning is queued",
                "links": {
                    "GetTuning": {
                        "operationId": "get_tuning",
                        "parameters": {"tune_id": "$response.body#/id"},
                    }
                },
            },
            **_errors(403, 413, 422, 503),
        },
        include_in_schema=config.allow_run,
    )
    async def start_tuning(body: TuneRequest) -> dict[str, Any]:
        if not config.allow_run:
            raise HTTPException(
                403,
                "tuning runs the submitted program; start the service with --allow-run to allow it",
            )
        _check_size(body.source, config)
        given = cast(BaseModel, body.options).model_dump(exclude_unset=True)
        if given.get("target", "cpu") != "cpu":
            where = ["body", "options", "target"]
            raise HTTPException(422, [{"loc": where, "msg": "the service tunes for the CPU only"}])
        options = _validated_options({"opt_level": 3, **given, "target": "cpu"})
        try:
            task = await asyncio.to_thread(_tune_task, body, options)
        except CompileError as exc:
            raise HTTPException(422, [exc.to_dict()]) from None
        budget = min(body.budget_seconds or config.max_tune_seconds, config.max_tune_seconds)
        try:
            return tunings.submit(
                task,
                language=body.language,
                entry=task.entry or None,
                search=body.search,
                budget=budget,
                max_candidates=body.max_candidates,
            )
        except TuneQueueFull:
            raise HTTPException(
                503,
                f"{config.max_tune_queue} tunings are waiting already",
                headers={"Retry-After": "60"},
            ) from None

    runs_waiting = 0
    run_lock = asyncio.Lock()  # one run at a time: its timings hold the cores

    @app.post(
        "/v1/run",
        response_model=RunResponse,
        responses=_errors(403, 413, 422, 503, 504),
        include_in_schema=config.allow_run,
    )
    async def run_against_baseline(body: RunRequest) -> dict[str, Any]:
        """Build the kernel with polyflow and the baseline (gcc, or NumPy for TC), run both in
        the sandbox, compare their outputs and times (server/run.py)."""
        if not config.allow_run:
            raise HTTPException(
                403,
                "running runs the submitted program; start the service with --allow-run to "
                "allow it",
            )
        _check_size(body.source, config)
        given = cast(BaseModel, body.options).model_dump(exclude_unset=True)
        if given.get("target", "cpu") != "cpu":
            where = ["body", "options", "target"]
            raise HTTPException(422, [{"loc": where, "msg": "the service runs on the CPU only"}])
        options = _validated_options(
            {"opt_level": 3, "march": "native", **given, "target": "cpu", "tuned": False}
        )
        try:
            await asyncio.to_thread(_check_runnable, body)
        except CompileError as exc:
            raise HTTPException(422, [exc.to_dict()]) from None
        if runs_waiting >= config.max_tune_queue:
            raise HTTPException(
                503, f"{runs_waiting} runs are waiting already", headers={"Retry-After": "10"}
            )
        from .run import RunRefused, run_request

        async def one_at_a_time() -> Any:
            nonlocal runs_waiting
            runs_waiting += 1
            try:
                await run_lock.acquire()
            finally:
                runs_waiting -= 1
            try:
                return await asyncio.to_thread(
                    run_request,
                    body.language,
                    body.source,
                    body.entry or None,
                    options,
                    body.sizes,
                    limits=_limits(config),
                    runs=config.run_repeats,
                    run_seconds=config.run_seconds,
                )
            finally:
                run_lock.release()

        # a task of its own: a client that goes away does not free the cores of a run going on
        task = asyncio.ensure_future(one_at_a_time())
        task.add_done_callback(_retrieve)
        try:
            outcome = await asyncio.shield(task)
        except RunRefused as exc:
            raise HTTPException(422, str(exc)) from None
        except CompileError as exc:
            raise HTTPException(422, [exc.to_dict()]) from None
        except TimeoutError as exc:
            raise HTTPException(
                504, f"{exc} (the service allows {config.run_seconds:g} s per run)"
            ) from None
        return dataclasses.asdict(outcome)

    @app.get(
        "/v1/tune/{tune_id}",
        operation_id="get_tuning",
        response_model=TuneStatus,
        responses=_errors(404),
        include_in_schema=config.allow_run,
    )
    async def get_tuning(tune_id: str) -> dict[str, Any]:
        view = tunings.view(tune_id)
        if view is None:
            raise HTTPException(404, f"no tuning with id {tune_id}")
        return view

    @app.delete(
        "/v1/tune/{tune_id}",
        response_model=TuneStatus,
        responses=_errors(404),
        include_in_schema=config.allow_run,
    )
    async def cancel_tuning(tune_id: str) -> dict[str, Any]:
        view = await asyncio.to_thread(tunings.cancel, tune_id)
        if view is None:
            raise HTTPException(404, f"no tuning with id {tune_id}")
        return view

    return app


def _request_key(key: str) -> str:
    """Where the compile cache keeps the request of the explorer's result `key`."""
    return f"{key}/request"


def _check_size(source: str, config: ServeConfig) -> None:
    if len(source.encode()) > config.max_source_bytes:
        raise HTTPException(413, f"the source is over the limit of {config.max_source_bytes} bytes")


def _validated_options(fields: dict[str, Any]) -> dict[str, Any]:
    """polyflow's Options of a request (as JSON): what its schema cannot say (Options'
    validators) is checked here, a 422 naming the field."""
    try:
        return Options(**fields).model_dump(mode="json")
    except ValidationError as exc:
        raise HTTPException(
            422,
            [
                {"loc": ["body", "options", *map(str, e["loc"])], "msg": e["msg"]}
                for e in exc.errors()
            ],
        ) from None


def _tuned_for_job(tuning: Tuning | None) -> dict[str, Any] | None:
    """What a compile job is told of the tuning it uses: the choices, and the report's note."""
    if tuning is None:
        return None
    note = tuning_note(tuning).replace("--no-tuned", '"options": {"tuned": false}')
    return {"choices": tuning.choices, "note": note}


def _tune_task(body: TuneRequest, options: dict[str, Any]) -> Any:
    """The tuner's task of a /v1/tune request (CompileError for what cannot be tuned)."""
    import re

    from polyflow.tune.tasks import CProgram, TcKernel

    if body.language == "tc":
        name, shapes = tc_signature(body.source, body.entry, body.sizes)
        return TcKernel(body.source, name, task_options(options), shapes)
    check_includes(body.source)
    if not re.search(r"\bmain\s*\(", body.source):
        raise CompileError(
            "a C tuning needs a whole program with main(): the tuner runs it to time the "
            "kernel and check its output (write a main that makes the inputs and calls it)",
            file="<input>",
        )
    timed = tuple(f.strip() for f in body.entry.split(",") if f.strip()) if body.entry else None
    if timed and not options.get("functions"):
        options = {**options, "functions": list(timed)}  # as the compile's key says
    return CProgram(body.source, "program.c", task_options(options), timed=timed)


def _check_runnable(body: RunRequest) -> None:
    """CompileError for a /v1/run request that cannot run: C without `main`, a header other
    than a standard one, a TC definition without its sizes."""
    import re

    if body.language == "tc":
        tc_signature(body.source, body.entry or None, body.sizes)
        return
    check_includes(body.source)
    if not re.search(r"\bmain\s*\(", body.source):
        raise CompileError(
            "running needs a whole program with main(): the service runs it and gcc's build of "
            "it, and compares what they print (write a main that makes the inputs, calls the "
            "kernel and prints a result)",
            file="<input>",
        )


def _limits(config: ServeConfig) -> Any:
    """The resource limits of a tuning's candidate processes (polyflow.tune.worker.Limits)."""
    from polyflow.tune.worker import Limits

    return Limits(
        cpu_seconds=config.tune_cpu_seconds,
        memory_bytes=config.tune_memory_bytes,
        file_bytes=config.tune_file_bytes,
        clean_env=True,
    )


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a compile task's exception as seen (every waiter may have gone away)."""
    if not task.cancelled():
        task.exception()


def _authorized(header: str, keys: frozenset[str]) -> bool:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return False
    return any(secrets.compare_digest(token.strip(), key) for key in keys)


__all__ = ["CompileRequest", "ServeConfig", "create_app"]
