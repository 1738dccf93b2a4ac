from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Tags, register

from memaudit_site.settings import PLACEHOLDER_SECRET_KEY


@register(Tags.security, deploy=False)
def check_secret_key(app_configs, **kwargs):
    if not settings.DEBUG and settings.SECRET_KEY == PLACEHOLDER_SECRET_KEY:
        return [
            Error(
                "SECRET_KEY is the development placeholder while DEBUG is off.",
                hint="Set SECRET_KEY (or SECRET_KEY_FILE) to a long random value.",
                id="memaudit.E001",
            )
        ]
    return []


@register(Tags.security, deploy=False)
def check_housekeeper_key_dir_outside_static(app_configs, **kwargs):
    key_dir = settings.HOUSEKEEPER_KEY_DIR.resolve()
    for entry in [*settings.STATICFILES_DIRS, settings.STATIC_ROOT]:
        static_dir = entry[1] if isinstance(entry, tuple) else entry  # ("prefix", path) entries too
        try:
            key_dir.relative_to(Path(static_dir).resolve())
        except ValueError:
            continue
        return [Error("HOUSEKEEPER_KEY_DIR lies inside a static directory.", id="memaudit.E002")]
    return []
