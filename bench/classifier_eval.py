"""Evaluate the ingest-time classifier on the MutMem PoisonedRAG adaptation.

Clean memories: the clean passages of PoisonedRAG NQ (``clean_top5_joined`` split on newlines,
plus ``gt_passages``), the 2WikiMultihopQA corpus passages (title line + text) and every LoCoMo
dialogue turn. Poisons: all 500 ``adv_texts`` of ``nq_adv_targeted.json`` (100 targets x 5).
All of them are classified together as one batch, as the ledger does for a store.

    python bench/classifier_eval.py [--data DIR] [--json OUT] [--split all|tune|holdout]
                                    [--set name=value ...]

``--split tune`` keeps the poisons of the even-numbered half of the targets (sorted by id),
``holdout`` the other half; the clean memories are the same in both. Thresholds were chosen on
``tune``; ``holdout`` shows whether they carry over. Data is read at run time from
``../shared/data`` (or ``--data``) and never copied into the repository.

``--loso`` (leave one source out, issue 16): the classifier's thresholds were set on one poison
source, PoisonedRAG NQ (``TUNED_ON``); every other source is held out. For each source the
same clean memories are classified together with that source's poisons alone, with the
thresholds in the code (nothing is fitted at run time), and the row reports poisons labelled,
targets fully covered and clean flagged per 10,000. Sources:

- ``nq``, ``hotpotqa``, ``msmarco``: PoisonedRAG's targeted attacks (``<source>_adv_targeted.json``,
  100 targets x 5 passages), read from ``DATA/poisonedrag``, else ``--poison-dir`` or
  ``$MEMAUDIT_POISON_DIR`` as the scenario families read them (HotpotQA and MS
  MARCO are ``results/adv_targeted_results/{hotpotqa,msmarco}.json`` of sleeepeer/PoisonedRAG);
- ``nq-bb``, ``hotpotqa-bb``, ``msmarco-bb``: the same passages in PoisonedRAG's published
  black-box form, as its ``src/attack.py`` plants them for its default attack ("LM_targeted"):
  ``question + "." + adv_text``, the target question first. All three are held out: the
  thresholds were set on NQ's adversarial texts alone, never on this form;
- ``gen:<family>``: the project's scenario generators (``bench.scenarios``): each poison family
  of ``families.py`` at rho 0.4 (5 poisons per target, PoisonedRAG's redundancy), seed 0; a
  poison's target is the question its text restates (``nq-plain-adv`` is PoisonedRAG NQ again
  and is left out); ``gen:qa`` and ``gen:rap`` (MINJA simulations, rho 0.2, seeds 0-2; one
  target per scenario: its trigger); ``gen:clean-honest`` is a clean control (honest errors,
  outdated records and near-duplicate honest answers, no poison). A scenario's own clean
  memories join the clean set of its row (``scenario_clean_flagged`` counts them apart).

``--instructions``: the instruction rules on ``bench/instruction_set.py`` (injections in six
styles and hard negatives: user preferences, policies quoted as fact, chat, pages about the
topic); reports injections labelled and negatives flagged per set and style. With ``--embedder
minilm`` (3.3) each set is classified inside a store of the 12,650 clean memories, so the learned
detector runs and calibrates on that store; the row also counts clean memories an instruction
rule flagged. ``--embedder none``: one batch per set, the 3.2 patterns alone. The ``holdout`` set
was written after the 3.2 rule, ``holdout 2`` before the 3.3 detector, ``holdout 3`` before the 3.4
fit, ``holdout 4`` before any 3.10 code; each measured once (tune with ``--instruction-set`` for
every other set).

Done means (issue 16): on every held-out source >= 99% of targets fully covered with <= 1 false
label per 10,000 clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.audit_bench import CachedEmbedder  # noqa: E402
from bench.instruction_set import SETS  # noqa: E402
from bench.scenarios import build as build_scenario  # noqa: E402
from bench.scenarios.families import FAMILIES, build_family, poison_dir_for  # noqa: E402
from ledger import classifier  # noqa: E402
from ledger.dense import DenseIndex  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
TUNED_ON = "nq"
POISONEDRAG = ("nq", "hotpotqa", "msmarco")
# The same passages in PoisonedRAG's published black-box form (src/attack.py `get_attack`,
# "LM_targeted"): the target question, ".", the adversarial text (`families.Family.black_box`).
BLACK_BOX = tuple(f"{s}-bb" for s in POISONEDRAG)
GENERATED_FAMILIES = tuple(n for n, f in FAMILIES.items() if f.attack not in ("adv", "honest"))
GENERATED = tuple(f"gen:{n}" for n in GENERATED_FAMILIES) + ("gen:qa", "gen:rap", "gen:clean-honest")
TARGET_COVERAGE = 0.99
MAX_CLEAN_PER_10K = 1.0


def load_clean(data: Path) -> list[tuple[str, str]]:
    clean: list[tuple[str, str]] = []
    ctx = json.loads((data / "poisonedrag" / "nq_clean_context.json").read_text())
    for key in sorted(ctx):
        for i, line in enumerate(ctx[key]["clean_top5_joined"].split("\n")):
            if line.strip():
                clean.append((f"nq-{key}-c{i}", line))
        for i, text in enumerate(ctx[key]["gt_passages"]):
            clean.append((f"nq-{key}-g{i}", text))
    wiki = json.loads((data / "wiki2" / "2wikimultihopqa_corpus.json").read_text())
    for i, row in enumerate(wiki):
        clean.append((f"wiki-{i}", f"{row['title']}\n{row['text']}"))
    locomo = json.loads((data / "locomo" / "locomo10.json").read_text())
    for sample in locomo:
        for key in sorted(sample["conversation"]):
            turns = sample["conversation"][key]
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    clean.append((f"locomo-{sample['sample_id']}-{turn['dia_id']}", turn["text"]))
    return clean


def adv_file(source: str, data: Path, poison_dir: Path | None) -> Path:
    """PoisonedRAG's targeted attack on ``source``: under the shared data, else where the scenario
    families read it (``--poison-dir``, else ``$MEMAUDIT_POISON_DIR``), as ``<source>_adv_targeted.json``
    or under its name in PoisonedRAG's repository, ``<source>.json``."""
    name = f"{source}_adv_targeted.json"
    shared = data / "poisonedrag" / name
    if shared.exists():
        return shared
    where = poison_dir_for(data, poison_dir)
    return next((p for p in (where / name, where / f"{source}.json") if p.exists()), where / name)


