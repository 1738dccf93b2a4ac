"""Scenario files (DESIGN section 5): parsing and validation, no Django.

A scenario is a folder (or a set of uploaded files) holding `memories.jsonl` (or `.json` /
`.csv`), and optionally `incidents.jsonl`, `probes.jsonl`, `agent.json`, `truth.json`.
Every problem found is collected as an `Issue(file, line, field, message)`; loading raises one
`ValidationError` carrying all of them, so nothing is half-imported.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

MEMORY_FILENAMES = ("memories.jsonl", "memories.json", "memories.csv")
CONNECTORS = ("builtin-vote", "builtin-reader", "openai-chat", "webhook")
HARM_TYPES = ("contains", "regex", "similarity", "llm-judge")


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


class ValidationError(Exception):
    """Raised with every issue found; `issues` is never empty."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = list(issues)
        head = "; ".join(str(i) for i in self.issues[:5])
        more = f" (+{len(self.issues) - 5} more)" if len(self.issues) > 5 else ""
        super().__init__(f"{len(self.issues)} validation issue(s): {head}{more}")


@dataclass
class MemoryRecord:
    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: str | None = None


@dataclass
class HarmSpec:
    type: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HarmSpec:
        return cls(type=str(d["type"]), params={k: v for k, v in d.items() if k != "type"})

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.params}


@dataclass
class Incident:
    id: str
    query: str
    output: str
    retrieved: list[str]
    harm: HarmSpec | None = None
    # Observed harm value when the file gives a number instead of a spec.
    harm_value: float | None = None
    # Answer options of the probe an incident came from (used by builtin-reader).
    candidates: list[str] | None = None


@dataclass
class Probe:
    id: str
    query: str
    harm: HarmSpec
    observed: bool = False
    candidates: list[str] | None = None


@dataclass
class AgentConfig:
    connector: str
    top_k: int = 5
    settings: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AgentConfig:
        rest = {k: v for k, v in d.items() if k not in ("connector", "top_k")}
        return cls(connector=str(d["connector"]), top_k=int(d.get("top_k", 5)), settings=rest)

    def to_dict(self) -> dict[str, Any]:
        return {"connector": self.connector, "top_k": self.top_k, **self.settings}


@dataclass
class Scenario:
    memories: list[MemoryRecord]
    incidents: list[Incident] | None = None
    probes: list[Probe] = field(default_factory=list)
    agent: AgentConfig = field(default_factory=lambda: AgentConfig("builtin-vote"))
    truth: set[str] | None = None
    source: str | None = None


# ----------------------------------------------------------------------------- helpers


class _Collector:
    def __init__(self) -> None:
        self.issues: list[Issue] = []

    def add(self, file: str, line: int | None, fld: str | None, message: str) -> None:
        self.issues.append(Issue(file, line, fld, message))


def _decode(data: bytes, filename: str, col: _Collector) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col.add(filename, line, None, f"not valid UTF-8 (byte offset {exc.start})")
        return None
    return text.removeprefix("\ufeff")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _loads(raw: str) -> Any:
    """``json.loads`` limited to RFC 8259 JSON: NaN/Infinity refused (the database's JSON
    refuses them); nesting beyond the recursion limit and integers beyond Python's digit
    limit raise ValueError instead of escaping as other exceptions."""
    try:
        return json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _unstorable(obj: Any, path: str = "") -> tuple[str, str] | None:
    """(field path, why) of the first string no database can store: NUL (PostgreSQL text and
    jsonb refuse it) or a lone surrogate (not encodable as UTF-8)."""
    stack = [(path, obj)]
    while stack:
        where, v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return where, "contains a NUL character"
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return where, "contains a lone surrogate (not valid Unicode text)"
        elif isinstance(v, dict):
            for k, x in v.items():
                sub = f"{where}.{k}" if where else str(k)
                stack.append((where, k))
                stack.append((sub, x))
        elif isinstance(v, list):
            stack.extend((f"{where}[{i}]", x) for i, x in enumerate(v))
    return None


