"""Read paths only the analyst's pages need (the API has its own in ``ledger.store_selectors``).

Everything is scoped to one organization and returns plain values the templates lay out.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.urls import reverse

from ledger.checkpoints import log_verifier_key
from ledger.core.canonical import now_utc, parse_time
from ledger.core.errors import LedgerError
from ledger.models import (
    EpistemicLabel,
    GenesisEntry,
    ImportJob,
    KeyEndorsement,
    KeyEpoch,
    LogLeaf,
    Memory,
    ProvenanceNode,
    SigningRefusal,
    Store,
    TransitionCommitment,
    TreeHead,
)
from ledger.recall import excluded_states
from ledger.selectors import memory_entries_get
from ledger.store_selectors import memory_search


def _short(h: str | bytes | None) -> str:
    if h is None:
        return ""
    text = h.hex() if isinstance(h, (bytes, memoryview)) else str(h)
    return text[:12]


def memory_browse(*, store: Store, q: str | None = None, state: str | None = None, weight_min: float | None = None,
                  weight_max: float | None = None, label: str | None = None) -> QuerySet[Memory]:
    """``store_selectors.memory_search`` plus "has ever carried this label" (a label filter
    is about the history, the state filter about now)."""
    qs = memory_search(store=store, state=state, weight_min=weight_min, weight_max=weight_max, q=q)
    if label:
        qs = qs.filter(labels__label=label).distinct()
    return qs


def memory_history(*, memory: Memory) -> dict[str, Any]:
    """Both chains as timelines and the weight series, rebuilt from the signed entries.

    ``provenance``: genesis then each weight move (seq, time, epoch, actor, reason, hash prefix,
    prev/new weight); ``labels``: the epistemic chain (label, actor, reason, hash prefix);
    ``weights``: {"t": [...], "w": [...], "seq": [...]} for the Plotly line.
    """
    me = memory_entries_get(memory)
    provenance: list[dict[str, Any]] = []
    weights: dict[str, list] = {"t": [], "w": [], "seq": []}
    if me.genesis is not None:
        b = me.genesis.body
        provenance.append({"seq": 0, "kind": "genesis", "time": b["time"], "epoch": b["epoch"], "actor": "housekeeper",
                           "reason": "memory created", "hash": _short(me.genesis.hash()),
                           "new_weight": b["weight_q"] / 1000, "prev_weight": None})
        weights["t"].append(b["time"])
        weights["w"].append(b["weight_q"] / 1000)
        weights["seq"].append(0)
    for e in me.provenance:
        b = e.body
        evidence = b.get("evidence") or []
        reason = f"valence {b['valence_q'] / 1000:+.3f}, η {b['eta_q'] / 1000:.2f}"
        if evidence:
            reason += f"; evidence: {', '.join(map(str, evidence[:4]))}" + (" …" if len(evidence) > 4 else "")
        provenance.append({"seq": b["seq"], "kind": "provenance", "time": b["time"], "epoch": b["epoch"],
                           "actor": "housekeeper", "reason": reason, "hash": _short(e.hash()),
                           "prev_weight": b["prev_weight_q"] / 1000, "new_weight": b["new_weight_q"] / 1000})
        weights["t"].append(b["time"])
        weights["w"].append(b["new_weight_q"] / 1000)
        weights["seq"].append(b["seq"])
    labels = [{"seq": e.body["seq"], "label": e.body["label"], "time": e.body["time"], "epoch": e.body["epoch"],
               "actor": e.body["actor"], "reason": e.body["reason"], "hash": _short(e.hash()),
               "evidence": e.body.get("evidence") or {}} for e in me.labels]
    return {"provenance": provenance, "labels": labels, "weights": weights,
            "transitions": len(me.transitions), "signed": me.genesis is not None}


def recall_status(*, memory: Memory, history: dict[str, Any], in_recall: bool) -> dict[str, Any]:
    """Since when, and by whose word, ``memory`` is in or out of recall: the first label of the
    latest run of labels that left it on the side it is on now (under the store's exclusion
    rule, ``ledger.recall.excluded_states``); with no such label, since it was signed."""
    excluded = excluded_states(memory.store)
    since = None
    for lab in reversed(history["labels"]):
        if (lab["label"] in excluded) == in_recall:
            break
        since = lab
    if since is not None:
        return {"in_recall": in_recall, "since": since["time"], "by": since["actor"], "label": since["label"],
                "seq": since["seq"]}
    genesis = history["provenance"][0] if history["provenance"] else None
    return {"in_recall": in_recall, "since": genesis["time"] if genesis else None,
            "by": "signed at import" if genesis else None, "label": None, "seq": None}


# Below this many signed weights the timeline is a step list (a chart of one or two dots says less).
WEIGHT_CHART_MIN_POINTS = 3


def weight_series(*, history: dict[str, Any]) -> dict[str, Any]:
    """The weight timeline as Plotly wants it (times as "YYYY-MM-DD HH:MM:SS.ffffff" UTC, which
    Plotly reads as dates; the signed RFC 3339 strings end in "Z", which it does not), and as
    steps (time, weight, change) for the list shown when there are few points."""
    w = history["weights"]
    steps, prev = [], None
    for t, weight, seq in zip(w["t"], w["w"], w["seq"]):
        steps.append({"time": t.replace("T", " ").rstrip("Z"), "weight": weight, "seq": seq,
                      "change": None if prev is None else weight - prev})
        prev = weight
    return {"t": [s["time"] for s in steps], "w": list(w["w"]), "seq": list(w["seq"]), "steps": steps,
            "chart": len(steps) >= WEIGHT_CHART_MIN_POINTS}


def log_activity_recent(*, organization, limit: int = 12) -> list[dict[str, Any]]:
    """The newest leaves of the organization's log, labels with their label and actor."""
    leaves = list(LogLeaf.objects.filter(organization=organization).select_related("memory", "memory__store")
                  .order_by("-index")[:limit])
    wanted = [(leaf.memory_id, leaf.seq) for leaf in leaves if leaf.kind == "label"]
    labels: dict[tuple[int, int], EpistemicLabel] = {}
    if wanted:
        for lab in EpistemicLabel.objects.filter(memory_id__in={m for m, _ in wanted}):
            labels[(lab.memory_id, lab.seq)] = lab
    out = []
    for leaf in leaves:
        lab = labels.get((leaf.memory_id, leaf.seq)) if leaf.kind == "label" else None
        out.append({"index": leaf.index, "kind": leaf.kind, "seq": leaf.seq, "memory": leaf.memory,
                    "label": lab.label if lab else "", "actor": lab.actor if lab else "housekeeper",
                    "time": lab.time if lab else "", "hash": _short(bytes(leaf.leaf_hash))})
    return out


