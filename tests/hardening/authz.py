"""Helpers of the authorization matrix: the URL patterns from the resolver, filled with ids."""

from __future__ import annotations

import re

from django.urls import URLPattern, URLResolver, get_resolver

ROLES = ("anonymous", "analyst", "reviewer", "admin", "superuser")


def url_patterns() -> list[tuple[str, str]]:
    """(key, route template) for every pattern outside Django's admin; key = name or route."""
    out: list[tuple[str, str]] = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                if getattr(p, "app_name", None) == "admin" or str(p.pattern).startswith("admin/"):
                    continue
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                route = prefix + str(p.pattern)
                out.append((p.name or route, route))

    walk(get_resolver().url_patterns, "")
    keys = [k for k, _ in out]
    # Unnamed duplicates (the slashed spellings of agent endpoints) are keyed by their route.
    return [(k if keys.count(k) == 1 else r, r) for k, r in out]


def fill(route: str, ids: dict[str, int]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(2)
        if name not in ids:
            raise KeyError(f"no fixture id for <{name}> in {route}")
        return str(ids[name])

    path = re.sub(r"<(?:(\w+):)?(\w+)>", sub, route)
    return "/" + path
