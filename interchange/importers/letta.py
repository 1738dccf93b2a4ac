"""Letta agent files (``.af``, https://github.com/letta-ai/agent-file): core memory blocks and
archival passages.

An agent file is JSON with ``agents`` and ``blocks`` (the core memory blocks: ``id``,
``label``, ``value``, ``description``...). Older files keep the blocks in an agent's
``core_memory`` or ``memory_blocks``; archival passages, when exported, sit in ``passages``
(top level or per agent) with ``id``, ``text`` and ``created_at``. Some published files are
JSON-encoded twice (the whole document is one JSON string); that is unwrapped.

Ids: ``<agent name>/<block or passage id>``; empty blocks hold no memory and are skipped.
"""

from __future__ import annotations

from typing import Any

from interchange.importers.common import id_ok, rfc3339, whole_json
from interchange.importers.registry import MEMORIES, Head, Importer, Sniff, register
from interchange.issues import Collector
from interchange.readers import checked, decode, loads
from interchange.records import MemoryRecord, Parsed


class LettaAgentFile(Importer):
    name = "letta-af"
    title = "Letta agent file (.af)"
    kind = MEMORIES
    extensions = (".af",)
    example = ('{"agents": [{"id": "agent-0", "name": "support", "block_ids": ["block-0"], ...}],\n'
               ' "blocks": [{"id": "block-0", "label": "human", "value": "Name: Chad. Likes sailing.",\n'
               '             "description": "What I know about the user"}],\n'
               ' "passages": [{"id": "passage-0", "text": "Order 1234 shipped", "created_at": "2025-06-01T10:00:00Z"}],\n'
               ' "tools": [...], "created_at": "2025-11-20T20:20:01+00:00"}')
    notes = "Core memory blocks and archival passages become memories (id = agent/block-or-passage id)."

    def sniff(self, head: Head) -> Sniff:
        s = head.stripped()[:16384]
        if head.lower_name.endswith(".af") and s[:1] in ('{', '"'):
            return Sniff(0.95, "a .af agent file")
        if s.startswith('"{') and '\\"agents\\"' in s:
            return Sniff(0.9, "a Letta agent file (JSON encoded twice)")
        if s.startswith("{") and '"agents"' in s and ('"blocks"' in s or '"memory_blocks"' in s
                                                      or '"core_memory"' in s):
            return Sniff(0.9, "JSON with agents and memory blocks")
        return Sniff.no()

    def parse(self, data: bytes, filename: str, col: Collector) -> Parsed:
        text = decode(data, filename, col)
        doc = whole_json(text, filename, col) if text is not None else None
        if isinstance(doc, str):  # the published files are a JSON string holding the JSON
            try:
                doc = loads(doc)
            except ValueError as exc:
                col.add(filename, 1, None, f"bad JSON inside the encoded agent file: {exc}")
                return Parsed([])
        if doc is None:
            return Parsed([])
        if not isinstance(doc, dict) or not checked(doc, filename, 1, col):
            if not isinstance(doc, dict):
                col.add(filename, 1, None, "expected an agent file object with agents and blocks")
            return Parsed([])
        agents = doc.get("agents") if isinstance(doc.get("agents"), list) else [doc]
        agents = [a for a in agents if isinstance(a, dict)]
        exported = rfc3339(doc.get("created_at"))
        owner: dict[str, str] = {}
        for a in agents:
            for bid in a.get("block_ids") or []:
                owner.setdefault(str(bid), str(a.get("name") or a.get("id") or "agent"))
        default_agent = str(agents[0].get("name") or agents[0].get("id") or "agent") if agents else "agent"
        out: list[MemoryRecord] = []
        seen: set[str] = set()

        def add(kind: str, obj: Any, agent: str, where: str) -> None:
            if not isinstance(obj, dict):
                col.add(filename, None, where, f"expected a {kind} object")
                return
            oid = obj.get("id")
            text = obj.get("value") if kind == "block" else obj.get("text")
            if not isinstance(oid, str) or not oid:
                col.add(filename, None, f"{where}.id", "missing")
                return
            if not isinstance(text, str) or not text.strip():
                return  # an empty block is a slot, not a memory
            ext = f"{agent}/{oid}"
            if ext in seen or not id_ok(ext, filename, None, col, f"{where}.id"):
                return
            seen.add(ext)
            meta: dict[str, Any] = {"source": "letta", "letta_kind": kind, "letta_id": oid, "agent": agent}
            for k in ("label", "description", "limit", "read_only", "metadata", "archive_id", "tags"):
                if obj.get(k) not in (None, "", {}, []):
                    meta[k] = obj[k]
            out.append(MemoryRecord(ext, text, meta, rfc3339(obj.get("created_at")) or exported))

        for i, b in enumerate(doc.get("blocks") or []):
            add("block", b, owner.get(str(b.get("id")) if isinstance(b, dict) else "", default_agent), f"blocks[{i}]")
        for i, p in enumerate(doc.get("passages") or []):
            add("passage", p, default_agent, f"passages[{i}]")
        for a in agents:
            name = str(a.get("name") or a.get("id") or "agent")
            core = a.get("core_memory") or a.get("memory_blocks") or []
            if isinstance(core, dict):
                core = core.get("blocks") or []
            for i, b in enumerate(core):
                add("block", b, name, f"agents.{name}.core_memory[{i}]")
            for i, p in enumerate(a.get("passages") or a.get("archival_memory") or []):
                add("passage", p, name, f"agents.{name}.passages[{i}]")
        return Parsed(out)


register(LettaAgentFile())
