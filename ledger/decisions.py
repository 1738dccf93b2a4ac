"""What the housekeeper may sign: labels that follow from a recorded decision, nothing else.

A label task carries one decision reference (``proposal:<id>`` or ``finding:<id>``); the
housekeeper loads the row and rebuilds every field of the label from it (label, reason,
evidence, actor, idempotency key). Findings are resolved here; proposals by the review app
(``audits.decisions``, registered with :func:`resolver_register`). It refuses — and records a :class:`~ledger.models.
SigningRefusal` shown on the keys page — anything that is not, at that moment,

* for a review proposal's ``poison_suspect`` flag: an audit proposal made by an active member
  of the organization who may propose;
* for a review decision (``poison_likely`` / ``poison_refuted``): a proposal whose recorded
  status is a decision, made by an active member who may review and whom the organization's
  review rules (``audits.services.review_ineligibility``: ``Organization.four_eyes``, the
  invite cooldown) allow to take that decision on that proposal now;
* for the ingest classifier's ``poison_likely``: a recorded :class:`~ledger.models.
  ClassifierFinding` of the classifier version this housekeeper runs, over the memory's current
  content, naming the memory in a group large enough to flag.

So a message written straight into the broker (or a task called with a label and an actor of
its choosing) signs nothing: the queue is no longer trusted with what to sign, only with when.

A decision may also call for a signed weight transition (:class:`TransitionSpec`): a review
proposal of kind ``correction`` (issue 16), once approved by a member whom the same rules allow,
down-weights the memory with the correcting memory, the audit and the proposal in the signed
evidence. The same references and resolvers serve both; the label task signs only the labels
(:func:`decision_resolve`), ``ledger.tasks.correction_transition_task`` only the transitions
(:func:`decision_transitions_resolve`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ledger.classifier import ACTOR
from ledger.models import ClassifierFinding, EpistemicLabel, Memory, SigningRefusal
from orgs.models import Membership
from orgs.services import activity_record

logger = logging.getLogger(__name__)

TASK = "ledger.tasks.label_append_task"
_REF_RE = re.compile(r"(proposal|finding):([1-9][0-9]{0,17})")
OPERATOR_ACTOR = "system:memaudit"  # audits.services.actor_for(None): a management command
MIN_GROUP = 4  # ledger.classifier.Params.min_group: a smaller group never flags


class Refused(Exception):
    """The decision does not allow a signature; ``organization`` is known when the message named one."""

    def __init__(self, reason: str, *, organization=None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.organization = organization


@dataclass(frozen=True)
class LabelSpec:
    """One label to append, rebuilt entirely from a recorded decision."""

    memory_id: int
    label: str
    reason: str
    evidence: dict
    actor: str
    idempotency_key: str


def parse_ref(decision: object) -> tuple[str, int]:
    if not isinstance(decision, str) or not _REF_RE.fullmatch(decision):
        raise Refused("the task names no decision (expected 'proposal:<id>' or 'finding:<id>')")
    kind, pk = decision.split(":")
    return kind, int(pk)


def active_membership(user, organization):
    if user is None:
        return None
    return Membership.objects.filter(user=user, organization=organization, is_active=True).first()


@dataclass(frozen=True)
class TransitionSpec:
    """One signed weight transition to append, rebuilt entirely from a recorded decision.

    ``idempotency_key`` is also written into ``evidence`` (as ``key:<key>``): a transition has no
    side table, so the signed evidence itself is how a redelivery finds it was already appended.
    """

    memory_id: int
    valence_q: int
    eta_q: int
    evidence: tuple[str, ...]
    idempotency_key: str


# Who can tell what a decision id means. ``finding`` is the ledger's own; ``proposal`` belongs
# to the review app, which registers it when it loads (``audits.apps``): the ledger never
# imports the review app (tests/test_architecture.py).
Resolver = Callable[[int], list[LabelSpec | TransitionSpec]]
_RESOLVERS: dict[str, Resolver] = {}


def resolver_register(kind: str, resolver: Resolver) -> None:
    """Let ``kind:<id>`` decision references be resolved by ``resolver`` (it raises Refused)."""
    _RESOLVERS[kind] = resolver


def _specs(decision: object) -> tuple[str, int, list[LabelSpec | TransitionSpec]]:
    kind, pk = parse_ref(decision)
    if kind == "finding":
        return kind, pk, [finding_spec(pk)]
    resolver = _RESOLVERS.get(kind)
    if resolver is None:
        raise Refused(f"no resolver for {kind!r} decisions is installed")
    return kind, pk, resolver(pk)


def decision_of_task(resolve: Callable[[object], tuple[str, int, list]], *, decision: object,
                     unexpected_args: Sequence = (), unexpected_kwargs: Mapping | None = None,
                     task: str = TASK) -> tuple[str, int, list] | None:
    """What a signing task's message calls for: ``resolve(decision)`` when the message carries a
    decision id and nothing else and the decision is eligible; otherwise None, the refusal
    recorded (``refusal_record``). The one gate of the label and the correction tasks."""
    kwargs = dict(unexpected_kwargs or {})
    try:
        if unexpected_args or kwargs:
            raise Refused("the task carries fields besides a decision id (" +
                          ", ".join(sorted(map(str, kwargs))[:8] or ["positional arguments"]) + ")")
        return resolve(decision)
    except Refused as exc:
        refusal_record(reason=exc.reason, args=tuple(unexpected_args), organization=exc.organization,
                       kwargs={"decision": decision, **kwargs}, task=task)
        return None


def decision_resolve(decision: object) -> tuple[str, int, list[LabelSpec]]:
    """Parse ``decision`` and rebuild the labels it calls for; raises Refused (also when it calls
    only for weight transitions: a label task naming it is a forged or misrouted message)."""
    kind, pk, specs = _specs(decision)
    out = [s for s in specs if isinstance(s, LabelSpec)]
    if specs and not out:
        m = Memory.objects.select_related("organization").filter(pk=specs[0].memory_id).first()
        raise Refused(f"{kind} {pk} calls for no signed label", organization=m.organization if m else None)
    return kind, pk, out


def decision_transitions_resolve(decision: object) -> tuple[str, int, list[TransitionSpec]]:
    """Parse ``decision`` and rebuild the weight transitions it calls for; raises Refused when the
    decision calls for none (a transition task for anything else is a forged or stale message)."""
    kind, pk, specs = _specs(decision)
    out = [s for s in specs if isinstance(s, TransitionSpec)]
    if not out:
        m = Memory.objects.select_related("organization").filter(pk=specs[0].memory_id).first() if specs else None
        raise Refused(f"{kind} {pk} calls for no signed weight transition",
                      organization=m.organization if m is not None else None)
    return kind, pk, out


def transition_key_in(evidence: object, key: str) -> bool:
    """Whether a provenance node's signed evidence carries ``key`` (see TransitionSpec)."""
    return isinstance(evidence, list) and f"key:{key}" in evidence