def _checked(obj: Any, filename: str, line: int, col: _Collector) -> bool:
    bad = _unstorable(obj)
    if bad is not None:
        col.add(filename, line, bad[0].encode("utf-8", "backslashreplace").decode() or None, bad[1])
        return False
    return True


def _iter_jsonl(text: str, filename: str, col: _Collector) -> Iterator[tuple[int, Any]]:
    # Lines end at "\n" only: str.splitlines() also splits at U+2028/U+2029, U+0085 and
    # others, which JSON strings may hold unescaped, and would cut a valid record in two.
    for n, raw in enumerate(text.split("\n"), start=1):
        raw = raw.removesuffix("\r")
        if not raw.strip():
            continue
        try:
            obj = _loads(raw)
        except json.JSONDecodeError as exc:
            col.add(filename, n, None, f"bad JSON: {exc.msg} (column {exc.colno})")
            continue
        except ValueError as exc:
            col.add(filename, n, None, f"bad JSON: {exc}")
            continue
        if _checked(obj, filename, n, col):
            yield n, obj


def _iter_json_array(text: str, filename: str, col: _Collector) -> Iterator[tuple[int, Any]]:
    """Yield (line, element) of a top-level JSON array, with each element's starting line."""
    dec = json.JSONDecoder(parse_constant=_reject_constant)
    ws = " \t\r\n"
    i = 0
    while i < len(text) and text[i] in ws:
        i += 1
    if i >= len(text) or text[i] != "[":
        try:
            _loads(text)
        except json.JSONDecodeError as exc:
            col.add(filename, exc.lineno, None, f"bad JSON: {exc.msg} (column {exc.colno})")
            return
        except ValueError as exc:
            col.add(filename, 1, None, f"bad JSON: {exc}")
            return
        col.add(filename, 1, None, "expected a JSON array of objects")
        return
    i += 1
    while True:
        while i < len(text) and text[i] in ws:
            i += 1
        if i < len(text) and text[i] == "]":
            i += 1
            break
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            col.add(filename, exc.lineno, None, f"bad JSON: {exc.msg} (column {exc.colno})")
            return
        except (ValueError, RecursionError) as exc:
            why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            col.add(filename, text.count("\n", 0, i) + 1, None, f"bad JSON: {why}")
            return
        line = text.count("\n", 0, i) + 1
        if _checked(obj, filename, line, col):
            yield line, obj
        i = end
        while i < len(text) and text[i] in ws:
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "]":
            i += 1
            break
        col.add(filename, text.count("\n", 0, i) + 1, None, "bad JSON: expected ',' or ']'")
        return
    if text[i:].strip():
        col.add(filename, text.count("\n", 0, i) + 1, None, "bad JSON: data after the array")


def _is_rfc3339(s: str) -> bool:
    if "T" not in s.upper() and " " not in s:
        return False
    try:
        dt = datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError:
        return False
    return dt.tzinfo is not None


def first_line_containing(data: bytes, needle: bytes) -> int | None:
    """Best-effort line of a record found after parsing (the records keep no line): the first
    line of the upload holding ``needle``."""
    for n, raw in enumerate(data.splitlines(), start=1):
        if needle in raw:
            return n
    return None


# Memory and incident ids are stored in 255-character columns.
MAX_ID_LENGTH = 255


def _req_id(obj: Mapping[str, Any], file: str, line: int | None, col: _Collector) -> str | None:
    v = _req_str(obj, "id", file, line, col)
    if v is not None and len(v) > MAX_ID_LENGTH:
        col.add(file, line, "id", f"is {len(v)} characters long; ids have at most {MAX_ID_LENGTH}")
        return None
    return v