def _age_s(time: str, now: datetime) -> int | None:
    try:
        return max(0, int((now - parse_time(time)).total_seconds()))
    except LedgerError:
        return None


def _age_text(age_s: int | None) -> str:
    if age_s is None:
        return "at an unreadable time"
    if age_s < 120:
        return f"{age_s} s ago"
    if age_s < 7200:
        return f"{age_s // 60} min ago"
    if age_s < 172800:
        return f"{age_s // 3600} h ago"
    return f"{age_s // 86400} days ago"


def tree_head_list(*, organization, limit: int = 50) -> list[dict[str, Any]]:
    now = now_utc()
    rows = TreeHead.objects.filter(organization=organization).order_by("-size", "-id")[:limit]
    return [{"size": t.size, "root": bytes(t.root).hex(), "time": t.time, "epoch": t.epoch,
             "signature": _short(bytes(t.signature)), "age": _age_text(_age_s(t.time, now)),
             "checkpoint": t.checkpoint_signature is not None} for t in rows]


def auditor_pins(*, organization) -> dict[str, Any]:
    """What an outside auditor pins: the epoch-1 anchor, the checkpoint URL, the log's note key."""


    first = KeyEpoch.objects.filter(organization=organization, number=1).values_list("public_key", flat=True).first()
    path = reverse("api-checkpoint", kwargs={"org": organization.slug})
    return {"anchor_hex": bytes(first).hex() if first is not None else "",
            "checkpoint_url": settings.SITE_ROOT.rstrip("/") + path,
            "proof_url": settings.SITE_ROOT.rstrip("/") + reverse("api-consistency-proof",
                                                                  kwargs={"org": organization.slug}),
            "log_vkey": log_verifier_key(organization) or ""}


def log_size(*, organization) -> int:
    return LogLeaf.objects.filter(organization=organization).count()


def _status_of(row: KeyEpoch, now: datetime) -> str:
    if row.revoked_at:
        return "revoked"
    try:
        if now < parse_time(row.not_before):
            return "future"
        if now >= parse_time(row.not_after):
            return "expired"
    except LedgerError:  # a malformed stored time is shown as such, not hidden
        return "unknown"
    return "active"