def finding_spec(finding_id: int) -> LabelSpec:
    """The classifier's ``poison_likely`` from a recorded finding, re-checked against the memory now."""
    f = ClassifierFinding.objects.select_related("organization", "memory", "memory__store").filter(
        pk=finding_id).first()
    if f is None:
        raise Refused(f"classifier finding {finding_id} does not exist")
    org, m = f.organization, f.memory
    if m.organization_id != org.pk:
        raise Refused(f"finding {f.pk} names a memory of another organization", organization=org)
    if f.classifier != ACTOR:
        raise Refused(f"finding {f.pk} was made by {f.classifier}, not the classifier this housekeeper runs "
                      f"({ACTOR})", organization=org)
    if bytes(f.content_sha256) != bytes(m.content_sha256):
        raise Refused(f"finding {f.pk}: the memory's content changed since the finding", organization=org)
    ev = f.evidence if isinstance(f.evidence, dict) else {}
    group = ev.get("group")
    if not isinstance(group, list) or m.external_id not in group or len(set(map(str, group))) < MIN_GROUP:
        raise Refused(f"finding {f.pk}: its group does not name this memory among at least {MIN_GROUP}",
                      organization=org)

    present = Memory.objects.filter(store_id=m.store_id, external_id__in=[str(g) for g in group]).count()
    if present != len(set(map(str, group))):
        raise Refused(f"finding {f.pk}: its group names memories the store does not hold", organization=org)
    if not isinstance(ev.get("distinct_passages"), int) or ev["distinct_passages"] < MIN_GROUP:
        raise Refused(f"finding {f.pk}: fewer than {MIN_GROUP} distinct passages", organization=org)
    return LabelSpec(m.pk, EpistemicLabel.Label.LIKELY.value, f.reason, dict(ev), f.classifier,
                     f"{f.classifier}:{m.pk}")


def _short(value: object, limit: int = 80) -> object:
    if isinstance(value, (bool, int)) or value is None:
        return value
    text = value if isinstance(value, str) else type(value).__name__
    return text[:limit] + ("…" if len(text) > limit else "")


def payload_summary(args: tuple, kwargs: dict) -> dict:
    """What a refused message asked for, short enough to show: argument names and short values."""
    return {"args": [_short(a) for a in args[:8]],
            "kwargs": {str(k)[:40]: _short(v) for k, v in list(kwargs.items())[:12]}}


def _organization_named(args: tuple, kwargs: dict):
    """The organization a forged message targets (through its memory), to show it to that org's admins."""
    mid = kwargs.get("memory_id", args[0] if args else None)
    if isinstance(mid, int) and not isinstance(mid, bool):
        m = Memory.objects.select_related("organization").filter(pk=mid).first()
        if m is not None:
            return m.organization
    return None


def refusal_record(*, reason: str, args: tuple = (), kwargs: dict | None = None, organization=None,
                   task: str = TASK) -> SigningRefusal:
    """Record (and log, and put in the organization's activity) a refused signing request."""
    kwargs = kwargs or {}
    organization = organization or _organization_named(args, kwargs)
    summary = payload_summary(args, kwargs)
    logger.warning("housekeeper refused to sign (%s): %s; payload %s", task, reason, summary)
    row = SigningRefusal.objects.create(organization=organization, task=task[:100], reason=reason[:2000],
                                        payload=summary)
    if organization is not None:
        activity_record(organization=organization, verb="signing.refused", actor_label="housekeeper",
                        target=task, detail={"reason": reason[:500], "refusal": row.pk})
    return row