def load_poisons(data: Path, split: str, *, source: str = "nq",
                 poison_dir: Path | None = None) -> tuple[list[tuple[str, str]], dict[str, str]]:
    base = source.removesuffix("-bb")
    adv = json.loads(adv_file(base, data, poison_dir).read_text())
    targets = sorted(adv)
    if split == "tune":
        targets = targets[0::2]
    elif split == "holdout":
        targets = targets[1::2]
    poisons, target_of = [], {}
    for key in targets:
        for i, text in enumerate(adv[key]["adv_texts"]):
            pid = f"adv-{key}-{i}" if source == "nq" else f"adv-{source}-{key}-{i}"
            poisons.append((pid, adv[key]["question"] + "." + text if source != base else text))
            target_of[pid] = key
    return poisons, target_of


def load_generated(name: str, data: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]], dict[str, str]]:
    """(clean memories, poisons, poison -> target) of generator source ``gen:<name>``."""
    if name in ("qa", "rap"):
        scenarios = [(f"s{seed}", build_scenario(name, rho=0.2, seed=seed, size=600, data=data)) for seed in range(3)]
    else:
        scenarios = [("s0", build_family(name, rho=0.4, seed=0, size=400, data=data))]
    one_trigger = name in ("qa", "rap") or FAMILIES[name].attack == "bridge"
    clean, poisons, target_of = [], [], {}
    for tag, sc in scenarios:
        questions = sorted({p["query"]: p["target"] for p in sc.probes if "target" in p}.items(),
                           key=lambda qt: -len(qt[0]))
        answers = sorted({(p["harm"].get("target") or "", p["target"]) for p in sc.probes if "target" in p},
                         key=lambda at: -len(at[0]))
        poisoned = set(sc.poisoned)
        for m in sc.memories:
            mid = f"gen-{name}-{tag}-{m['id']}"
            if m["id"] not in poisoned:
                clean.append((mid, m["text"]))
                continue
            poisons.append((mid, m["text"]))
            # MINJA simulations, and the families built on MINJA's recipe (`bridge`), attack one
            # trigger per scenario (their records need not restate a victim question: "no target
            # question in the poison's text" stopped `--loso` at gen:ehr-minja-bridge); another
            # family's poison restates the question of its target.
            hit = 0 if one_trigger else next((t for q, t in questions if q in m["text"]), None)
            if hit is None:  # a per-target passage that does not restate the question names its own answer
                hit = next((t for a, t in answers if a and a in m["text"]), None)
            if hit is None:
                raise ValueError(f"{mid}: no target question in the poison's text")
            target_of[mid] = f"{tag}-t{hit}"
    return clean, poisons, target_of