def _req_str(obj: Mapping[str, Any], key: str, file: str, line: int | None, col: _Collector,
             *, non_empty: bool = True) -> str | None:
    if key not in obj:
        col.add(file, line, key, "missing")
        return None
    v = obj[key]
    if not isinstance(v, str):
        col.add(file, line, key, f"must be a string, got {type(v).__name__}")
        return None
    if non_empty and not v.strip():
        col.add(file, line, key, "must not be empty")
        return None
    return v


def _check_unique(ids: list[tuple[str, int | None]], file: str, col: _Collector) -> None:
    seen: dict[str, int | None] = {}
    for i, line in ids:
        if i in seen:
            col.add(file, line, "id", f"duplicate id {i!r} (first on line {seen[i]})")
        else:
            seen[i] = line


def _parse_harm(v: Any, file: str, line: int | None, fld: str, col: _Collector) -> HarmSpec | None:
    if not isinstance(v, dict):
        col.add(file, line, fld, f"must be an object with a 'type', got {type(v).__name__}")
        return None
    t = v.get("type")
    if t not in HARM_TYPES:
        col.add(file, line, f"{fld}.type", f"unknown harm type {t!r}; one of {', '.join(HARM_TYPES)}")
        return None
    if t == "contains" and not (isinstance(v.get("target"), str) and v["target"]):
        col.add(file, line, f"{fld}.target", "a non-empty string is required for 'contains'")
        return None
    if t == "regex":
        import re

        if not isinstance(v.get("pattern"), str):
            col.add(file, line, f"{fld}.pattern", "a string is required for 'regex'")
            return None
        try:
            re.compile(v["pattern"])
        except re.error as exc:
            col.add(file, line, f"{fld}.pattern", f"invalid regular expression: {exc}")
            return None
    return HarmSpec.from_dict(v)


def _opt_str_list(obj: Mapping[str, Any], key: str, file: str, line: int | None,
                  col: _Collector) -> list[str] | None:
    if key not in obj or obj[key] is None:
        return None
    v = obj[key]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        col.add(file, line, key, "must be a list of strings")
        return None
    return list(v)


# ----------------------------------------------------------------------------- memories


