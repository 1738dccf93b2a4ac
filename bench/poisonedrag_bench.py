"""PoisonedRAG against the ledger's recall: no labels (A0) vs signed classifier labels (A1).

    python bench/poisonedrag_bench.py --adv FILE [--clean-context FILE] --corpus FILE [--corpus FILE ...]
                                      [--json OUT] [--k 5] [--embedder minilm|hashing] [--workdir DIR]
                                      [--llm-url URL] [--llm-model NAME]

One store is built through the product's import path (validated, genesis signed, embedded):
the clean passages of ``--clean-context`` (``clean_top5_joined`` split on newlines, and
``gt_passages``), every ``--corpus`` (a JSON list of ``{title?, text}`` such as 2WikiMultihopQA,
or LoCoMo's ``locomo10.json``, whose dialogue turns become memories), and the five
``adv_texts`` of every target of ``--adv`` (any file in the format of ``nq_adv_targeted.json``).
Then, like MutMem's arms:

- **A0 (no labels)**: each target question is recalled (top-k, default 5) before the ingest
  classifier has run; a target counts when any adversarial passage is in its top-k.
- **A1 (signed labels)**: the ingest classifier runs over the store and appends signed
  ``poison_likely`` labels; the questions are recalled again through the quarantine-aware
  projection. Reported: targets with poison in the top-k, poisoned passages labelled, clean
  memories falsely labelled, and recall-with-receipt latency p50/p95 (A1 calls).
- **Answer accuracy** with the real local LLM (any OpenAI-compatible server, by default
  ``settings.LLM_BASE_URL``; SmolLM2 in this project) on the clean context (the top-k with the
  adversarial passages removed), the A0 context and the A1 context: the share of answers
  containing the correct answer. ``null`` when the server is not reachable.

Data is read at run time (defaults under ../shared/data) and never copied.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import ledger_env

JSON_KEYS = ("targets", "a0_targets_poison_top5", "a1_targets_poison_top5", "poison_labelled", "poison_total",
             "clean_flagged", "clean_total", "recall_p50_ms", "recall_p95_ms", "accuracy_clean", "accuracy_a0",
             "accuracy_a1")


def clean_context_memories(path: Path) -> list[dict]:
    out = []
    ctx = json.loads(path.read_text())
    for key in sorted(ctx):
        for i, line in enumerate(ctx[key].get("clean_top5_joined", "").split("\n")):
            if line.strip():
                out.append({"id": f"nq-{key}-c{i}", "text": line})
        for i, text in enumerate(ctx[key].get("gt_passages", [])):
            if text.strip():
                out.append({"id": f"nq-{key}-g{i}", "text": text})
    return out


def corpus_memories(path: Path) -> list[dict]:
    data = json.loads(path.read_text())
    stem = path.stem.replace("_", "-")
    out = []
    if isinstance(data, list) and data and isinstance(data[0], dict) and "conversation" in data[0]:
        for sample in data:  # LoCoMo: every dialogue turn is a memory
            for key, turns in sorted(sample["conversation"].items()):
                if key.startswith("session_") and isinstance(turns, list):
                    out += [{"id": f"{stem}-{sample['sample_id']}-{t['dia_id']}", "text": t["text"]}
                            for t in turns if t.get("text", "").strip()]
        return out
    for i, row in enumerate(data):
        text = f"{row['title']}\n{row['text']}" if row.get("title") else row.get("text", "")
        if text.strip():
            out.append({"id": f"{stem}-{i}", "text": text})
    return out


def adv_memories(path: Path) -> tuple[list[dict], dict[str, dict]]:
    adv = json.loads(path.read_text())
    out = []
    for key in sorted(adv):
        out += [{"id": f"adv-{key}-{i}", "text": t} for i, t in enumerate(adv[key]["adv_texts"])]
    return out, adv


def llm_agent(url: str, model: str):
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=3) as r:
            r.read()
    except OSError:
        return None
    from audits.engine.agents import OpenAIChatAgent

    return OpenAIChatAgent({"base_url": url, "model": model, "max_tokens": 32, "timeout": 120, "retries": 2})


def answer_accuracy(agent, items: list[tuple[str, list[str], str]]) -> float:
    from audits.engine.retriever import RetrievedMemory

    correct = 0
    for question, texts, answer in items:
        retrieved = [RetrievedMemory(id=str(i), text=t, score=0.0, rank=i + 1) for i, t in enumerate(texts)]
        out = agent.answer(question, retrieved).text
        correct += answer.lower() in out.lower()
    return round(correct / len(items), 4) if items else None


def main(argv: list[str] | None = None) -> int:
    data = ledger_env.DEFAULT_DATA
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--adv", type=Path, required=True)
    ap.add_argument("--clean-context", type=Path, default=data / "poisonedrag" / "nq_clean_context.json")
    ap.add_argument("--corpus", type=Path, action="append", required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--embedder", choices=["minilm", "hashing"], default="minilm")
    ap.add_argument("--workdir")
    ap.add_argument("--llm-url")
    ap.add_argument("--llm-model", default="default")
    args = ap.parse_args(argv)

    work = ledger_env.setup(args.workdir, embedder=args.embedder)
    from django.conf import settings

    from ledger.classifier_service import ingest_classify
    from ledger.imports import memories_import
    from ledger.models import Memory
    from ledger.recall import recall

    clean = clean_context_memories(args.clean_context) if args.clean_context and args.clean_context.exists() else []
    for c in args.corpus:
        clean += corpus_memories(c)
    poison, targets = adv_memories(args.adv)
    org = ledger_env.organization_get()
    store = ledger_env.store_fresh(org, "poisonedrag")
    payload = "\n".join(json.dumps(r) for r in clean + poison).encode("utf-8")
    t = time.perf_counter()
    job = memories_import(store=store, data=payload, filename="poisonedrag.jsonl", inline=True, classify=False,
                          progress=lambda d, n: print(f"\rimport: {d}/{n} signed and embedded", end="", flush=True))
    print()
    if job.status != "done":
        print("import failed:", job.errors[:5], file=sys.stderr)
        return 1
    import_s = time.perf_counter() - t

    def run_arm() -> tuple[int, list[float], dict[str, list[str]]]:
        hit, times, contexts = 0, [], {}
        recall(store=store, query="warm-up", k=args.k)  # builds the index; not timed
        for key in sorted(targets):
            t0 = time.perf_counter()
            r = recall(store=store, query=targets[key]["question"], k=args.k)
            times.append((time.perf_counter() - t0) * 1000)
            ids = [x["external_id"] for x in r["results"]]
            hit += any(i.startswith("adv-") for i in ids)
            contexts[key] = [x["text"] for x in r["results"]]
        return hit, times, contexts

    a0_hit, a0_times, a0_ctx = run_arm()
    t = time.perf_counter()
    ingest_classify(store=store, inline=True)
    classify_s = time.perf_counter() - t
    a1_hit, a1_times, a1_ctx = run_arm()

    labelled = dict(Memory.objects.filter(store=store).exclude(epistemic_state="").values_list("external_id",
                                                                                               "epistemic_state"))
    poison_ids = {p["id"] for p in poison}
    result = {
        "targets": len(targets),
        "a0_targets_poison_top5": a0_hit,
        "a1_targets_poison_top5": a1_hit,
        "poison_labelled": sum(1 for i in labelled if i in poison_ids),
        "poison_total": len(poison),
        "clean_flagged": sum(1 for i in labelled if i not in poison_ids),
        "clean_total": len(clean),
        "recall_p50_ms": round(ledger_env.percentile(a1_times, 50), 2),
        "recall_p95_ms": round(ledger_env.percentile(a1_times, 95), 2),
        "accuracy_clean": None, "accuracy_a0": None, "accuracy_a1": None,
    }
    agent = llm_agent(args.llm_url or settings.LLM_BASE_URL, args.llm_model)
    if agent is not None:
        clean_ctx = {}
        for key in sorted(targets):
            r = recall(store=store, query=targets[key]["question"], k=min(100, args.k * 4))
            # The clean arm: the same ranking with every adversarial passage taken out.
            clean_ctx[key] = [x["text"] for x in r["results"] if not x["external_id"].startswith("adv-")][: args.k]
        answers = {key: targets[key]["correct answer"] for key in targets}
        for name, ctx in (("accuracy_clean", clean_ctx), ("accuracy_a0", a0_ctx), ("accuracy_a1", a1_ctx)):
            result[name] = answer_accuracy(agent, [(targets[k]["question"], ctx[k], answers[k]) for k in sorted(targets)])
    assert tuple(result) == JSON_KEYS

    per10k = result["clean_flagged"] / max(1, result["clean_total"]) * 10_000
    print(f"PoisonedRAG: {result['targets']} targets, {len(clean)} clean + {len(poison)} poisoned memories, "
          f"k={args.k}, embedder {args.embedder}, load average {[round(x, 1) for x in os.getloadavg()]}")
    print(f"import (validate, sign, embed): {import_s:.1f}s; classifier: {classify_s:.1f}s")
    print(f"{'arm':<22} {'targets w/ poison in top-k':>27} {'recall p50 ms':>14} {'recall p95 ms':>14} {'accuracy':>9}")
    print(f"{'clean (poison removed)':<22} {'-':>27} {'-':>14} {'-':>14} {result['accuracy_clean']!s:>9}")
    print(f"{'A0 no labels':<22} {a0_hit:>24}/{len(targets):<2} {ledger_env.percentile(a0_times, 50):>14.2f} "
          f"{ledger_env.percentile(a0_times, 95):>14.2f} {result['accuracy_a0']!s:>9}")
    print(f"{'A1 signed labels':<22} {a1_hit:>24}/{len(targets):<2} {result['recall_p50_ms']:>14.2f} "
          f"{result['recall_p95_ms']:>14.2f} {result['accuracy_a1']!s:>9}")
    print(f"poisoned passages labelled: {result['poison_labelled']}/{result['poison_total']}; clean falsely labelled: "
          f"{result['clean_flagged']}/{result['clean_total']} ({per10k:.2f} per 10,000)")
    if agent is None:
        print(f"LLM not reachable at {args.llm_url or settings.LLM_BASE_URL}: accuracy not measured (null)")
    print(f"work folder: {work}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
