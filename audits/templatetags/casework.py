"""``note_markdown``: a case note's markdown, escaped first (``audits.casework.markdown_render``)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from audits.casework import markdown_render

register = template.Library()


@register.filter
def note_markdown(text: str) -> SafeString:
    return markdown_render(text)
