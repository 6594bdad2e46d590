"""Results of bronze materializations and checks in the tests: metadata, evaluations, history."""

import dagster as dg
from deltalake import DeltaTable

NODE = "orders__bronze__raw_events"


def materialized(result: dg.ExecuteInProcessResult) -> dict:
    (mat,) = result.asset_materializations_for_node(NODE)
    return {k: v.value for k, v in mat.metadata.items()}


def evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def meta(evaluation: dg.AssetCheckEvaluation) -> dict:
    return {k: v.value for k, v in evaluation.metadata.items()}


def ingest_history(uri: str) -> list[dict]:
    return [h for h in reversed(DeltaTable(uri).history()) if h.get("eos.operation") == "ingest"]


def evaluate(check: dg.AssetChecksDefinition, **resources: object) -> dg.AssetCheckResult:
    """Run one asset check directly with real resources (and a context with no history)."""
    result = check(dg.build_asset_check_context(), **resources)
    assert isinstance(result, dg.AssetCheckResult)
    return result
