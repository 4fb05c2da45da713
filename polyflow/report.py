"""The compile report: one versioned, JSON-serializable record of what a compile did, which
every stage appends to and every front end renders (the CLI's warnings and `--report`, the
service's `diagnostics` and `report`, later the explorer).

A report is a list of `Remark`s (after LLVM's optimization remarks): each says which stage made
it, a stable `kind` a program can select on, how loud it is (`warning`: something the user
asked for did not happen, or a float reduction reordered under -fassociative-math; `note`: a
choice worth knowing, e.g. code kept in source order; `remark`: a fact, e.g. a loop raised, a
band tiled, a loop run in parallel), a message for people, the function and the C/TC source position, and `data` (the
facts as JSON values: tile sizes, reduction kinds, ...). Beside them: the isl schedule tree of
each rescheduled function and the time of each step.

The kinds stages emit today (`data` keys in parentheses):
  frontend  left-to-cc (reason), not-compiled (the service: reason), pragma, constant-argument
            (arguments: a static function's parameters every call passes as one constant)
  raising   not-raised (function), loop (raised: bool, construct, reason, reductions),
            unraised (an if or access left unraised)
  schedule  not-scheduled, source-order, untiled, unfused, rescheduled, tiled (sizes,
            second_level, wavefront, contraction), parallel-loop (reductions),
            float-reduction (reduction), micro-kernel (rows, vectors, lanes), no-openmp-runtime
  lowering  vectorized (loops: width, interleave), kept-scalar (a loop whose accesses would
            all be gathers), register-shifts (lanes: a vector loop whose row neighbours are
            shifted in registers)
  build     openmp-object, internal-error, unknown-function, macro-redefined

`REPORT_VERSION` changes whenever a field changes meaning or goes away (a new kind or `data`
key does not change it). No MLIR here: stages turn their IR into remarks themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from polyflow.errors import SourcePosition

REPORT_VERSION = 1

Severity = Literal["warning", "note", "remark"]
SEVERITIES: tuple[str, ...] = get_args(Severity)

# A value of `Remark.data`: what `json` writes.
Json = None | bool | int | float | str | list["Json"] | dict[str, "Json"]


@dataclass(frozen=True)
class Remark:
    """One thing a stage did or did not do, where, and why."""

    stage: str  # frontend, raising, schedule, lowering, build
    kind: str  # stable, for programs (see the module docstring)
    severity: Severity
    message: str  # for people, without position or function name
    function: str | None = None  # the C/TC name
    position: SourcePosition | None = None
    data: Mapping[str, Json] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """`file:line:col` (`file:line`, `file` when that is all that is known), or
        `<unknown>`."""
        if self.position is None:
            return "<unknown>"
        if self.position.line <= 0:
            return self.position.file
        if self.position.column <= 0:
            return f"{self.position.file}:{self.position.line}"
        return f"{self.position.file}:{self.position.line}:{self.position.column}"

    def text(self) -> str:
        """One line as a compiler prints it: warnings `where: warning: message` (as gcc
        does; `warning: message` when nothing says where), notes and remarks
        `function: message` (the message says where, if it matters)."""
        if self.severity == "warning":
            prefix = f"{self.where}: " if self.position else ""
            return f"{prefix}warning: {self.message}"
        return f"{self.function}: {self.message}" if self.function else self.message

    def to_dict(self) -> dict[str, Json]:
        position = self.position
        return {
            "stage": self.stage,
            "kind": self.kind,
            "severity": self.severity,
            "message": self.message,
            "function": self.function,
            "file": position.file if position else None,
            "line": position.line if position else None,
            "column": position.column if position else None,
            "data": dict(self.data),
        }

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> Remark:
        """The remark `to_dict` wrote."""
        severity = record["severity"]
        if severity not in SEVERITIES:
            raise ValueError(f"unknown severity '{severity}'")
        position = None
        if record.get("file") is not None:
            position = SourcePosition(
                str(record["file"]), int(record.get("line") or 0), int(record.get("column") or 0)
            )
        return cls(
            stage=str(record["stage"]),
            kind=str(record["kind"]),
            severity=severity,
            message=str(record["message"]),
            function=record.get("function"),
            position=position,
            data=dict(record.get("data") or {}),
        )


@dataclass
class CompileReport:
    """Everything a compile said, in the order the stages said it (see the module docstring)."""

    remarks: list[Remark] = field(default_factory=list)
    schedules: dict[str, str] = field(default_factory=dict)  # function → isl schedule tree
    timings: dict[str, float] = field(default_factory=dict)  # step → seconds
    version: int = REPORT_VERSION

    def add(self, remark: Remark) -> Remark:
        self.remarks.append(remark)
        return remark

    def extend(self, other: CompileReport) -> None:
        """Append `other`'s remarks and schedules; sum its timings into ours (the report of
        compiles of disjoint sets of functions, e.g. in worker processes)."""
        self.remarks += other.remarks
        self.schedules.update(other.schedules)
        for step, seconds in other.timings.items():
            self.timings[step] = self.timings.get(step, 0.0) + seconds

    def select(
        self,
        *,
        kind: str | None = None,
        stage: str | None = None,
        severity: Severity | None = None,
        function: str | None = None,
    ) -> list[Remark]:
        """The remarks matching every criterion given."""
        return [
            r
            for r in self.remarks
            if (kind is None or r.kind == kind)
            and (stage is None or r.stage == stage)
            and (severity is None or r.severity == severity)
            and (function is None or r.function == function)
        ]

    @property
    def warnings(self) -> list[str]:
        """The warnings as lines of text, in order."""
        return [r.text() for r in self.remarks if r.severity == "warning"]

    @property
    def notes(self) -> list[str]:
        """The notes as lines of text, in order."""
        return [r.text() for r in self.remarks if r.severity == "note"]

    def format(self, severities: Iterable[Severity] = ("warning", "note", "remark")) -> str:
        """The remarks of the given severities, one line each (`Remark.text`); remarks (facts)
        are grouped per function after the warnings and notes."""
        wanted = set(severities)
        lines = [r.text() for r in self.remarks if r.severity != "remark" and r.severity in wanted]
        if "remark" in wanted:
            facts = [r for r in self.remarks if r.severity == "remark"]
            for name in dict.fromkeys(r.function for r in facts):
                lines.append(f"{name}:")
                lines += [
                    f"  {r.where}: {r.message}" if r.position else f"  {r.message}"
                    for r in facts
                    if r.function == name
                ]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Json]:
        return {
            "version": self.version,
            "remarks": [r.to_dict() for r in self.remarks],
            "schedules": dict(self.schedules),
            "timings": dict(self.timings),
        }

    def to_json(self, *, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> CompileReport:
        """The report `to_dict` wrote; ValueError for another version's."""
        version = record.get("version")
        if version != REPORT_VERSION:
            raise ValueError(f"report version {version}, this polyflow reads {REPORT_VERSION}")
        return cls(
            remarks=[Remark.from_dict(r) for r in record.get("remarks", [])],
            schedules={str(k): str(v) for k, v in dict(record.get("schedules", {})).items()},
            timings={str(k): float(v) for k, v in dict(record.get("timings", {})).items()},
        )


class ReportViews:
    """`warnings`, `notes`, `schedules` and `timings` of a result that holds a `report`: the
    text and tables earlier callers read, as views of the one report."""

    report: CompileReport

    @property
    def warnings(self) -> list[str]:
        return self.report.warnings

    @property
    def notes(self) -> list[str]:
        return self.report.notes

    @property
    def schedules(self) -> dict[str, str]:
        return self.report.schedules

    @property
    def timings(self) -> dict[str, float]:
        return self.report.timings


__all__ = ["REPORT_VERSION", "CompileReport", "Json", "Remark", "ReportViews", "Severity"]