def key_epoch_list(*, organization) -> list[dict[str, Any]]:
    now = now_utc()
    return [{"number": r.number, "public_key": bytes(r.public_key).hex(), "not_before": r.not_before,
             "not_after": r.not_after, "revoked_at": r.revoked_at, "endorsed": r.endorsement is not None,
             "status": _status_of(r, now)}
            for r in KeyEpoch.objects.filter(organization=organization).order_by("-number")]


def key_endorsement_list(*, organization, limit: int = 50) -> list[dict[str, Any]]:
    """Online and receipt keys endorsed by the epoch keys, newest first (keys page)."""

    now = now_utc()
    return [{"seq": r.seq, "purpose": r.purpose, "key_id": r.key_id, "epoch": r.epoch, "not_before": r.not_before,
             "not_after": r.not_after, "revoked_at": r.revoked_at, "status": _status_of(r, now)}
            for r in KeyEndorsement.objects.filter(organization=organization).order_by("-seq")[:limit]]


def signing_refusal_list(*, organization, limit: int = 20) -> list[dict[str, Any]]:
    """The organization's refused signing requests, newest first (keys page)."""

    return [{"time": r.created_at, "task": r.task, "reason": r.reason, "payload": r.payload}
            for r in SigningRefusal.objects.filter(organization=organization)[:limit]]


def import_job_list(*, store: Store, limit: int = 10) -> QuerySet[ImportJob]:
    return ImportJob.objects.filter(store=store).select_related("created_by").order_by("-created_at")[:limit]


# ----------------------------------------------------------------------------- ledger page (issue 15)

LEAF_KINDS = ("genesis", "provenance", "transition", "label", "key_endorsement")


def log_leaves_filtered(*, organization, kind: str = "", memory: str = "") -> QuerySet[LogLeaf]:
    """The organization's log leaves, newest first; ``memory`` matches a memory's external id
    (exactly, or ``store-slug/id``)."""
    qs = LogLeaf.objects.filter(organization=organization).select_related("memory", "memory__store")
    if kind:
        qs = qs.filter(kind=kind)
    if memory:
        slug, _, ext = memory.rpartition("/")
        qs = qs.filter(memory__external_id=ext, **({"memory__store__slug": slug} if slug else {}))
    return qs.order_by("-index")


def log_leaf_rows(*, leaves: list[LogLeaf]) -> list[dict[str, Any]]:
    """The page's leaves as ``log_activity_recent`` rows, each with the signed time of its entry
    (one query per entry table, whatever the page size)."""
    wanted: dict[str, set[tuple[int | None, int]]] = {}
    for leaf in leaves:
        wanted.setdefault(leaf.kind, set()).add((leaf.memory_id, leaf.seq))
    times: dict[tuple[str, int | None, int], str] = {}
    labels: dict[tuple[int, int], EpistemicLabel] = {}
    org_id = leaves[0].organization_id if leaves else None
    for kind, model in (("provenance", ProvenanceNode), ("transition", TransitionCommitment)):
        pairs = wanted.get(kind) or set()
        for m, seq, t in model.objects.filter(memory_id__in={m for m, _ in pairs}).values_list("memory_id", "seq",
                                                                                               "time"):
            if (m, seq) in pairs:
                times[(kind, m, seq)] = t
    if wanted.get("genesis"):
        for m, t in GenesisEntry.objects.filter(memory_id__in={m for m, _ in wanted["genesis"]}).values_list(
                "memory_id", "time"):
            times[("genesis", m, 0)] = t
    if wanted.get("label"):
        for lab in EpistemicLabel.objects.filter(memory_id__in={m for m, _ in wanted["label"]}):
            labels[(lab.memory_id, lab.seq)] = lab
    if wanted.get("key_endorsement"):
        for seq, t in KeyEndorsement.objects.filter(organization_id=org_id, seq__in={s for _, s in
                                                                                     wanted["key_endorsement"]}) \
                .values_list("seq", "time"):
            times[("key_endorsement", None, seq)] = t
    out = []
    for leaf in leaves:
        lab = labels.get((leaf.memory_id, leaf.seq)) if leaf.kind == "label" else None
        if lab is not None:
            time = lab.time
        else:  # a memory has one genesis entry: keyed by the memory alone
            time = times.get((leaf.kind, leaf.memory_id, 0 if leaf.kind == "genesis" else leaf.seq), "")
        out.append({"index": leaf.index, "kind": leaf.kind, "seq": leaf.seq, "memory": leaf.memory,
                    "label": lab.label if lab else "", "actor": lab.actor if lab else "housekeeper",
                    "time": time, "hash": _short(bytes(leaf.leaf_hash))})
    return out