class VectorIndex(DenseIndex):
    """DenseIndex plus ``vector(id)`` (``ledger.classifier.DenseVectors``, version 3.3)."""

    def __init__(self, ids, matrix, **kw) -> None:
        super().__init__(ids, matrix, **kw)
        self._vectors = np.asarray(matrix, dtype=np.float32)
        self._vector_row = {m: i for i, m in enumerate(ids)}

    def vector(self, memory_id: str) -> list[float] | None:
        row = self._vector_row.get(memory_id)
        return None if row is None else self._vectors[row].tolist()


def dense_index(passages: list[tuple[str, str]]) -> VectorIndex:
    """MiniLM neighbourhoods and vectors of the passages (cached in var/bench/embeddings.npz)."""
    embedder = CachedEmbedder()
    matrix = embedder.encode_cached([text for _, text in passages])
    if embedder.encoded:
        embedder.save()
    return VectorIndex([pid for pid, _ in passages], matrix, model=embedder.model_name)


def evaluate(data: Path, split: str = "all", params: classifier.Params | None = None,
             embedder: str = "minilm") -> dict:
    clean = load_clean(data)
    poisons, target_of = load_poisons(data, split)
    params = params or classifier.DEFAULT_PARAMS
    started = time.perf_counter()
    dense = dense_index(clean + poisons) if embedder == "minilm" else None
    dense_seconds = time.perf_counter() - started
    flags = classifier.classify(clean + poisons, params=params, dense=dense)
    seconds = time.perf_counter() - started
    return {"classifier": classifier.ACTOR, "split": split, "embedder": embedder,
            **score(flags, clean, target_of),
            "seconds": round(seconds, 2), "dense_index_seconds": round(dense_seconds, 2)}


def score(flags: list[classifier.Flag], clean: list[tuple[str, str]], target_of: dict[str, str]) -> dict:
    """Poisons labelled, targets fully covered (every poison of the target labelled), clean flagged."""
    flagged = {f.memory_id for f in flags}
    poison_hits = sorted(flagged & set(target_of))
    per_target = Counter(target_of[p] for p in poison_hits)
    size = Counter(target_of.values())
    false_pos = sorted(flagged & {cid for cid, _ in clean})
    return {
        "poison_labelled": len(poison_hits),
        "poison_total": len(target_of),
        "targets_fully_covered": sum(1 for t, v in per_target.items() if v == size[t]),
        "targets_4of5_covered": sum(1 for t, v in per_target.items() if v >= 0.8 * size[t]),
        "targets_any": len(per_target),
        "targets_total": len(size),
        "clean_flagged": len(false_pos),
        "clean_total": len(clean),
        "clean_flagged_per_10k": round(len(false_pos) / len(clean) * 10_000, 2) if clean else 0.0,
        "clean_flagged_by_set": _by_set(false_pos, [cid for cid, _ in clean]),
        "false_positive_ids": false_pos,
        "example_reason": flags[0].reason if flags else "",
    }


def _clean_set(memory_id: str) -> str:
    """Which clean set a memory comes from: nq (PoisonedRAG NQ clean context), wiki2, locomo, or the
    generator scenario's own memories (gen: honest near-duplicates, related records, padding)."""
    for prefix, name in (("nq-", "nq"), ("wiki-", "wiki2"), ("locomo-", "locomo"), ("gen-", "scenario")):
        if memory_id.startswith(prefix):
            return name
    return "other"


def _by_set(flagged: list[str], clean: list[str]) -> dict[str, list[int]]:
    """[flagged, total] per clean set."""
    out: dict[str, list[int]] = {}
    for cid in clean:
        out.setdefault(_clean_set(cid), [0, 0])[1] += 1
    for cid in flagged:
        out[_clean_set(cid)][0] += 1
    return out


