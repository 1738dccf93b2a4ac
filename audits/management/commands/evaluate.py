"""``manage.py evaluate SCENARIO_DIR [--method M|all] [--alpha 0.6] [--json OUT]`` (DESIGN 5).

Imports the scenario, runs the audit, applies each method's removal set, replays every probe
and prints, per method: asr_before, asr_after, removed, true_positives, false_positives,
precision, recall, agent_calls, seconds (the same keys in the JSON). Baselines remove as many
memories as the full method. truth.json is read only for scoring, never by the audit.

By default the scenario is audited by ``engine.evaluate.evaluate_all`` over the parsed
scenario: the same ``run_audit`` the workers' analysis step runs, without the ledger round trip.
``--through-ledger`` instead imports it into a fresh organization and store through the ledger
(signed genesis entries, embeddings, classifier), audits it through ``audits.services`` (plan,
replays with the database cache, analysis) and replays the probes over that store. The ledger
is append-only, so that evaluation organization stays in the database (named ``evaluate-*``).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from audits.engine.agents import AgentConfig
from audits.engine.evaluate import KEYS, METHODS, attack_success_rate, evaluate_all, score_removed
from audits.engine.scenario import load_scenario
from audits.scenario_import import ScenarioImportError, scenario_import
from audits.services.analysis import audit_run_now
from audits.services.replay import agent_for
from audits.services.runs import audit_run_create
from interchange.issues import ValidationError
from ledger.embedding_store import embedder_for_store
from ledger.services import housekeeper_init
from ledger.signing import housekeeper_role
from orgs.models import Organization


def evaluation_embedder():
    """The embedder evaluations use: the one stores use by default (settings-driven)."""
    return embedder_for_store(None)


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


class Command(BaseCommand):
    help = "Evaluate MemAudit and the baselines on a scenario folder (ASR before/after, precision, recall)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("scenario_dir", type=Path)
        parser.add_argument("--method", default="all", choices=[*METHODS, "all"])
        parser.add_argument("--alpha", type=float, default=0.6)
        parser.add_argument("--json", type=Path, help="write {method: {keys}} here")
        parser.add_argument("--through-ledger", action="store_true",
                            help="import into a fresh store and audit through the services (leaves it there)")
        parser.add_argument("--agent", help="override agent.json, e.g. '{\"connector\": \"openai-chat\", "
                                            "\"base_url\": \"http://127.0.0.1:8088/v1\"}'")

    def handle(self, *args, **opts) -> None:
        if not 0.0 <= opts["alpha"] <= 1.0:
            raise CommandError("--alpha must lie in [0, 1]")
        try:
            scenario = load_scenario(opts["scenario_dir"])
        except ValidationError as exc:
            raise CommandError("\n".join(str(i) for i in exc.issues)) from None
        agent = None
        if opts["agent"]:
            try:
                cfg = json.loads(opts["agent"])
                scenario.agent = AgentConfig.from_dict({"top_k": scenario.agent.top_k, **cfg})
                agent = agent_for(scenario.agent.to_dict())  # under AGENT_EGRESS_ALLOW
            except (json.JSONDecodeError, ValueError, KeyError) as exc:
                raise CommandError(f"--agent: {exc}") from None
        elif scenario.agent.connector in ("openai-chat", "webhook"):
            agent = agent_for(scenario.agent.to_dict())  # under AGENT_EGRESS_ALLOW
        methods = METHODS if opts["method"] == "all" else (opts["method"],)
        t0 = time.perf_counter()
        embedder = evaluation_embedder()
        embeddings = embedder.encode([m.text for m in scenario.memories])
        embed_s = time.perf_counter() - t0
        if opts["through_ledger"]:
            out = evaluate_through_ledger(opts["scenario_dir"], scenario, methods, opts["alpha"])
        else:
            out = evaluate_all(scenario, embedder, methods=methods, alpha=opts["alpha"], agent=agent,
                               embeddings=embeddings)
            for row in out.values():
                row["seconds"] = round(row["seconds"] + embed_s, 3)
        header = f"{'method':<17}" + "".join(f"{k:>16}" for k in KEYS)
        self.stdout.write(f"{opts['scenario_dir']}: {len(scenario.memories)} memories, "
                          f"{len(scenario.probes)} probes, agent {scenario.agent.connector}")
        self.stdout.write(header)
        for method, row in out.items():
            self.stdout.write(f"{method:<17}" + "".join(f"{_fmt(row[k]):>16}" for k in KEYS))
        if opts["json"]:
            opts["json"].write_text(json.dumps(out, indent=1))


def evaluate_through_ledger(path: Path, scenario, methods, alpha: float) -> dict[str, dict]:
    """The product path: ledger import, incidents from the agent's logs, the audit services."""
    t0 = time.perf_counter()
    slug = f"evaluate-{uuid.uuid4().hex[:8]}"
    org = Organization.objects.create(name=f"Evaluation {path.name}", slug=slug)
    with housekeeper_role():
        housekeeper_init(organization=org)
    try:
        loaded = scenario_import(organization=org, path=path, scenario=scenario,
                                 store_name=path.name[:200] or "scenario", store_slug="scenario")
    except ScenarioImportError as exc:
        raise CommandError(str(exc)) from None
    store, runner, before = loaded.store, loaded.runner, loaded.before
    removed_by: dict[str, list[str]] = {m: [] for m in methods}
    calls = {m: 0 for m in methods}
    if loaded.incidents:
        run = audit_run_create(store=store, incident_ids=[i.pk for i in loaded.incidents],
                               settings={"agent": scenario.agent.to_dict(), "alpha": alpha},
                               enqueue=False)
        run = audit_run_now(audit_run_id=run.pk)
        if run.status != "done":
            raise CommandError(f"audit #{run.pk} {run.status}: {run.error}")
        res = run.results
        for m in methods:
            removed_by[m] = list(res["batch"]) if m == "memaudit" else list(res["baselines"][m]["removed"])
            calls[m] = res["agent_calls"] if m == "memaudit" else (res["cmis_agent_calls"] if m == "cmis" else 0)
    secs = time.perf_counter() - t0
    out = {}
    for m in methods:
        after = runner.run(removed_by[m])
        row = {"asr_before": attack_success_rate(before), "asr_after": attack_success_rate(after), "removed": len(removed_by[m]),
               **score_removed(removed_by[m], scenario.truth), "agent_calls": calls[m], "seconds": round(secs, 3)}
        out[m] = {k: row[k] for k in KEYS}
    return out
