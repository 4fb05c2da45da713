"""`make real-world`: build real C code bases nobody here wrote with their own build systems,
once with gcc and once with `polyflow-cc`, run their own test suites, and report the timings side
by side and what polyflow made of each function.

The code bases are Debian's source packages (scripts/fetch_deb_sources.sh downloads them):
  zlib   general-purpose C; ./configure, make, `make test`
  cjson  general-purpose C under a strict CMake build (-std=c89 -pedantic -Werror ...); ctest
  gsl    the GNU Scientific Library, numerical C with loop nests; ./configure, make, `make check`

Each build gets the same CFLAGS with both compilers (default `-O3 -march=native`). polyflow-cc
writes one JSON line per unit it compiles ($POLYFLOW_CC_REPORT): the functions with loops, those
compiled through MLIR, those whose loops were raised to affine ("optimized"), and why the rest
stayed with cc. The report goes to real_world/results/<date>.{md,json}.

    python scripts/real_world.py [--projects zlib,cjson,gsl] [--cflags "-O3"] [--jobs 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
console = Console(stderr=True)


@dataclass(frozen=True)
class Project:
    name: str  # Debian source package
    kind: str  # "autoconf" (configure, make) or "cmake"
    test: list[str]  # the project's own test command, in its build directory
    configure: list[str] = field(default_factory=list)  # extra configure / cmake arguments
    # commands run in the build directory after configuring (e.g. what a Debian tarball lacks)
    prepare: list[list[str]] = field(default_factory=list)
    # the project's CFLAGS where the common ones do not suit it (both compilers), and what
    # polyflow's compile gets over them (POLYFLOW_FLAGS)
    cflags: str | None = None
    polyflow_flags: str = ""


PROJECTS = {
    "zlib": Project("zlib", "autoconf", ["make", "test"]),
    "cjson": Project(
        "cjson", "cmake", ["ctest", "--output-on-failure"], ["-DENABLE_CJSON_TEST=On"]
    ),
    # shared libraries only: libtool would otherwise compile every unit twice; Debian's tarball
    # has no manual sources, so the doc directory is left out of the build
    "gsl": Project(
        "gsl",
        "autoconf",
        ["make", "check"],
        ["--disable-static"],
        prepare=[["sed", "-i", "-E", r"/^SUBDIRS = /s/ doc( |$)/\1/", "Makefile"]],
        # gcc -O3 fails GSL's own rng test (random32-bsd, random64-libc5, ...: 4 checks) and
        # gcc -O2 -march=native its linalg test (FMA contraction: cholesky_invert of a Hilbert
        # matrix expects an exact 0), so both compilers build GSL as Debian does, -O2 for
        # generic x86-64; polyflow's functions get -O3
        cflags="-O2",
        polyflow_flags="-O3",
    ),
}


@dataclass
class Phase:
    seconds: float
    ok: bool
    log: str


@dataclass
class Build:
    project: str
    compiler: str
    phases: dict[str, Phase] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.phases.values()) and "test" in self.phases


def fetch(projects: list[str], downloads: Path) -> None:
    subprocess.run(
        ["bash", str(ROOT / "scripts" / "fetch_deb_sources.sh"), str(downloads), *projects],
        check=True,
    )


def unpack(project: str, downloads: Path, dest: Path) -> Path:
    """The upstream tarball of `project`, extracted afresh into `dest`; its top directory."""
    tarballs = sorted(downloads.glob(f"{project}_*.orig.tar.*"))
    if not tarballs:
        raise SystemExit(f"real-world: no source tarball of {project} in {downloads}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    with tarfile.open(tarballs[-1]) as tar:
        tar.extractall(dest, filter="data")
    (top,) = [p for p in dest.iterdir() if p.is_dir()]
    return top


def run_phase(build: Build, phase: str, cmd: list[str], cwd: Path, env: dict[str, str]) -> bool:
    log = cwd / f"polyflow-real-world-{phase}.log"
    start = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    build.phases[phase] = Phase(time.perf_counter() - start, done.returncode == 0, str(log))
    mark = "[green]ok[/]" if done.returncode == 0 else f"[red]FAILED[/] (see {log})"
    console.print(
        f"  {build.project:6} {build.compiler:11} {phase:9} "
        f"{build.phases[phase].seconds:7.1f} s  {mark}"
    )
    return done.returncode == 0


def build_and_test(
    project: Project, compiler: str, cc: str, cflags: str, jobs: int, work: Path, report: Path
) -> Build:
    build = Build(project.name, compiler)
    top = unpack(project.name, work / "downloads", work / f"{project.name}-{compiler}")
    cflags = project.cflags or cflags
    env = {**os.environ, "CC": cc, "CFLAGS": cflags}
    if compiler == "polyflow-cc":
        env["POLYFLOW_CC_REPORT"] = str(report)
        env["POLYFLOW_FLAGS"] = project.polyflow_flags
        env["POLYFLOW_CACHE"] = "off"  # every unit compiled, as a clean build does
    if project.kind == "cmake":
        where = top / "build"
        where.mkdir()
        configure = [
            "cmake", "..", f"-DCMAKE_C_COMPILER={cc}", f"-DCMAKE_C_FLAGS={cflags}",
            "-DCMAKE_BUILD_TYPE=None", *project.configure,
        ]  # fmt: skip
    else:
        where = top
        configure = ["./configure", *project.configure]
    if not run_phase(build, "configure", configure, where, env):
        return build
    for command in project.prepare:
        subprocess.run(command, cwd=where, check=True)
    if not run_phase(build, "build", ["make", f"-j{jobs}"], where, env):
        return build
    test = [*project.test, f"-j{jobs}"] if project.test[0] == "make" else project.test
    run_phase(build, "test", test, where, env)
    return build


# Names and numbers in fallback reasons, for grouping the reasons by kind.
_QUOTED = re.compile(r"'[^']*'")
_AT = re.compile(r" \(at \d+:\d+\)$")


def summarize_units(report: Path) -> dict[str, object]:
    """Totals over polyflow-cc's per-unit lines: units, functions with loops, compiled,
    optimized, and the reasons functions and units stayed with cc."""
    units = (
        [json.loads(line) for line in report.read_text().splitlines()] if report.exists() else []
    )
    by_unit: dict[str, dict[str, object]] = {}
    for unit in units:  # a unit compiled twice (libtool's PIC and non-PIC objects): once
        by_unit[unit["unit"]] = unit
    loops = compiled = optimized = 0
    reasons: Counter[str] = Counter()
    unit_reasons: Counter[str] = Counter()
    whole_cc = 0
    for unit in by_unit.values():
        if unit["status"] != "polyflow":
            whole_cc += 1
            unit_reasons[_QUOTED.sub("'…'", str(unit.get("reason", "")))[:100]] += 1
            continue
        with_loops = set(unit["loop_functions"])
        loops += len(with_loops)
        compiled += len(with_loops & set(unit["compiled"]))
        optimized += len(with_loops & set(unit["optimized"]))
        fallbacks = unit["fallbacks"]
        for name in with_loops - set(unit["compiled"]):
            why = fallbacks.get(name, "main() is always compiled by cc")
            reasons[_AT.sub("", _QUOTED.sub("'…'", why))[:100]] += 1
    return {
        "units": len(by_unit),
        "units_left_to_cc": whole_cc,
        "unit_reasons": unit_reasons.most_common(),
        "loop_functions": loops,
        "compiled": compiled,
        "optimized": optimized,
        "reasons": reasons.most_common(),
        "seconds_in_polyflow_cc": round(sum(float(u.get("seconds", 0)) for u in units), 1),
    }


def _project_flags() -> str:
    return "; ".join(
        f"{p.name}: CFLAGS `{p.cflags}`, POLYFLOW_FLAGS `{p.polyflow_flags}`"
        for p in PROJECTS.values()
        if p.cflags
    )


def write_report(builds: list[Build], summaries: dict[str, dict[str, object]], cflags: str) -> Path:
    out_dir = ROOT / "real_world" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = dt.date.today().isoformat()
    data = {
        "date": stamp,
        "cflags": cflags,
        "builds": [
            {
                "project": b.project,
                "compiler": b.compiler,
                "ok": b.ok,
                "phases": {
                    k: {"seconds": round(p.seconds, 1), "ok": p.ok} for k, p in b.phases.items()
                },
            }
            for b in builds
        ],
        "functions": summaries,
    }
    (out_dir / f"{stamp}.json").write_text(json.dumps(data, indent=2) + "\n")
    lines = [
        f"# Real code bases built with polyflow-cc ({stamp})",
        "",
        f"CFLAGS `{cflags}` for both compilers unless a project says otherwise "
        f"({_project_flags()}); `make -j` builds on this machine; each project's",
        "own test suite. Times in seconds (build = compiling and linking; test = building and",
        "running the tests, as the project's test target does).",
        "",
        "| project | compiler | configure | build | test | tests pass | build time vs gcc |",
        "|---|---|---|---|---|---|---|",
    ]
    gcc_build = {b.project: b.phases.get("build") for b in builds if b.compiler == "gcc"}
    for b in builds:
        cells = [
            f"{b.phases[k].seconds:.1f}" if k in b.phases else "—"
            for k in ("configure", "build", "test")
        ]
        ratio = "—"
        base = gcc_build.get(b.project)
        if b.compiler != "gcc" and base and "build" in b.phases:
            ratio = f"{b.phases['build'].seconds / base.seconds:.1f}×"
        lines.append(
            f"| {b.project} | {b.compiler} | {' | '.join(cells)} | {'yes' if b.ok else 'NO'} | {ratio} |"
        )
    lines += ["", "## What polyflow made of the functions with loops", ""]
    lines += [
        "| project | units | units left to cc whole | functions with loops | through MLIR | "
        "optimized (loops raised) | share through MLIR |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in summaries.items():
        share = f"{100 * int(s['compiled']) / max(1, int(s['loop_functions'])):.0f} %"
        lines.append(
            f"| {name} | {s['units']} | {s['units_left_to_cc']} | {s['loop_functions']} | "
            f"{s['compiled']} | {s['optimized']} | {share} |"
        )
    for name, s in summaries.items():
        lines += ["", f"### {name}: why functions with loops stayed with cc", ""]
        lines += ["| functions | reason |", "|---|---|"]
        lines += [f"| {n} | {r.replace('|', '/')} |" for r, n in s["reasons"][:15]]  # type: ignore[index]
        if s["unit_reasons"]:
            lines += ["", "Units compiled by cc whole:", ""]
            lines += [f"- {n}× {r}" for r, n in s["unit_reasons"]]  # type: ignore[union-attr]
    path = out_dir / f"{stamp}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", default=",".join(PROJECTS), help="comma-separated")
    parser.add_argument("--cflags", default="-O3 -march=native")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "real-world")
    parser.add_argument(
        "--compilers", default="gcc,polyflow-cc", help="which builds to run (comma-separated)"
    )
    parser.add_argument(
        "--polyflow-cc",
        type=Path,
        default=Path(sys.executable).parent / "polyflow-cc",
        help="the polyflow-cc to build with (default: this environment's)",
    )
    args = parser.parse_args()
    names = [n for n in args.projects.split(",") if n]
    unknown = [n for n in names if n not in PROJECTS]
    if unknown:
        parser.error(f"unknown project(s) {', '.join(unknown)} (known: {', '.join(PROJECTS)})")
    compilers = {"gcc": shutil.which("gcc") or "gcc", "polyflow-cc": str(args.polyflow_cc)}
    fetch(names, args.work / "downloads")
    builds: list[Build] = []
    summaries: dict[str, dict[str, object]] = {}
    for name in names:
        report = args.work / f"{name}-units.jsonl"
        report.unlink(missing_ok=True)
        for compiler in args.compilers.split(","):
            cc = compilers[compiler]
            project = PROJECTS[name]
            builds.append(
                build_and_test(project, compiler, cc, args.cflags, args.jobs, args.work, report)
            )
        if "polyflow-cc" in args.compilers:
            summaries[name] = summarize_units(report)
    table = Table(title="real code bases: gcc and polyflow-cc")
    for column in ("project", "compiler", "build s", "test s", "tests pass"):
        table.add_column(column)
    for b in builds:
        table.add_row(
            b.project,
            b.compiler,
            f"{b.phases['build'].seconds:.1f}" if "build" in b.phases else "—",
            f"{b.phases['test'].seconds:.1f}" if "test" in b.phases else "—",
            "yes" if b.ok else "[red]NO[/]",
        )
    console.print(table)
    for name, s in summaries.items():
        console.print(
            f"{name}: {s['compiled']} of {s['loop_functions']} functions with loops through "
            f"MLIR, {s['optimized']} optimized; {s['units_left_to_cc']} of {s['units']} units "
            "left to cc whole"
        )
    path = write_report(builds, summaries, args.cflags)
    console.print(f"report: {path.relative_to(ROOT)}")
    return 0 if all(b.ok for b in builds) else 1


if __name__ == "__main__":
    sys.exit(main())