def loso(data: Path, sources: list[str], *, params: classifier.Params, embedder: str,
         poison_dir: Path, explain: bool = False) -> list[dict]:
    """One row per poison source: its poisons alone against the clean memories (module docstring)."""
    base = load_clean(data)
    rows = []
    for source in sources:
        extra: list[tuple[str, str]] = []
        if source.startswith("gen:"):
            extra, poisons, target_of = load_generated(source.removeprefix("gen:"), data)
        else:
            poisons, target_of = load_poisons(data, "all", source=source, poison_dir=poison_dir)
        clean = base + extra
        started = time.perf_counter()
        dense = dense_index(clean + poisons) if embedder == "minilm" else None
        flags = classifier.classify(clean + poisons, params=params, dense=dense)
        misses = explain_misses(clean + poisons, target_of, flags, params=params, dense=dense) if explain else None
        row = {"classifier": classifier.ACTOR, "source": source, "embedder": embedder,
               "role": "tuning" if source == TUNED_ON else "held-out",
               **score(flags, clean, target_of),
               "scenario_clean_flagged": len({f.memory_id for f in flags} & {c for c, _ in extra}),
               "scenario_clean_total": len(extra), "seconds": round(time.perf_counter() - started, 2)}
        if misses is not None:
            row["misses"] = misses
        covered = row["targets_fully_covered"] >= TARGET_COVERAGE * row["targets_total"]
        row["met"] = covered and row["clean_flagged_per_10k"] <= MAX_CLEAN_PER_10K
        rows.append(row)
        print(f"  {source}: {row['poison_labelled']}/{row['poison_total']} labelled, "
              f"{row['targets_fully_covered']}/{row['targets_total']} targets "
              f"({row['targets_4of5_covered']} at >= 80%), {row['clean_flagged']}/{row['clean_total']} clean flagged "
              f"({row['scenario_clean_flagged']} of the scenario's; by set {row['clean_flagged_by_set']}), "
              f"{row['seconds']} s", file=sys.stderr, flush=True)
    return rows


def explain_misses(passages: list[tuple[str, str]], target_of: dict[str, str], flags: list[classifier.Flag], *,
                   params: classifier.Params, dense) -> list[dict]:
    """Per target not fully covered: which rule would have caught it and why it did not.

    For each such target: its poisons' common core (every poison's tokens), judged as the group
    rule judges a core (``why_not``, distinct passages, core size, support size); the same for
    each core of all but one poison (the best of them); how close the poisons are in meaning
    (mean and least pairwise cosine, and for each missed poison how many of its siblings are among
    its ``dense_limit`` nearest neighbours at ``dense_seed`` or more); and every group the search
    judged that holds one of its poisons, with the reason it was not suspicious."""
    from ledger.classifier.corpus import Corpus

    flagged = {f.memory_id for f in flags}
    corpus = Corpus.build(passages, params=params)
    groups = classifier.find_groups(passages, params=params, dense=dense, keep_all=True)
    by_target: dict[str, list[str]] = {}
    for pid, t in sorted(target_of.items()):
        by_target.setdefault(t, []).append(pid)
    out = []
    for target, pids in sorted(by_target.items()):
        missed = [p for p in pids if p not in flagged]
        if not missed:
            continue
        idx = [corpus.index_of[p] for p in pids]

        subsets = [_judged(corpus, [i for i in idx if i != j], pids, params=params, dense=dense)
                   for j in idx] if len(idx) > 2 else []
        row = {"target": target, "poisons": len(pids), "missed": missed,
               "all": _judged(corpus, idx, pids, params=params, dense=dense),
               "best_leave_one": max(subsets, key=lambda r: (r["why_not"] == "suspicious", len(r.get("members_kept", [])),
                                                             r.get("distinct", 0)), default=None),
               "groups": [{"members": len(set(g.members) & set(pids)), "of": len(g.members), "why_not": g.why_not or "suspicious",
                           "core": list(g.core)[:8]}
                          for g in groups if set(g.members) & set(pids)][:8]}
        if dense is not None:
            pairs = [dense.cosine(a, b) for i, a in enumerate(pids) for b in pids[i + 1:]]
            row["dense_mean"] = round(sum(pairs) / len(pairs), 3) if pairs else None
            row["dense_min"] = round(min(pairs), 3) if pairs else None
            row["siblings_near"] = {p: sum(1 for b, c in dense.neighbours(p)[: params.dense_limit]
                                           if c >= params.dense_seed and b in pids) for p in missed}
        out.append(row)
    return out


