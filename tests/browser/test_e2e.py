"""The analyst's whole path in a real browser, against a live server and a real Celery worker.

Alice (analyst) creates a store, imports a MINJA-shaped poisoned store, uploads incidents,
starts an audit, watches its progress reach 100 %, sees the suspects and the consistency
graph, and proposes the batch. Bob (reviewer) approves the top suspect with a reason; the
memory's history shows the signed ``poison_likely`` label and recall stops returning it.
Dana (org admin) issues a tree head, verifies the ledger and looks at the keys; the exported
bundle verifies with ``python -m ledger.core.verify``.

Every page is saved at 1280x800 and 390x844 under ``artifacts/screenshots/``, and each is
checked for horizontal overflow of the page.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.browser import chrome

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chrome.available(), reason="needs Debian's chromium and chromedriver"),
]

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "artifacts" / "screenshots"
SIZES = [(1280, 800), (390, 844)]
PASSWORD = "correct-horse-battery-staple"
EVIL = "Evilton"


# ----------------------------------------------------------------------------- the scenario


def _scenario_files(tmp: Path) -> dict[str, Path]:
    """A small MINJA-style poisoned store and the incidents an analyst would find in the logs."""
    from audits.engine.retriever import Retriever
    from ledger.embeddings import HashingEmbedder
    from tests.audits.engine.conftest import qa_scenario

    sc = qa_scenario(n_topics=12, n_targets=3, poisons_per_target=3, seed=0)
    emb = HashingEmbedder()
    retriever = Retriever(sc.memories, emb.encode([m.text for m in sc.memories]), embedder=emb)
    incidents = [{"id": f"inc-{p.id}", "query": p.query, "output": f"The answer is {EVIL}.",
                  "retrieved": [m.id for m in retriever.retrieve(p.query, 5)],
                  "harm": {"type": "contains", "target": EVIL}} for p in sc.probes if p.observed]
    files = {"memories": tmp / "memories.jsonl", "incidents": tmp / "incidents.jsonl",
             "bad_memories": tmp / "memories-bad.jsonl", "bad_incidents": tmp / "incidents-bad.json"}
    files["memories"].write_text("".join(json.dumps({"id": m.id, "text": m.text, "metadata": m.metadata}) + "\n"
                                         for m in sc.memories))
    files["incidents"].write_text("".join(json.dumps(i) + "\n" for i in incidents))
    files["bad_memories"].write_text('{"id": "a1", "text": "fine"}\n{"id": "a2"}\n{"id": "a1", "text": "again"}\n')
    files["bad_incidents"].write_text(json.dumps([incidents[0], {**incidents[0], "id": "inc-ghost",
                                                                  "retrieved": ["no-such-memory"]}], indent=1))
    return files


# ----------------------------------------------------------------------------- the worker


def _database_env() -> dict[str, str]:
    """Point the worker at the test database this process just created."""
    from django.db import connection

    name = connection.settings_dict["NAME"]
    url = os.environ.get("DATABASE_URL", "")
    if connection.vendor == "sqlite" or not url:
        return {"SQLITE_PATH": str(name), "DATABASE_URL": ""}
    parts = urlsplit(url)
    return {"DATABASE_URL": urlunsplit(parts._replace(path=f"/{name}"))}


@pytest.fixture
def worker(live_server, settings, tmp_path):
    """A real Celery worker on all three queues, sharing the test database, broker folder and
    key directories with this process."""
    from memaudit_site.celery import app

    var = tmp_path / "var"
    queue, control = var / "broker" / "queue", var / "broker" / "control"
    for d in (queue, control):
        d.mkdir(parents=True)
    options = {"data_folder_in": str(queue), "data_folder_out": str(queue), "control_folder": str(control),
               "store_processed": False}
    previous = app.conf.broker_transport_options
    app.conf.broker_transport_options = options
    _reset_producers(app)
    env = {**os.environ, **_database_env(), "DJANGO_SETTINGS_MODULE": "tests.browser.worker_settings",
           "VAR_DIR": str(var), "HOUSEKEEPER_KEY_DIR": str(settings.HOUSEKEEPER_KEY_DIR),
           "RECEIPT_KEY_DIR": str(settings.RECEIPT_KEY_DIR), "CELERY_TASK_ALWAYS_EAGER": "False",
           "PYTHONPATH": str(ROOT)}
    log = tmp_path / "worker.log"
    celery = Path(sys.executable).with_name("celery")
    proc = subprocess.Popen(
        [str(celery), "-A", "memaudit_site", "worker", "-Q", "audit,replay,housekeeper", "-P", "solo",
         "--without-gossip", "--without-mingle", "--without-heartbeat", "-l", "INFO", "--hostname", "e2e@%h"],
        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 90
    while "ready." not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the Celery worker did not start:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.3)
    yield log
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    app.conf.broker_transport_options = previous
    _reset_producers(app)


def _reset_producers(app) -> None:
    """Drop every cached broker connection and producer, so the next publish connects with the
    current transport options. kombu also keeps producer pools in a global registry keyed by
    connection: a pool closed here must leave it too, or a later test acquires a closed pool."""
    from kombu import pools

    if getattr(app, "_pool", None) is not None:
        app._pool.force_close_all()
        app._pool = None
    app.amqp._producer_pool = None
    pools.reset()


# ----------------------------------------------------------------------------- browser helpers


class Browser:
    def __init__(self, base: str):
        self.base = base
        self.driver = chrome.make_driver(*SIZES[0])
        self.overflow: list[str] = []
        SHOTS.mkdir(parents=True, exist_ok=True)

    def get(self, path: str) -> None:
        self.driver.get(self.base + path)

    def css(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str):
        from selenium.webdriver.common.by import By

        return self.driver.find_elements(By.CSS_SELECTOR, selector)

    def wait(self, condition, timeout: float = 60, what: str = "") -> object:
        from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
        from selenium.webdriver.support.ui import WebDriverWait

        def safe(d):
            try:
                return condition(d)
            except (StaleElementReferenceException, WebDriverException):
                return False

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.25).until(safe)
        except Exception:
            self.driver.save_screenshot(str(SHOTS / "FAILED.png"))
            raise AssertionError(f"timed out waiting for {what or condition} on {self.driver.current_url}") from None

    def text(self) -> str:
        return self.css("body").text

    def login(self, username: str) -> None:
        self.driver.delete_all_cookies()
        self.get("/login/")
        self.css("input[name=username]").send_keys(username)
        self.css("input[name=password]").send_keys(PASSWORD)
        self.css("button[type=submit]").click()
        self.wait(lambda d: "Dashboard" in self.css("h1").text, what="the dashboard")

    def shot(self, name: str) -> None:
        """Full-page screenshots at both sizes; records any horizontal overflow of the page."""
        d = self.driver
        for w, h in SIZES:
            d.set_window_size(w, h)
            time.sleep(0.4)  # media queries and Plotly's responsive resize
            width = d.execute_script("return document.documentElement.clientWidth")
            scroll = d.execute_script("return document.documentElement.scrollWidth")
            if scroll > width + 1:
                self.overflow.append(f"{name} at {w}x{h}: page is {scroll}px wide in a {width}px viewport")
            height = min(d.execute_script("return document.documentElement.scrollHeight"), 5000)
            # Beyond the viewport Chrome lays the page out without a scrollbar: clip to the window.
            width = d.execute_script("return window.innerWidth")
            png = d.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1}})
            import base64

            (SHOTS / f"{name}-{w}x{h}.png").write_bytes(base64.b64decode(png["data"]))
        d.set_window_size(*SIZES[0])
        time.sleep(0.2)

    def upload(self, form_selector: str, path: Path) -> None:
        self.css(f"{form_selector} input[type=file]").send_keys(str(path))
        self.css(f"{form_selector} button[type=submit]").click()

    def cookie_header(self) -> str:
        return "; ".join(f"{c['name']}={c['value']}" for c in self.driver.get_cookies())


# ----------------------------------------------------------------------------- the test


@pytest.fixture
def people(transactional_db, settings):
    from django.contrib.auth import get_user_model

    from ledger.services import housekeeper_init
    from ledger.signing import housekeeper_role
    from orgs.models import Membership, Organization, Role

    settings.EMBEDDING_BACKEND = "ledger.embeddings.HashingEmbedder"
    org = Organization.objects.create(name="Acme Security", slug="acme")
    users = {}
    for username, role in (("alice", Role.ANALYST), ("bob", Role.REVIEWER), ("dana", Role.ADMIN)):
        users[username] = get_user_model().objects.create_user(username=username, password=PASSWORD)
        Membership.objects.create(organization=org, user=users[username], role=role)
    # The operator's `housekeeper init`, here in this thread only (the live server never signs).
    with housekeeper_role():
        housekeeper_init(organization=org)
    return org


def _clear_caches() -> None:
    from audits import services
    from ledger.embedding_store import index_invalidate
    from ledger.recall import verification_cache_clear

    index_invalidate()
    verification_cache_clear()
    services._CONTEXTS.items.clear()


def _recalled(store, query: str) -> list[str]:
    from ledger.recall import recall

    _clear_caches()
    return [r["external_id"] for r in recall(store=store, query=query, k=5)["results"]]


def test_an_analyst_finds_the_poison_and_a_reviewer_quarantines_it(live_server, worker, people, tmp_path):
    from audits.models import AuditRun, Incident, ReviewProposal
    from ledger.models import EpistemicLabel, Memory, Store

    started = time.monotonic()
    _clear_caches()
    files = _scenario_files(tmp_path)
    b = Browser(live_server.url)
    try:
        # ---- Alice: a store, its memories --------------------------------------------------
        b.login("alice")
        b.get("/stores/")
        b.css("#id_name").send_keys("Support agent")
        b.css("#id_exclude_suspect").click()  # keep suspects in recall until a reviewer decides
        b.shot("stores")
        b.css("#store-create button[type=submit]").click()
        b.wait(lambda d: "/import/" in d.current_url, what="the import page")
        store = Store.objects.get(name="Support agent")
        assert not store.exclude_suspect

        b.upload("#import-form", files["bad_memories"])
        b.wait(lambda d: b.all("#validation-report"), what="the validation report")
        report = b.css("#validation-report").text
        assert "text" in report and "memories-bad.jsonl" in report
        b.shot("import-report")

        b.upload("#import-form", files["memories"])
        b.wait(lambda d: "/imports/" in d.current_url, what="the import job page")
        b.wait(lambda d: b.css("#import-status").text == "done", timeout=90, what="the import to finish")
        total = Memory.objects.filter(store=store).count()
        assert f"{total} of {total}" in b.css("#import-progress").text
        b.shot("import-done")

        b.get(f"/stores/{store.pk}/?q={EVIL}")
        assert b.all("#memory-table tbody tr")
        b.shot("memory-browser")

        # ---- incidents ------------------------------------------------------------------------
        b.get(f"/incidents/?store={store.pk}")
        b.upload("#incident-upload", files["bad_incidents"])
        b.wait(lambda d: b.all("#validation-report"), what="the incident validation report")
        assert "no-such-memory" in b.css("#validation-report").text
        assert "retrieved" in b.css("#validation-report").text
        b.shot("incidents-report")
        b.upload("#incident-upload", files["incidents"])
        b.wait(lambda d: "imported" in b.text(), what="the incidents to be imported")
        n_incidents = Incident.objects.filter(store=store).count()
        assert n_incidents >= 2
        b.shot("incidents")
        b.get(f"/incidents/{Incident.objects.filter(store=store).first().pk}/")
        b.shot("incident-detail")

        # ---- the audit ------------------------------------------------------------------------
        b.get(f"/audits/new/?store={store.pk}")
        assert len(b.all("#incident-choices input:checked")) == n_incidents
        b.shot("audit-new")
        b.css("#start-audit").click()
        b.wait(lambda d: b.all("#run-progress") or b.all("#suspect-table"), what="the audit page")
        run = AuditRun.objects.get(store=store)
        if b.all("#run-progress"):
            b.shot("audit-progress")
        seen = set()

        def finished(d):
            if b.all("#percent"):
                seen.add(b.css("#percent").text)
            return b.all("#suspect-table")

        b.wait(finished, timeout=150, what="the audit results")
        run.refresh_from_db()
        assert run.status == AuditRun.Status.DONE, run.error
        assert run.replays_done == run.replays_total > 0
        b.get(f"/audits/{run.pk}/progress/")
        assert "100%" in b.text() and f"{run.replays_total} / {run.replays_total}" in b.text()
        b.get(f"/audits/{run.pk}/")
        b.wait(lambda d: b.all("#consistency-graph .main-svg"), what="the Plotly graph")
        top_pk = int(b.css("#suspect-table .suspect-row").get_attribute("data-memory"))
        top = Memory.objects.get(pk=top_pk)
        assert top.external_id.startswith("p"), f"top suspect {top.external_id} is not a planted poison"
        b.css("#suspect-table [data-toggle-next]").click()
        b.shot("audit-results")

        b.css("#propose-batch").click()
        b.wait(lambda d: "proposed for review" in b.text(), what="the proposal message")
        proposal = ReviewProposal.objects.get(memory=top, status=ReviewProposal.Status.OPEN)
        # The flag (poison_suspect) is signed by the worker; the store keeps suspects in recall.
        b.wait(lambda d: EpistemicLabel.objects.filter(memory=top, label="poison_suspect").exists(),
               what="the worker to sign poison_suspect")
        incident = next(i for i in Incident.objects.filter(store=store) if top.external_id in i.retrieved)
        assert top.external_id in _recalled(store, incident.query)
        b.get("/")
        b.shot("dashboard-analyst")

        # ---- Bob: the review ----------------------------------------------------------------
        b.login("bob")
        b.get("/review/")
        item = f".review-item[data-proposal='{proposal.pk}']"
        b.wait(lambda d: b.all(item), what="the proposal in the queue")
        b.shot("review-queue")
        # The evidence panel: what the reviewer decides on (the incident, the answers with and
        # without the memory, the scores DS used).
        b.css(f"{item} .ri-evidence summary").click()
        panel = b.css(f"{item} .ri-evidence").text
        assert "Observed (the incident)" in panel and "Replayed without it" in panel and "normalised" in panel
        b.shot("review-evidence")
        b.css(f"{item} .ri-evidence summary").click()
        from selenium.webdriver.common.keys import Keys

        b.css("body").send_keys("?")
        b.wait(lambda d: b.css("#help").is_displayed(), what="the shortcut help")
        b.shot("review-help")
        b.css("body").send_keys(Keys.ESCAPE)
        reason = b.css(f"{item} input[name=reason]")
        reason.send_keys("Redirects the capital question to Evilton; planted, not learned.")
        reason.send_keys(Keys.ENTER)
        b.wait(lambda d: b.all("#decided-table") and top.external_id in b.css("#decided-table").text,
               timeout=60, what="the approval to be signed")
        proposal.refresh_from_db()
        assert proposal.status == ReviewProposal.Status.APPROVED
        assert EpistemicLabel.objects.filter(memory=top, label="poison_likely").count() == 1
        b.shot("review-decided")

        b.get(f"/memories/{top.pk}/")
        timeline = b.css("#label-timeline").text
        assert "poison_likely" in timeline and "user:bob" in timeline and "signed" in timeline
        assert "Verified" in b.css("#verify-badge").text
        # Few signed weights are listed as steps; more are drawn as a dated chart.
        b.wait(lambda d: b.all("#weight-chart .main-svg") or b.all("#weight-steps li"), what="the weight timeline")
        b.shot("memory-detail")
        assert top.external_id not in _recalled(store, incident.query)

        # ---- Dana: tree head, verify, keys, export ------------------------------------------
        b.login("dana")
        b.get("/ledger/")
        b.css("#issue-sth").click()

        def sth_shown(d):
            if b.all("#sth-table"):
                return True
            time.sleep(0.5)
            d.refresh()
            return False

        b.wait(sth_shown, timeout=60, what="the signed tree head")
        b.css("#verify-now").click()
        b.wait(lambda d: b.all("#verify-result"), what="the verification result")
        assert "Verified" in b.css("#verify-result").text, b.css("#verify-result").text
        b.shot("ledger")
        b.get("/keys/")
        assert "active" in b.css("#epoch-table").text
        b.shot("keys")
        b.get("/")
        b.shot("dashboard-admin")

        req = urllib.request.Request(live_server.url + "/ledger/export/", headers={"Cookie": b.cookie_header()})
        with urllib.request.urlopen(req, timeout=60) as resp:
            bundle = tmp_path / "bundle.json"
            bundle.write_bytes(resp.read())
        anchor = json.loads(bundle.read_text())["epochs"][0]["public_key"]  # pinned as the ledger page shows it
        check = subprocess.run([sys.executable, "-m", "ledger.core.verify", str(bundle), "--anchor", anchor],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
    finally:
        b.driver.quit()
    assert not b.overflow, "pages wider than the screen:\n" + "\n".join(b.overflow)
    assert time.monotonic() - started < 240
