"""Serve third-party browser assets straight from their installed PyPI packages, one file each:
no CDN is needed and nothing large is vendored into git or copied by collectstatic."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

# static path -> (package, file inside the package)
VENDOR_FILES = {"vendor/plotly.min.js": ("plotly", "package_data/plotly.min.js")}


def _source(package: str, relative: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / relative
    return path if path.is_file() else None


class VendorFinder(BaseFinder):
    def check(self, **kwargs):
        return [
            Error(f"{package} is not installed; {name} cannot be served", id="memaudit.E003")
            for name, (package, relative) in VENDOR_FILES.items()
            if _source(package, relative) is None
        ]

    def find(self, path, find_all=False, **kwargs):
        if path in VENDOR_FILES:
            source = _source(*VENDOR_FILES[path])
            if source is not None:
                return [str(source)] if find_all else str(source)
        return [] if find_all else None

    def list(self, ignore_patterns):
        for name, spec in VENDOR_FILES.items():
            source = _source(*spec)
            if source is not None:
                # The storage's location is the package root, so ``name``'s source is found by
                # its path relative to it; collectstatic copies it to ``name``.
                yield name, _VendorStorage(source, name)


class _VendorStorage(FileSystemStorage):
    """A one-file storage that opens ``source`` under the name ``name``."""

    def __init__(self, source: Path, name: str):
        super().__init__(location=str(source.parent))
        self._source, self._name = source, name

    def path(self, name):
        return str(self._source) if name == self._name else super().path(name)

    def open(self, name, mode="rb"):
        return super().open(self._source.name if name == self._name else name, mode)
