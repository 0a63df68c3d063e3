"""Our validation verdict vs the real API server's, for one object (create) or one update.

The server side is a server-side dry run (``?dryRun=All``): a create (POST) for new objects, an
update (PUT with the stored ``resourceVersion``) for update cases. 201/200 means accepted, 422
(``Invalid``) rejected by validation; any other answer is a harness problem and is reported as
such. Our side is ``workloadbuilder.validation.validate_object``.
"""

from __future__ import annotations

import collections
import copy
import json
from typing import Any

import attrs

from workloadbuilder.api import CodecError, object_from_dict, object_to_dict
from workloadbuilder.errors import FieldError
from workloadbuilder.testing import RestClient, collection_path, object_path
from workloadbuilder.validation import FeatureGates, validate_object

__all__ = ["SUMMARIES", "Differ", "Outcome"]

#: One line per finished differential run, printed in the terminal summary (conftest.py).
SUMMARIES: list[str] = []


@attrs.frozen(kw_only=True)
class Outcome:
    """One compared case."""

    label: str
    operation: str  # "create" | "update"
    document: dict[str, Any]
    ours: tuple[str, ...]
    our_fields: frozenset[str]
    status: int
    server_message: str
    server_fields: frozenset[str]

    @property
    def server_valid(self) -> bool:
        return self.status in (200, 201)

    @property
    def our_valid(self) -> bool:
        return not self.ours

    @property
    def agree(self) -> bool:
        return self.server_valid == self.our_valid

    def describe(self) -> str:
        return (
            f"[{self.label}] {self.operation} {self.document.get('kind')}: server "
            f"{'ACCEPTS' if self.server_valid else 'REJECTS'} ({self.status}: "
            f"{self.server_message[:600]}); ours "
            f"{'ACCEPTS' if self.our_valid else 'REJECTS'} ({'; '.join(self.ours)[:600]})\n"
            f"object: {json.dumps(self.document, sort_keys=True)[:3000]}"
        )


def _server_fields(body: dict[str, Any]) -> frozenset[str]:
    causes = (body.get("details") or {}).get("causes") or []
    return frozenset(str(c.get("field", "")) for c in causes if isinstance(c, dict))


