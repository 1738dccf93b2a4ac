"""``manage.py evaluate SCENARIO_DIR [--method M|all] [--alpha 0.6] [--json OUT]`` (DESIGN 5).

Imports the scenario, runs the audit, applies each method's removal set, replays every probe
and prints, per method: asr_before, asr_after, removed, true_positives, false_positives,
precision, recall, agent_calls, seconds (the same keys in the JSON). Baselines remove as many
memories as the full method. truth.json is read only for scoring, never by the audit.

The scenario is audited by ``engine.evaluate.evaluate_all`` over the parsed scenario: the same
``run_audit`` the workers' analysis step runs, without the ledger round trip (signing thousands
of throw-away memories would dominate the benchmark).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from audits.engine.agents import make_agent
from audits.engine.evaluate import KEYS, METHODS, evaluate_all
from audits.engine.scenario import AgentConfig, ValidationError, load_scenario


def evaluation_embedder():
    """The embedder evaluations use: the one stores use by default (settings-driven)."""
    from ledger.embedding_store import embedder_for_store

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
                agent = make_agent(scenario.agent)
            except (json.JSONDecodeError, ValueError, KeyError) as exc:
                raise CommandError(f"--agent: {exc}") from None
        methods = METHODS if opts["method"] == "all" else (opts["method"],)
        t0 = time.perf_counter()
        embedder = evaluation_embedder()
        embeddings = embedder.encode([m.text for m in scenario.memories])
        embed_s = time.perf_counter() - t0
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
