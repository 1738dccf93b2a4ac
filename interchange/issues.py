"""Issues found in an upload: ``Issue(file, line, field, message)``, the ``Collector`` that
gathers them and the one ``ValidationError`` every parser raises.

A hostile or broken file can hold an issue on every line (600 KB of ``{}`` lines is 400,000 of
them), so the collector keeps the first ``MAX_KEPT_ISSUES`` and counts the rest: callers store,
send and render at most that many plus the total.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_KEPT_ISSUES = 100


@dataclass(frozen=True)
class Issue:
    file: str
    line: int | None
    field: str | None
    message: str

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            where += f" [{self.field}]"
        return f"{where}: {self.message}"

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "field": self.field, "message": self.message}


def issues_as_dicts(issues: Iterable[Issue]) -> list[dict]:
    """Issues as JSON objects ``{file, line, field, message}`` (API answers, pages, stored jobs),
    sorted by file and line, file-wide ones (no line) first."""
    rows = [i.as_dict() for i in issues]
    return sorted(rows, key=lambda r: (r["file"] or "", r["line"] is not None, r["line"] or 0))


class ValidationError(Exception):
    """Raised with the issues found; ``issues`` is never empty and holds at most
    ``MAX_KEPT_ISSUES``; ``total`` counts every issue found (>= len(issues))."""

    def __init__(self, issues: list[Issue], *, total: int | None = None) -> None:
        self.issues = list(issues[:MAX_KEPT_ISSUES])
        self.total = max(total if total is not None else len(issues), len(self.issues))
        head = "; ".join(str(i) for i in self.issues[:5])
        more = f" (+{self.total - 5} more)" if self.total > 5 else ""
        super().__init__(f"{self.total} validation issue(s): {head}{more}")


class Collector:
    """Gathers issues: keeps the first ``cap``, counts all. Compare ``total`` (not
    ``len(issues)``) to tell whether a record added an issue."""

    def __init__(self, cap: int = MAX_KEPT_ISSUES) -> None:
        self.issues: list[Issue] = []
        self.total = 0
        self.cap = cap

    def add(self, file: str, line: int | None, fld: str | None, message: str) -> None:
        self.total += 1
        if len(self.issues) < self.cap:
            self.issues.append(Issue(file, line, fld, message))

    def extend(self, issues: list[Issue], total: int | None = None) -> None:
        for i in issues:
            self.add(i.file, i.line, i.field, i.message)
        if total is not None and total > len(issues):
            self.total += total - len(issues)

    def raise_if_any(self) -> None:
        if self.total:
            raise ValidationError(self.issues, total=self.total)
