"""Interchange formats: what MemAudit reads from other systems and from its own files.

Pure and stdlib-only (no Django, no ``audits``, no ``ledger``), so the ledger, the audit engine,
the benches and the portable tools can all import it. ``issues`` holds the error type every
parser raises, ``readers`` the strict JSON/JSONL readers with line numbers, ``records`` the
neutral record types, and ``importers`` one module per foreign format behind one registry.
"""
