"""kombu's filesystem transport (the embedded default broker), with messages written atomically.

kombu 5's ``filesystem.Channel._put`` creates the message file under its final ``*.msg`` name
and then writes it (its lock is advisory: ``_get`` takes no lock). A worker listing the folder
in between moved the still-empty file away, failed to decode it and its consumer died
(``JSONDecodeError`` in ``kombu/transport/filesystem.py``; seen in CI when two processes queued
at once). Here a message is written under a hidden temporary name that no queue matches, then
renamed into place: a rename within one folder is atomic, so a reader sees a whole message or
none. ``memaudit_site.celery`` points the ``filesystem://`` scheme at this transport.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        """Put ``payload`` onto ``queue``: written under ``.<name>.tmp``, renamed to ``<name>``."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        temp = os.path.join(self.data_folder_out, f".{name}.tmp")  # "".partition(".")[2] matches no queue
        try:
            with open(temp, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(temp, final)
        except OSError as exc:
            try:
                os.remove(temp)
            except OSError:
                pass
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
