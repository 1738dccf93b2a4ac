"""Importers, one module per format, behind one registry (see ``registry``).

``memories_parse`` and ``incidents_parse`` are what the product calls: detect the format (or
take the one named), parse, and raise one ``ValidationError`` with every issue (at most
``MAX_KEPT_ISSUES`` kept, all counted). The order of the imports below is the tie-break order.
"""

from __future__ import annotations

from typing import Any

from interchange.importers import (  # noqa: F401 - each module registers its importers
    langgraph,
    letta,
    mem0,
    memaudit,
    traces,
)
from interchange.importers.registry import (
    INCIDENTS,
    MEMORIES,
    REGISTRY,
    Head,
    Importer,
    Sniff,
    detect,
    formats,
    head_of,
    register,
    sniff_all,
)
from interchange.issues import Collector, ValidationError
from interchange.records import Parsed

__all__ = ["INCIDENTS", "MEMORIES", "REGISTRY", "Head", "Importer", "Parsed", "Sniff", "detect", "formats",
           "head_of", "incidents_parse", "memories_parse", "register", "sniff_all"]


def memories_parse(data: bytes, filename: str, *, fmt: str | None = None) -> tuple[Importer, str, Parsed]:
    """(importer, "this looks like ..." message, records and history) or ``ValidationError``."""
    importer, message = detect(head_of(data, filename), MEMORIES, fmt=fmt)
    col = Collector()
    parsed = importer.parse(data, filename, col)
    if not parsed.records and not col.total:
        col.add(filename, None, None, f"no memories found ({message})")
    if col.total:
        raise ValidationError(col.issues, total=col.total)
    return importer, message, parsed


def incidents_parse(data: bytes, filename: str, *, fmt: str | None = None
                    ) -> tuple[Importer, str, list[tuple[int | None, Any]]]:
    """(importer, message, [(line, incident object)]) or ``ValidationError``; the objects are
    in the project's incident shape and still to be checked field by field."""
    importer, message = detect(head_of(data, filename), INCIDENTS, fmt=fmt)
    col = Collector()
    items = importer.parse(data, filename, col)
    if col.total:
        raise ValidationError(col.issues, total=col.total)
    return importer, message, items