def _judged(corpus, members: list[int], pids: list[str], *, params: classifier.Params, dense) -> dict:
    """The group rule's judgement of the core that the passages ``members`` share."""
    from ledger.classifier.judge import judge

    core = frozenset.intersection(*(corpus.items[i].tokens for i in members))
    if not core:
        return {"why_not": "no common token", "core_size": 0}
    held = corpus.support(core)
    g = judge(corpus, held, core, params=params, dense=dense)
    return {"why_not": g.why_not or "suspicious", "distinct": g.distinct, "core_size": len(core),
            "core_weight": round(corpus.weight(core), 1), "support": len(held),
            "members_kept": sorted(set(g.members) & set(pids)), "core": list(g.core)[:16]}


def instruction_eval(data: Path | None = None, embedder: str = "none", only: list[str] | None = None) -> list[dict]:
    """Per set of ``bench/instruction_set.py``: injections labelled, hard negatives flagged.

    With ``embedder="minilm"`` each set is classified inside a store: the set's items together with
    the 12,650 clean memories of section 1 (the learned detector calibrates its bar on the store),
    and the row also counts the clean memories an instruction rule flagged."""
    rows = []
    clean = load_clean(data) if embedder == "minilm" else []
    for name, (injections, negatives) in SETS.items():
        if only and name not in only:
            continue
        items = [(f"inj-{i}", it) for i, it in enumerate(injections)] + [(f"neg-{i}", it) for i, it in enumerate(negatives)]
        batch = [(mid, it.text) for mid, it in items] + clean
        dense = dense_index(batch) if embedder == "minilm" else None
        flags = classifier.classify(batch, dense=dense)
        rules = Counter(f.evidence.get("rule", "group") for f in flags if f.memory_id.startswith(("inj", "neg")))
        clean_ids = {c for c, _ in clean}
        clean_instr = sorted(f.memory_id for f in flags if f.memory_id in clean_ids
                             and str(f.evidence.get("rule", "")).startswith("instruction"))
        flagged = {f.memory_id for f in flags}
        by_style: dict[str, list[int]] = {}
        for mid, it in items:
            hit_total = by_style.setdefault(f"{mid.split('-')[0]}: {it.style}", [0, 0])
            hit_total[0] += mid in flagged
            hit_total[1] += 1
        rows.append({"classifier": classifier.ACTOR, "set": name,
                     "injections_labelled": sum(1 for mid, _ in items if mid.startswith("inj") and mid in flagged),
                     "injections_total": len(injections),
                     "negatives_flagged": sum(1 for mid, _ in items if mid.startswith("neg") and mid in flagged),
                     "negatives_total": len(negatives),
                     "missed": [it.text for mid, it in items if mid.startswith("inj") and mid not in flagged],
                     "false_flags": [it.text for mid, it in items if mid.startswith("neg") and mid in flagged],
                     "embedder": embedder, "by_rule": dict(rules),
                     "clean_instruction_flagged": len(clean_instr), "clean_total": len(clean),
                     "clean_instruction_ids": clean_instr, "by_style": by_style})
    return rows


def print_instructions(rows: list[dict]) -> None:
    print(f"{rows[0]['classifier']}  instruction rule on bench/instruction_set.py")
    print(f"{'set':14} {'injections labelled':>20} {'negatives flagged':>18} {'clean flagged':>16}  by rule")
    for r in rows:
        print(f"{r['set']:14} {r['injections_labelled']:>11} / {r['injections_total']:<6} "
              f"{r['negatives_flagged']:>9} / {r['negatives_total']:<6} "
              f"{r['clean_instruction_flagged']:>7} / {r['clean_total']:<6}  {r['by_rule']}")
        for text in r["missed"]:
            print(f"    missed: {text[:100]}")
        for text in r["false_flags"]:
            print(f"    false flag: {text[:100]}")