class Differ:
    """Runs cases against ``api`` in ``namespace`` and keeps counts and disagreements."""

    def __init__(self, api: RestClient, namespace: str, gates: FeatureGates | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.gates = gates or FeatureGates()
        self.counts: collections.Counter[str] = collections.Counter()
        self.disagreements: list[Outcome] = []
        self.field_mismatches: list[Outcome] = []
        self._serial = 0
        self._creates = 0

    def _ours(self, obj: Any, old: Any = None) -> list[FieldError]:
        return validate_object(obj, old, gates=self.gates)

    def _record(self, outcome: Outcome) -> Outcome:
        self.counts["total"] += 1
        self.counts[f"{outcome.operation}/{outcome.document.get('kind')}"] += 1
        self.counts["server-accepts" if outcome.server_valid else "server-rejects"] += 1
        if not outcome.agree:
            self.disagreements.append(outcome)
        elif not outcome.server_valid and outcome.our_fields != outcome.server_fields:
            self.field_mismatches.append(outcome)
        return outcome

    def create(self, obj: Any, label: str = "") -> Outcome:
        """Dry-run create ``obj`` (a typed model) and compare verdicts."""
        obj = attrs.evolve(obj, metadata=attrs.evolve(obj.metadata, namespace=self.namespace))
        # Every other Workload/PodGroup goes through v1alpha3 (same schema, same rules).
        self._creates += 1
        alpha = obj.kind != "CompositePodGroup" and self._creates % 2 == 0
        doc = object_to_dict(obj, api_version="v1alpha3" if alpha else None)
        ours = self._ours(obj)
        resp = self.api.create(collection_path(doc), doc, dry_run=True)
        if resp.status not in (201, 422):
            raise AssertionError(
                f"unexpected server answer {resp.status} ({resp.message}) for "
                f"{json.dumps(doc, sort_keys=True)}"
            )
        return self._record(
            Outcome(
                label=label,
                operation="create",
                document=doc,
                ours=tuple(str(e) for e in ours),
                our_fields=frozenset(e.path for e in ours),
                status=resp.status,
                server_message=resp.message,
                server_fields=_server_fields(resp.body),
            )
        )

    def create_document(self, doc: dict[str, Any], label: str = "") -> Outcome:
        """Like :meth:`create` for a raw document; a document our codec cannot represent
        (``CodecError``, e.g. a missing required field) counts as rejected by us."""
        try:
            obj = object_from_dict(doc)
        except CodecError as e:
            doc = copy.deepcopy(doc)
            doc.setdefault("metadata", {})["namespace"] = self.namespace
            resp = self.api.create(collection_path(doc), doc, dry_run=True)
            if resp.status not in (201, 422):
                raise AssertionError(
                    f"unexpected server answer {resp.status} ({resp.message})"
                ) from None
            return self._record(
                Outcome(
                    label=label,
                    operation="create",
                    document=doc,
                    ours=(f"codec: {e}",),
                    our_fields=frozenset({e.path}),
                    status=resp.status,
                    server_message=resp.message,
                    server_fields=_server_fields(resp.body),
                )
            )
        return self.create(obj, label)

    def raw(
        self,
        doc: dict[str, Any],
        ours: list[FieldError],
        *,
        label: str = "",
        update: bool = False,
    ) -> Outcome:
        """Dry-run create (or update) any document; ``ours`` is our verdict for it."""
        if update:
            resp = self.api.replace(object_path(doc), doc, dry_run=True)
        else:
            resp = self.api.create(collection_path(doc), doc, dry_run=True)
        if resp.status not in (200, 201, 422):
            raise AssertionError(
                f"unexpected server answer {resp.status} ({resp.message}) for "
                f"{json.dumps(doc, sort_keys=True)}"
            )
        return self._record(
            Outcome(
                label=label,
                operation="update" if update else "create",
                document=doc,
                ours=tuple(str(e) for e in ours),
                our_fields=frozenset(e.path for e in ours),
                status=resp.status,
                server_message=resp.message,
                server_fields=_server_fields(resp.body),
            )
        )

    def persist_raw(self, doc: dict[str, Any]) -> dict[str, Any]:
        """Really create ``doc`` (any kind) under a unique name; return the stored document."""
        self._serial += 1
        doc = copy.deepcopy(doc)
        doc["metadata"] = {"name": f"upd-{self._serial}", "namespace": self.namespace}
        resp = self.api.create(collection_path(doc), doc)
        if resp.status != 201:
            raise AssertionError(f"a valid object was rejected: {resp.status} {resp.message}")
        return resp.body

    def persist(self, obj: Any) -> Any:
        """Really create ``obj`` under a unique name and return the stored object (typed)."""
        self._serial += 1
        doc = object_to_dict(obj)
        doc["metadata"] = {
            **{k: v for k, v in doc.get("metadata", {}).items() if k in ("labels", "annotations")},
            "name": f"upd-{self._serial}",
            "namespace": self.namespace,
        }
        resp = self.api.create(collection_path(doc), doc)
        if resp.status != 201:
            raise AssertionError(
                f"a valid object was rejected: {resp.status} {resp.message}: "
                f"{json.dumps(doc, sort_keys=True)}"
            )
        return object_from_dict(resp.body)

    def update(self, old: Any, new: Any, label: str = "") -> Outcome:
        """Dry-run update the stored ``old`` to ``new`` and compare verdicts."""
        doc = object_to_dict(new)
        ours = self._ours(new, old)
        resp = self.api.replace(object_path(doc), doc, dry_run=True)
        if resp.status not in (200, 422):
            raise AssertionError(
                f"unexpected server answer {resp.status} ({resp.message}) for update to "
                f"{json.dumps(doc, sort_keys=True)}"
            )
        return self._record(
            Outcome(
                label=label,
                operation="update",
                document=doc,
                ours=tuple(str(e) for e in ours),
                our_fields=frozenset(e.path for e in ours),
                status=resp.status,
                server_message=resp.message,
                server_fields=_server_fields(resp.body),
            )
        )