def _memory_from_obj(obj: Any, file: str, line: int | None, col: _Collector) -> MemoryRecord | None:
    if not isinstance(obj, dict):
        col.add(file, line, None, f"expected an object, got {type(obj).__name__}")
        return None
    n_before = len(col.issues)
    mid = _req_id(obj, file, line, col)
    text = _req_str(obj, "text", file, line, col)
    meta = obj.get("metadata", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        col.add(file, line, "metadata", f"must be an object, got {type(meta).__name__}")
    created = obj.get("created_at")
    if created is not None and (not isinstance(created, str) or not _is_rfc3339(created)):
        col.add(file, line, "created_at", f"must be an RFC 3339 timestamp, got {created!r}")
    if len(col.issues) != n_before or mid is None or text is None:
        return None
    return MemoryRecord(id=mid, text=text, metadata=dict(meta), created_at=created)


def _memories_from_csv(text: str, file: str, col: _Collector) -> Iterator[tuple[int, Any]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    fields = reader.fieldnames or []
    for required in ("id", "text"):
        if required not in fields:
            col.add(file, 1, required, "missing column")
    if any(r not in fields for r in ("id", "text")):
        return
    extra = [f for f in fields if f not in ("id", "text", "metadata", "created_at")]
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            return
        except csv.Error as exc:  # e.g. a field over csv.field_size_limit(), an unclosed quote
            col.add(file, reader.line_num + 1, None, f"bad CSV: {exc}")  # the line being read
            return
        line = reader.line_num
        bad = _unstorable({k: v for k, v in row.items() if k is not None})
        if bad is not None:
            col.add(file, line, bad[0] or None, bad[1])
            continue
        obj: dict[str, Any] = {"id": row.get("id"), "text": row.get("text")}
        meta: Any = {}
        if row.get("metadata"):
            try:
                meta = _loads(row["metadata"])
            except json.JSONDecodeError as exc:
                col.add(file, line, "metadata", f"bad JSON: {exc.msg}")
                continue
            except ValueError as exc:
                col.add(file, line, "metadata", f"bad JSON: {exc}")
                continue
            if not _checked(meta, file, line, col):
                continue
        if isinstance(meta, dict):
            # Any other column (query, answer, source...) lands in metadata.
            for f in extra:
                if row.get(f) not in (None, ""):
                    meta.setdefault(f, row[f])
        obj["metadata"] = meta
        if row.get("created_at"):
            obj["created_at"] = row["created_at"]
        yield line, obj


def parse_memories(data: bytes, filename: str) -> list[MemoryRecord]:
    """Parse a memories file (JSONL, JSON array or CSV, by extension) or raise ValidationError.

    Checks: UTF-8, JSON syntax, object shape, `id`/`text` non-empty strings, `metadata` an
    object, `created_at` RFC 3339, unique ids. The Django import reuses this function.
    """
    col = _Collector()
    records = _parse_memories(data, filename, col)
    if col.issues:
        raise ValidationError(col.issues)
    return records


def _parse_memories(data: bytes, filename: str, col: _Collector) -> list[MemoryRecord]:
    text = _decode(data, filename, col)
    if text is None:
        return []
    lower = filename.lower()
    if lower.endswith(".csv"):
        items = _memories_from_csv(text, filename, col)
    elif lower.endswith((".jsonl", ".ndjson")):
        items = _iter_jsonl(text, filename, col)
    elif lower.endswith(".json") or text.lstrip().startswith("["):
        items = _iter_json_array(text, filename, col)
    else:
        items = _iter_jsonl(text, filename, col)
    out: list[MemoryRecord] = []
    ids: list[tuple[str, int | None]] = []
    for line, obj in items:
        rec = _memory_from_obj(obj, filename, line, col)
        if rec is not None:
            out.append(rec)
            ids.append((rec.id, line))
    _check_unique(ids, filename, col)
    if not out and not col.issues:
        col.add(filename, None, None, "no memories found")
    return out


# ----------------------------------------------------------------------------- other files


def _parse_incidents(data: bytes, file: str, col: _Collector) -> list[Incident]:
    text = _decode(data, file, col)
    if text is None:
        return []
    return _incidents_from(_iter_jsonl(text, file, col), file, col)


def _incidents_from(pairs: Iterable[tuple[int | None, Any]], file: str, col: _Collector) -> list[Incident]:
    """Incidents from (line, object) pairs, the line being where the object starts in the upload."""
    out: list[Incident] = []
    ids: list[tuple[str, int | None]] = []
    for line, obj in pairs:
        if not isinstance(obj, dict):
            col.add(file, line, None, f"expected an object, got {type(obj).__name__}")
            continue
        n0 = len(col.issues)
        iid = _req_id(obj, file, line, col)
        query = _req_str(obj, "query", file, line, col)
        output = _req_str(obj, "output", file, line, col, non_empty=False)
        retrieved = obj.get("retrieved")
        if not isinstance(retrieved, list) or not all(isinstance(x, str) for x in retrieved):
            col.add(file, line, "retrieved", "must be a list of memory ids (strings)")
        elif not retrieved:
            col.add(file, line, "retrieved", "must name at least one memory")
        harm_spec, harm_value = None, None
        h = obj.get("harm")
        if isinstance(h, bool) or h is None:
            harm_value = 1.0 if h in (None, True) else 0.0
        elif isinstance(h, (int, float)):
            if not 0.0 <= float(h) <= 1.0:
                col.add(file, line, "harm", f"a harm value must lie in [0, 1], got {h}")
            harm_value = float(h)
        else:
            harm_spec = _parse_harm(h, file, line, "harm", col)
        cands = _opt_str_list(obj, "candidates", file, line, col)
        if len(col.issues) != n0:
            continue
        assert iid is not None and query is not None and output is not None
        out.append(Incident(iid, query, output, list(retrieved), harm_spec, harm_value, cands))
        ids.append((iid, line))
    _check_unique(ids, file, col)
    return out


def _parse_probes(data: bytes, file: str, col: _Collector) -> list[Probe]:
    text = _decode(data, file, col)
    if text is None:
        return []
    out: list[Probe] = []
    ids: list[tuple[str, int | None]] = []
    for line, obj in _iter_jsonl(text, file, col):
        if not isinstance(obj, dict):
            col.add(file, line, None, f"expected an object, got {type(obj).__name__}")
            continue
        n0 = len(col.issues)
        pid = _req_id(obj, file, line, col)
        query = _req_str(obj, "query", file, line, col)
        harm = None
        if "harm" not in obj:
            col.add(file, line, "harm", "missing")
        else:
            harm = _parse_harm(obj["harm"], file, line, "harm", col)
        observed = obj.get("observed", False)
        if not isinstance(observed, bool):
            col.add(file, line, "observed", f"must be true or false, got {observed!r}")
        cands = _opt_str_list(obj, "candidates", file, line, col)
        if len(col.issues) != n0:
            continue
        assert pid is not None and query is not None and harm is not None
        out.append(Probe(pid, query, harm, bool(observed), cands))
        ids.append((pid, line))
    _check_unique(ids, file, col)
    return out


def _parse_json_object(data: bytes, file: str, col: _Collector) -> dict[str, Any] | None:
    text = _decode(data, file, col)
    if text is None:
        return None
    try:
        obj = _loads(text)
    except json.JSONDecodeError as exc:
        col.add(file, exc.lineno, None, f"bad JSON: {exc.msg} (column {exc.colno})")
        return None
    except ValueError as exc:
        col.add(file, 1, None, f"bad JSON: {exc}")
        return None
    if not isinstance(obj, dict):
        col.add(file, 1, None, f"expected a JSON object, got {type(obj).__name__}")
        return None
    return obj


def _parse_agent(data: bytes, file: str, col: _Collector) -> AgentConfig | None:
    obj = _parse_json_object(data, file, col)
    if obj is None:
        return None
    conn = obj.get("connector")
    if conn not in CONNECTORS:
        col.add(file, 1, "connector", f"unknown connector {conn!r}; one of {', '.join(CONNECTORS)}")
        return None
    top_k = obj.get("top_k", 5)
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        col.add(file, 1, "top_k", f"must be a positive integer, got {top_k!r}")
        return None
    if conn in ("openai-chat", "webhook"):
        key = "base_url" if conn == "openai-chat" else "url"
        if not isinstance(obj.get(key), str) or not obj[key]:
            col.add(file, 1, key, f"required for connector {conn!r}")
            return None
    return AgentConfig.from_dict(obj)


def _parse_truth(data: bytes, file: str, col: _Collector) -> set[str] | None:
    obj = _parse_json_object(data, file, col)
    if obj is None:
        return None
    p = obj.get("poisoned")
    if not isinstance(p, list) or not all(isinstance(x, str) for x in p):
        col.add(file, 1, "poisoned", "must be a list of memory ids (strings)")
        return None
    return set(p)


def parse_scenario_files(files: Mapping[str, bytes], *, source: str | None = None) -> Scenario:
    """Validate and parse a scenario given as {filename: bytes} (an upload or a folder)."""
    col = _Collector()
    by_name = {os.path.basename(k): v for k, v in files.items()}
    mem_name = next((n for n in MEMORY_FILENAMES if n in by_name), None)
    memories: list[MemoryRecord] = []
    if mem_name is None:
        col.add("memories.jsonl", None, None,
                "missing: a scenario needs memories.jsonl (or memories.json / memories.csv)")
    else:
        memories = _parse_memories(by_name[mem_name], mem_name, col)
    mem_ids = {m.id for m in memories}

    incidents = None
    if "incidents.jsonl" in by_name:
        incidents = _parse_incidents(by_name["incidents.jsonl"], "incidents.jsonl", col)
        if memories:
            for n, inc in enumerate(incidents):
                unknown = [r for r in inc.retrieved if r not in mem_ids]
                if unknown:
                    col.add("incidents.jsonl", _line_of(by_name["incidents.jsonl"], inc.id, n),
                            "retrieved", f"unknown memory id(s): {', '.join(map(repr, unknown[:5]))}")
    probes: list[Probe] = []
    if "probes.jsonl" in by_name:
        probes = _parse_probes(by_name["probes.jsonl"], "probes.jsonl", col)
    agent = AgentConfig("builtin-vote")
    if "agent.json" in by_name:
        agent = _parse_agent(by_name["agent.json"], "agent.json", col) or agent
    truth = None
    if "truth.json" in by_name:
        truth = _parse_truth(by_name["truth.json"], "truth.json", col)
        if truth is not None and memories:
            unknown = sorted(truth - mem_ids)
            if unknown:
                col.add("truth.json", 1, "poisoned",
                        f"unknown memory id(s): {', '.join(map(repr, unknown[:5]))}")
    if incidents is None and not probes and not col.issues:
        col.add("incidents.jsonl", None, None,
                "a scenario needs incidents.jsonl or probes.jsonl with observed probes")
    if col.issues:
        raise ValidationError(col.issues)
    return Scenario(memories, incidents, probes, agent, truth, source)


def _line_of(data: bytes, incident_id: str, index: int) -> int | None:
    """Best-effort line of an incident: the first non-blank line whose JSON has this id."""
    for n, raw in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if raw.strip() and f'"{incident_id}"' in raw:
            return n
    return None


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a scenario folder and validate it (see `parse_scenario_files`)."""
    root = Path(path)
    if not root.is_dir():
        raise ValidationError([Issue(str(root), None, None, "not a folder")])
    names = (*MEMORY_FILENAMES, "incidents.jsonl", "probes.jsonl", "agent.json", "truth.json")
    files = {n: (root / n).read_bytes() for n in names if (root / n).is_file()}
    return parse_scenario_files(files, source=str(root))


# ----------------------------------------------------------------------------- public parsers


def parse_incidents(data: bytes, filename: str) -> list[Incident]:
    """Parse an incidents upload (JSONL, or a JSON array) or raise ValidationError.

    Each element is numbered by the line where it starts in the upload (JSON array or JSONL),
    so the issues name lines the analyst sees. No incident at all is an issue.
    """
    col = _Collector()
    text = _decode(data, filename, col)
    if text is None:
        raise ValidationError(col.issues)
    lower = filename.lower()
    is_array = lower.endswith(".json") or (
        not lower.endswith((".jsonl", ".ndjson")) and text.lstrip().startswith("["))
    if is_array:
        elements = list(_iter_json_array(text, filename, col))
        if col.issues:
            raise ValidationError(col.issues)
        incidents = _incidents_from(elements, filename, col)
    else:
        incidents = _incidents_from(_iter_jsonl(text, filename, col), filename, col)
    if not incidents and not col.issues:
        col.add(filename, None, None, "no incidents found")
    if col.issues:
        raise ValidationError(col.issues)
    return incidents


def parse_agent_config(obj: Mapping[str, Any], *, filename: str = "agent.json") -> AgentConfig:
    """Check an agent configuration object (as in agent.json) or raise ValidationError."""
    col = _Collector()
    parsed = _parse_agent(json.dumps(obj).encode("utf-8"), filename, col)
    if col.issues or parsed is None:
        raise ValidationError(col.issues or [Issue(filename, 1, None, "not a usable agent")])
    return parsed


def parse_harm_spec(obj: Any, *, filename: str = "harm", line: int | None = None,
                    fld: str = "harm") -> HarmSpec:
    """Check a harm spec object (DESIGN section 5) or raise ValidationError."""
    col = _Collector()
    spec = _parse_harm(obj, filename, line, fld, col)
    if col.issues or spec is None:
        raise ValidationError(col.issues or [Issue(filename, line, fld, "not a usable harm spec")])
    return spec
