"""Settings of the Celery worker that the browser test starts: the project's settings, with the
same deterministic embedder as the test process (a test double; MiniLM is covered by the
engine tests), so the worker's embeddings and the test's recall agree."""

from memaudit_site.settings import *  # noqa: F403

EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