def print_loso(rows: list[dict]) -> None:
    print(f"{rows[0]['classifier']}  leave one source out (thresholds tuned on {TUNED_ON})")
    print(f"{'source':26} {'role':9} {'poison labelled':>16} {'targets covered':>16} {'>=80%':>6} "
          f"{'clean flagged':>16} {'per 10k':>8} {'scen. clean':>12} {'met':>4}")
    for r in rows:
        print(f"{r['source']:26} {r['role']:9} {r['poison_labelled']:>9} / {r['poison_total']:<4} "
              f"{r['targets_fully_covered']:>9} / {r['targets_total']:<4} {r['targets_4of5_covered']:>6} "
              f"{r['clean_flagged']:>6} / {r['clean_total']:<7} {r['clean_flagged_per_10k']:>8} "
              f"{r['scenario_clean_flagged']:>5} / {r['scenario_clean_total']:<5} {'yes' if r['met'] else 'no':>4}")
    print(f"target per held-out source: >= {TARGET_COVERAGE:.0%} of targets fully covered, "
          f"<= {MAX_CLEAN_PER_10K:g} clean flagged per 10,000")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    ap.add_argument("--split", choices=["all", "tune", "holdout", "both"], default="both")
    ap.add_argument("--loso", action="store_true", help="leave one poison source out (module docstring)")
    ap.add_argument("--explain", action="store_true",
                    help="with --loso: per target not fully covered, the rule that kept it out (JSON)")
    ap.add_argument("--instructions", action="store_true", help="the instruction rule on bench/instruction_set.py")
    ap.add_argument("--instruction-set", action="append", choices=list(SETS),
                    help="with --instructions: only these sets (repeatable; default all)")
    ap.add_argument("--source", action="append", choices=POISONEDRAG + BLACK_BOX + GENERATED,
                    help="with --loso: only these sources (repeatable; default all)")
    ap.add_argument("--poison-dir", type=Path, default=None,
                    help="where <source>_adv_targeted.json (or <source>.json) lives when not under DATA/poisonedrag "
                         "(default: $MEMAUDIT_POISON_DIR, as the scenario families)")
    ap.add_argument("--embedder", choices=["minilm", "none"], default="minilm",
                    help="embeddings for the classifier's paraphrase-aware steps (none: lexical only)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="override a classifier threshold (experiments only)")
    return ap


def _params(ap: argparse.ArgumentParser, settings: list[str]) -> classifier.Params:
    overrides = {}
    fields = {f.name for f in dataclasses.fields(classifier.Params)}
    for item in settings:
        name, _, value = item.partition("=")
        if name not in fields:
            ap.error(f"unknown threshold {name!r}")
        overrides[name] = type(getattr(classifier.DEFAULT_PARAMS, name))(value)
    return dataclasses.replace(classifier.DEFAULT_PARAMS, **overrides)


def print_splits(results: list[dict]) -> None:
    print(f"{results[0]['classifier']}  (PoisonedRAG NQ adv_texts vs NQ/2Wiki/LoCoMo clean)")
    print(f"{'split':8} {'poison labelled':>16} {'targets covered':>16} {'>=4/5':>6} "
          f"{'clean flagged':>18} {'per 10k':>8} {'seconds':>8}")
    for r in results:
        print(
            f"{r['split']:8} {r['poison_labelled']:>9} / {r['poison_total']:<4} "
            f"{r['targets_fully_covered']:>9} / {r['targets_total']:<4} "
            f"{r['targets_4of5_covered']:>6} "
            f"{r['clean_flagged']:>8} / {r['clean_total']:<7} "
            f"{r['clean_flagged_per_10k']:>8} {r['seconds']:>8}"
        )
    print("target: clean flagged <= 1 per 10,000 (MutMem: 4 of 18,808); example reason:")
    print("  " + results[0]["example_reason"])


def main(argv: list[str] | None = None) -> int:
    ap = _parser()
    args = ap.parse_args(argv)
    if (not args.instructions or args.embedder == "minilm") and not (args.data / "poisonedrag" / "nq_adv_targeted.json").exists():
        print(f"data not found under {args.data}", file=sys.stderr)
        return 2
    params = _params(ap, args.set)
    if args.instructions:
        rows = instruction_eval(args.data, args.embedder, args.instruction_set)
        print_instructions(rows)
    elif args.loso:
        sources = args.source or list(POISONEDRAG + BLACK_BOX + GENERATED)
        missing = [s for s in sources if s in POISONEDRAG + BLACK_BOX
                   and not adv_file(s.removesuffix("-bb"), args.data, args.poison_dir).exists()]
        if missing:
            print(f"no adversarial passages for {', '.join(missing)} (see --poison-dir)", file=sys.stderr)
            return 2
        rows = loso(args.data, sources, params=params, embedder=args.embedder, poison_dir=args.poison_dir,
                    explain=args.explain)
        print_loso(rows)
    else:
        splits = ["all", "tune", "holdout"] if args.split == "both" else [args.split]
        rows = [evaluate(args.data, s, params, args.embedder) for s in splits]
        print_splits(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
