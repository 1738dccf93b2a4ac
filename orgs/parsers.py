"""Request parsers shared by every API view (settings.REST_FRAMEWORK["DEFAULT_PARSER_CLASSES"]).

Kept apart from orgs.api: DRF imports these while it loads its views, so they import nothing
that imports rest_framework.views."""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    """DRF's JSON parser, answering a body nested too deeply for Python as a 400, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the body is nested too deeply.") from None
