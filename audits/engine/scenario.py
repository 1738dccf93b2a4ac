"""The engine's datatypes (``IncidentCase``, ``Probe``, ``Scenario``) and the scenario folder
(DESIGN section 5) that carries them, no Django.

A scenario is a folder (or a set of uploaded files) holding `memories.jsonl` (or `.json` /
`.csv`), and optionally `incidents.jsonl`, `probes.jsonl`, `agent.json`, `truth.json`. The
memory formats, issues and readers are ``interchange``'s; connectors and harm types are checked
by their registries (``agents.CONNECTORS``, ``harm.HARMS``). Every problem found is collected as
an ``Issue(file, line, field, message)``; loading raises one ``ValidationError`` carrying all of
them, so nothing is half-imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interchange.fields import check_unique as _check_unique
from interchange.fields import req_id as _req_id
from interchange.fields import req_str as _req_str
from interchange.importers import incidents_parse, memories_parse
from interchange.issues import Collector as _Collector
from interchange.issues import Issue, ValidationError
from interchange.readers import decode as _decode
from interchange.readers import iter_jsonl as _iter_jsonl
from interchange.readers import line_of_id
from interchange.readers import loads as _loads
from interchange.records import MemoryRecord

from .agents import CONNECTORS, AgentConfig
from .harm import HARMS, HarmSpec

# Issue, ValidationError, MemoryRecord, AgentConfig and HarmSpec are importable from here too
# (the same classes, not copies): a scenario's callers need them with the datatypes.
__all__ = ["AgentConfig", "HarmSpec", "IncidentCase", "Issue", "MemoryRecord", "Probe", "Scenario",
           "ValidationError", "load_scenario", "parse_agent_config", "parse_harm_spec", "parse_incidents",
           "parse_memories", "parse_scenario_files"]

MEMORY_FILENAMES = ("memories.jsonl", "memories.json", "memories.csv")


@dataclass
class IncidentCase:
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
class Scenario:
    memories: list[MemoryRecord]
    incidents: list[IncidentCase] | None = None
    probes: list[Probe] = field(default_factory=list)
    agent: AgentConfig = field(default_factory=lambda: AgentConfig("builtin-vote"))
    truth: set[str] | None = None
    source: str | None = None


# ----------------------------------------------------------------------------- helpers


def _parse_harm(v: Any, file: str, line: int | None, fld: str, col: _Collector) -> HarmSpec | None:
    if not isinstance(v, dict):
        col.add(file, line, fld, f"must be an object with a 'type', got {type(v).__name__}")
        return None
    t = v.get("type")
    if t not in HARMS:
        col.add(file, line, f"{fld}.type", f"unknown harm type {t!r}; one of {', '.join(HARMS)}")
        return None
    problems = HARMS[t].check(v)
    if problems:
        name, message = problems[0]
        col.add(file, line, f"{fld}.{name}", message)
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


def parse_memories(data: bytes, filename: str) -> list[MemoryRecord]:
    """Parse a memories file in any registered format (``interchange.importers``: MemAudit's
    JSONL/JSON/CSV, mem0, LangGraph, Letta...) or raise ValidationError naming file, line and
    field. The history a format carries (mem0's updates) is dropped here; the ledger's import
    keeps it (``ledger.imports``)."""
    col = _Collector()
    records = _parse_memories(data, filename, col)
    col.raise_if_any()
    return records


def _parse_memories(data: bytes, filename: str, col: _Collector) -> list[MemoryRecord]:
    try:
        _, _, parsed = memories_parse(data, filename)
    except ValidationError as exc:
        col.extend(exc.issues, exc.total)
        return []
    return parsed.records


# ----------------------------------------------------------------------------- other files


def _parse_incidents(data: bytes, file: str, col: _Collector) -> list[IncidentCase]:
    text = _decode(data, file, col)
    if text is None:
        return []
    return _incidents_from(_iter_jsonl(text, file, col), file, col)


def _incidents_from(pairs: Iterable[tuple[int | None, Any]], file: str, col: _Collector) -> list[IncidentCase]:
    """Incidents from (line, object) pairs, the line being where the object starts in the upload."""
    out: list[IncidentCase] = []
    ids: list[tuple[str, int | None]] = []
    for line, obj in pairs:
        if not isinstance(obj, dict):
            col.add(file, line, None, f"expected an object, got {type(obj).__name__}")
            continue
        n0 = col.total
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
        if col.total != n0:
            continue
        assert iid is not None and query is not None and output is not None
        out.append(IncidentCase(iid, query, output, list(retrieved), harm_spec, harm_value, cands))
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
        n0 = col.total
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
        if col.total != n0:
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
    problems = CONNECTORS[conn].check(obj)
    if problems:
        name, message = problems[0]
        col.add(file, 1, name, message)
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
            for inc in incidents:
                unknown = [r for r in inc.retrieved if r not in mem_ids]
                if unknown:
                    col.add("incidents.jsonl", line_of_id(by_name["incidents.jsonl"], inc.id),
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
        col.raise_if_any()
    return Scenario(memories, incidents, probes, agent, truth, source)


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read a scenario folder and validate it (see `parse_scenario_files`)."""
    root = Path(path)
    if not root.is_dir():
        raise ValidationError([Issue(str(root), None, None, "not a folder")])
    names = (*MEMORY_FILENAMES, "incidents.jsonl", "probes.jsonl", "agent.json", "truth.json")
    files = {n: (root / n).read_bytes() for n in names if (root / n).is_file()}
    return parse_scenario_files(files, source=str(root))


# ----------------------------------------------------------------------------- public parsers


def parse_incidents(data: bytes, filename: str) -> list[IncidentCase]:
    """Parse an incidents upload or raise ValidationError: MemAudit's JSONL or JSON array, or a
    trace format of the registry (OpenAI chat logs, OpenTelemetry GenAI spans).

    Each element is numbered by the line where it starts in the upload, so the issues name
    lines the analyst sees. No incident at all is an issue.
    """
    incidents, col = parse_incidents_collecting(data, filename)
    col.raise_if_any()
    return incidents


def parse_incidents_collecting(data: bytes, filename: str) -> tuple[list[IncidentCase], _Collector]:
    """As :func:`parse_incidents`, without raising: the incidents that parsed and the collector
    holding every issue found, so a caller can add its own checks of those incidents (a store's
    memory ids) and report everything in one pass."""
    col = _Collector()
    try:
        _, message, items = incidents_parse(data, filename)
    except ValidationError as exc:
        col.extend(exc.issues, exc.total)
        return [], col
    incidents = _incidents_from(items, filename, col)
    if not incidents and not col.total:
        col.add(filename, None, None, f"no incidents found ({message})")
    return incidents, col


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
