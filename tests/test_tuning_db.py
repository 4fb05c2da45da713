"""The tuning database (polyflow/storage/tuning.py) on both of its backends: SQLite in a file of the
test's own, and a real PostgreSQL server (tests/postgres_server.py) with a fresh database per test.
"""

from __future__ import annotations

import json
import multiprocessing
import traceback
from pathlib import Path
from typing import Any

import pytest
from postgres_server import PostgresServer

from polyflow import Options
from polyflow.storage.tuning import (
    CandidateRecord,
    Tuning,
    TuningDB,
    TuningKey,
    apply_choices,
    c_tuning_key,
    tc_tuning_key,
    tuned_choices,
)

BACKENDS = ("sqlite", "postgresql")

SOURCE = """\
void kernel(int n, double A[n][n], double B[n][n]) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      B[i][j] = 2.0 * A[i][j];
}
"""

TC_SOURCE = "def scale(float(N, M) A) -> (B) { B(i, j) = 2 * A(i, j) }\n"


@pytest.fixture(autouse=True)
def _no_gpu_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 'cuda' key names the GPU; the variable keeps it from probing CuPy for one.
    monkeypatch.setenv("POLYFLOW_TUNING_GPU", "Test GPU")


def fresh_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path, name: str) -> str:
    """The URL of an empty database of `backend` that no other test sees."""
    if backend == "sqlite":
        return str(tmp_path / f"{name}.sqlite3")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return server.create_database()


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each backend in turn."""
    return fresh_url(request.param, request, tmp_path, "tuning")


def c_key(functions: list[str] | None = None, defines: tuple[str, ...] = ("N=64",)) -> TuningKey:
    """The key of SOURCE compiled with `functions` (None: all) and `defines`."""
    return c_tuning_key(SOURCE, functions=functions, defines=defines)


def make_tuning(key: TuningKey, choices: dict[str, Any], **fields: Any) -> Tuning:
    """A tuning of `key` (its digest, scope, entry, description) with `choices`; `fields` override."""
    values: dict[str, Any] = {
        "key": key.digest,
        "scope": key.scope,
        "entry": key.entry,
        "description": key.describe(),
        "choices": choices,
        "default_seconds": 0.25,
        "best_seconds": 0.125,
        "search": "tpe",
        "candidates": 12,
        "tuning_seconds": 31.5,
    }
    values.update(fields)
    return Tuning(**values)


def test_the_server_is_a_real_postgresql(postgres_url: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url) as connection:
        row = connection.execute("SELECT version(), current_database()").fetchone()
    assert row is not None
    assert row[0].startswith("PostgreSQL ")
    assert row[1] == "tuning"


def test_put_get_round_trip(url: str) -> None:
    db = TuningDB(url)
    key = c_key(["kernel"])
    tuning = make_tuning(
        key,
        {"tile_sizes": [32, 8], "fusion": "max", "parallel": False, "threads": None},
        default_seconds=None,  # the default failed to build: no speedup
        updated=1_700_000_000.123456,
    )
    assert db.get(key) is None
    db.put(tuning)
    assert db.get(key) == tuning
    assert db.get(key.digest) == tuning
    assert db.get(c_key(["other"])) is None
    assert db.all() == [tuning]
    assert tuning.speedup is None
    assert make_tuning(key, {}).speedup == 2.0
    # a second instance (another process's view) reads the same
    assert TuningDB(url).get(key) == tuning


def test_latest_put_of_a_key_wins(url: str) -> None:
    db = TuningDB(url)
    key = c_key(["kernel"])
    db.put(make_tuning(key, {"tile_sizes": [32]}, updated=100.0))
    latest = make_tuning(key, {"tile": False}, best_seconds=0.1, search="grid", updated=200.0)
    db.put(latest)
    assert db.get(key) == latest
    assert db.all() == [latest]


def test_in_scope_is_every_entry_of_the_same_kernel_and_inputs(url: str) -> None:
    db = TuningDB(url)
    first, second, every = c_key(["kernel"]), c_key(["kernel", "other"]), c_key(None)
    elsewhere = c_key(["kernel"], defines=("N=128",))
    assert len({first.digest, second.digest, every.digest}) == 3
    assert first.scope == second.scope == every.scope != elsewhere.scope
    db.put(make_tuning(first, {"tile": False}, updated=1.0))
    db.put(make_tuning(second, {"tile": True}, updated=2.0))
    db.put(make_tuning(elsewhere, {"fusion": "min"}, updated=3.0))
    assert [t.key for t in db.in_scope(every)] == [second.digest, first.digest]  # newest first
    assert [t.entry for t in db.in_scope(first)] == ["kernel,other", "kernel"]
    assert [t.key for t in db.in_scope(elsewhere)] == [elsewhere.digest]


def test_candidates_are_read_back_in_order(url: str) -> None:
    db = TuningDB(url)
    key = c_key(["kernel"])
    first_run = [
        CandidateRecord({}, "ok", 0.25, 1.5, "", 10.0),
        CandidateRecord({"tile_sizes": [64, 64]}, "ok", 0.125, 2.0, "", 11.0),
        CandidateRecord({"tile_sizes": [1]}, "wrong", 0.1, 1.0, "B[3][4] differs", 12.0),
    ]
    # Stamped in one instant (a coarse clock, or a batch stamped at once): they still come back
    # in the order their run recorded them, whatever order the database's sort gives ties.
    second_run = [
        CandidateRecord(
            {"threads": n}, "failed" if n % 5 == 0 else "ok", None, 0.5, f"run {n}", 20.0
        )
        for n in range(1, 101)
    ]
    # the later run recorded first: the rows are not in order already, so the database sorts
    db.add_candidates(key.digest, "run-2", second_run)
    db.add_candidates(key, "run-1", first_run)
    db.add_candidates(key, "run-3", [])
    db.add_candidates(c_key(["other"]), "run-4", [CandidateRecord({}, "timeout", created=15.0)])
    assert db.candidates(key) == first_run + second_run
    assert db.candidates(c_key(["other"])) == [CandidateRecord({}, "timeout", created=15.0)]
    assert db.candidates(c_key(None)) == []
    db.delete(key)
    assert db.candidates(key) == []
    assert db.get(key) is None


def fill(db: TuningDB) -> None:
    """Two tunings, with candidates, and a TC one without."""
    for n, functions in enumerate((["kernel"], ["kernel", "other"])):
        key = c_key(functions)
        db.put(make_tuning(key, {"tile_sizes": [16 * (n + 1)], "fusion": "min"}, updated=10.0 + n))
        db.add_candidates(
            key,
            "run",
            [
                CandidateRecord({}, "ok", 0.5, 1.0, "", 5.0),
                CandidateRecord({"tile_sizes": [16 * (n + 1)]}, "ok", 0.25, 1.25, "", 6.0),
                CandidateRecord({"fusion": "max"}, "pruned", message="a dependence", created=6.0),
            ],
        )
    tc = tc_tuning_key(TC_SOURCE, "scale", [((64, 32), "float32")], target="cuda")
    db.put(make_tuning(tc, {"block": [32, 8]}, default_seconds=None, updated=30.0))


@pytest.mark.parametrize(("source", "destination"), [BACKENDS, BACKENDS[::-1]])
def test_export_import_into_the_other_backend_keeps_everything(
    source: str, destination: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    exporter = TuningDB(fresh_url(source, request, tmp_path, "source"))
    importer = TuningDB(fresh_url(destination, request, tmp_path, "destination"))
    fill(exporter)
    exported = exporter.export_json()
    document = json.loads(json.dumps(exported))  # it is JSON, as a file would hold it
    assert document == exported
    assert [len(t["tried"]) for t in document["tunings"]] == [3, 3, 0]
    # an older tuning of the same key is replaced, its candidates with it
    key = c_key(["kernel"])
    importer.put(make_tuning(key, {"tile": False}, updated=1.0))
    importer.add_candidates(key, "old", [CandidateRecord({"tile": False}, "ok", 9.0)])
    assert importer.import_json(document) == 3
    assert importer.export_json() == exported
    assert importer.import_json(document) == 3  # again: nothing doubles
    assert importer.export_json() == exported
    for tuning in exporter.all():
        assert importer.get(tuning.key) == tuning
        assert importer.candidates(tuning.key) == exporter.candidates(tuning.key)
    with pytest.raises(ValueError, match="polyflow-tunings"):
        importer.import_json({"tunings": []})


def test_tuned_choices_of_the_exact_key_or_the_only_one_in_scope(url: str) -> None:
    db = TuningDB(url)
    kernel, both, every = c_key(["kernel"]), c_key(["kernel", "other"]), c_key(None)
    assert tuned_choices(every, url=url) is None  # nothing tuned yet
    tuned = make_tuning(kernel, {"tile_sizes": [32, 32]}, updated=1.0)
    db.put(tuned)
    assert tuned_choices(kernel, url=url) == tuned
    # a build of every function takes the only tuning of the file and inputs...
    assert tuned_choices(every, url=url) == tuned
    # ...but a build of other named functions does not
    assert tuned_choices(both, url=url) is None
    # two tunings in scope that agree: still one answer
    db.put(make_tuning(both, {"tile_sizes": [32, 32]}, updated=2.0))
    found = tuned_choices(every, url=url)
    assert found is not None and found.choices == {"tile_sizes": [32, 32]}
    # two that disagree: no guess
    db.put(make_tuning(both, {"tile_sizes": [64, 8]}, updated=3.0))
    assert tuned_choices(every, url=url) is None
    assert tuned_choices(kernel, url=url) == tuned  # the exact key still wins
    # and the key of every function, once tuned itself, wins over the scope
    own = make_tuning(every, {"parallel": False}, updated=4.0)
    db.put(own)
    assert tuned_choices(every, url=url) == own


def test_tuned_choices_of_a_tc_key_is_its_own_only(url: str) -> None:
    db = TuningDB(url)
    shapes = [((64, 32), "float32")]
    key = tc_tuning_key(TC_SOURCE, "scale", shapes)
    tuned = make_tuning(key, {"tile_sizes": [8]})
    db.put(tuned)
    assert tuned_choices(key, url=url) == tuned
    assert (
        tuned_choices(tc_tuning_key(TC_SOURCE, "scale", [((64, 64), "float32")]), url=url) is None
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuned_choices_of_an_unreadable_database_is_none(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    key = c_key(["kernel"])
    if backend == "sqlite":
        directory = tmp_path / "a-directory"
        directory.mkdir()
        garbage = tmp_path / "garbage.sqlite3"
        garbage.write_bytes(b"this is not a database, " * 100)
        blocked = tmp_path / "a-file"
        blocked.write_text("")
        unreadable = [
            str(directory),  # SQLite cannot open a directory
            str(garbage),  # nor read a file that is not a database
            str(blocked / "below" / "tuning.sqlite3"),  # nor make a directory below a file
        ]
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        unreadable = [
            server.url("no_such_database"),
            f"postgresql://postgres@/tuning?host={tmp_path}/no-server&port=5432",
            "postgresql://[not a url",
        ]
    for url in unreadable:
        assert tuned_choices(key, url=url) is None, url


def test_apply_choices_sets_only_the_tunable_fields() -> None:
    options = Options(opt_level=3, tile=True, defines=("N=64",))
    tuned = apply_choices(
        options,
        {
            "tile_sizes": [32, 16],
            "parallel": False,
            "fusion": "max",
            "target": "cuda",  # not tunable: the build's own
            "opt_level": 0,  # nor this
            "not_a_field": 1,
        },
    )
    assert isinstance(tuned, Options)
    assert tuned.tile_sizes == (32, 16) and isinstance(tuned.tile_sizes, tuple)
    assert (tuned.parallel, tuned.fusion) == (False, "max")
    assert (tuned.target, tuned.opt_level, tuned.defines) == ("cpu", 3, ("N=64",))
    # what neither the build nor the tuning set stays unset (the report tells them apart)
    assert tuned.model_fields_set == {
        "opt_level",
        "tile",
        "defines",
        "tile_sizes",
        "parallel",
        "fusion",
    }
    assert options.model_fields_set == {"opt_level", "tile", "defines"}  # untouched
    nothing = apply_choices(options, {"target": "cuda", "debug_info": True})
    assert nothing == options and nothing.model_fields_set == options.model_fields_set
    gpu = apply_choices(Options(target="cuda"), {"block": [32, 8], "grid": [4, 4, 1]})
    assert (gpu.block, gpu.grid) == ((32, 8), (4, 4, 1))


@pytest.mark.parametrize(
    "choices",
    [
        {"tile_sizes": [0, 32]},
        {"fusion": "everything"},
        {"micro_kernel_rows": 99},
        {"block": [64, 64]},  # 4096 threads
        {"threads": "many"},
    ],
)
def test_apply_choices_validates(choices: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        apply_choices(Options(), choices)


def test_keys_differ_where_the_best_options_may() -> None:
    base = c_tuning_key(SOURCE, functions=["kernel"], defines=["N=64", "M=8"])
    variants = {
        "source": c_tuning_key(
            SOURCE.replace("2.0", "3.0"), functions=["kernel"], defines=["N=64", "M=8"]
        ),
        "defines": c_tuning_key(SOURCE, functions=["kernel"], defines=["N=65", "M=8"]),
        "fewer defines": c_tuning_key(SOURCE, functions=["kernel"], defines=["N=64"]),
        "target": c_tuning_key(
            SOURCE, functions=["kernel"], defines=["N=64", "M=8"], target="cuda"
        ),
        "reassociation": c_tuning_key(
            SOURCE, functions=["kernel"], defines=["N=64", "M=8"], reassociation=True
        ),
        "functions": c_tuning_key(SOURCE, functions=["kernel", "x"], defines=["N=64", "M=8"]),
    }
    digests = {base.digest} | {key.digest for key in variants.values()}
    assert len(digests) == 1 + len(variants)
    for name, key in variants.items():
        # the entry is the one thing a scope leaves out
        assert (key.scope == base.scope) == (name == "functions"), name
    # what cannot change the best options does not change the key
    same = [
        c_tuning_key(SOURCE, functions=["kernel"], defines=["M=8", "N=64"]),  # define order
        c_tuning_key(SOURCE.replace("\n", "  \n"), functions=["kernel"], defines=["N=64", "M=8"]),
        c_tuning_key(SOURCE.replace("\n", "\r\n"), functions=["kernel"], defines=["N=64", "M=8"]),
        c_tuning_key(SOURCE + "\n\n\n", functions=["kernel"], defines=["N=64", "M=8"]),
    ]
    assert [key.digest for key in same] == [base.digest] * len(same)
    assert c_tuning_key(SOURCE, functions=None, defines=[]).entry == ""
    assert c_tuning_key(SOURCE, functions=[], defines=[]).entry == ""
    assert c_tuning_key(SOURCE, functions=["b", "a"], defines=[]).entry == "a,b"


def test_tc_keys_differ_by_shape_dtype_entry_and_target() -> None:
    shapes = [((64, 32), "float32"), ((), "float32")]
    base = tc_tuning_key(TC_SOURCE, "scale", shapes)
    assert base.inputs == ("64x32:float32", "scalar:float32")
    variants = [
        tc_tuning_key(TC_SOURCE, "scale", [((64, 64), "float32"), ((), "float32")]),
        tc_tuning_key(TC_SOURCE, "scale", [((64, 32), "float64"), ((), "float32")]),
        tc_tuning_key(TC_SOURCE, "scale2", shapes),
        tc_tuning_key(TC_SOURCE, "scale", shapes, target="cuda"),
        tc_tuning_key(TC_SOURCE, "scale", shapes, reassociation=True),
        tc_tuning_key(TC_SOURCE.replace("2 *", "3 *"), "scale", shapes),
        c_tuning_key(TC_SOURCE, functions=["scale"], defines=[]),  # another language
    ]
    assert len({base.digest} | {key.digest for key in variants}) == 1 + len(variants)
    assert tc_tuning_key(TC_SOURCE + "\n\n", "scale", shapes) == base
    assert base.describe()["machine"]["cores"]


WRITERS = 4
PUTS = 20


def _writer(url: str, number: int, barrier: Any, errors: Any) -> None:
    """One process's puts (and candidates) on its own TuningDB, all starting at once."""
    try:
        barrier.wait(timeout=60)
        db = TuningDB(url)  # every process creates the tables too, at the same moment
        shared = c_key(["shared"])
        for n in range(PUTS):
            key = c_key([f"kernel_{number}_{n}"])
            db.put(make_tuning(key, {"tile_sizes": [number + 1, n + 1]}))
            db.put(make_tuning(shared, {"threads": number + 1}))  # all on one row
        db.add_candidates(
            shared, f"writer-{number}", [CandidateRecord({"threads": number + 1}, "ok", 0.5)]
        )
        errors.put(None)
    except BaseException:
        errors.put(f"writer {number}:\n{traceback.format_exc()}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_processes_write_one_database_at_once(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    url = fresh_url(backend, request, tmp_path, "shared")  # no tables yet: the writers make them
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WRITERS)
    errors = context.Queue()
    writers = [
        context.Process(target=_writer, args=(url, number, barrier, errors))
        for number in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    reports = [errors.get(timeout=120) for _ in writers]
    for writer in writers:
        writer.join(timeout=30)
    assert [r for r in reports if r is not None] == []
    assert [writer.exitcode for writer in writers] == [0] * WRITERS
    db = TuningDB(url)
    tunings = {t.key: t for t in db.all()}
    assert len(tunings) == WRITERS * PUTS + 1
    for number in range(WRITERS):
        for n in range(PUTS):
            key = c_key([f"kernel_{number}_{n}"])
            assert tunings[key.digest].choices == {"tile_sizes": [number + 1, n + 1]}
    shared = tunings[c_key(["shared"]).digest]
    assert shared.choices["threads"] in range(1, WRITERS + 1)
    assert sorted(c.choices["threads"] for c in db.candidates(c_key(["shared"]))) == [1, 2, 3, 4]
