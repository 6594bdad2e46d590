"""Serving: a stream's declared KPIs, computed by DuckDB and served in the serving database."""

import dagster as dg

from eos_assets.defs import automation
from eos_assets.defs.priority import AFTER_SERVING
from eos_assets.defs.silver import run_or_fail
from eos_assets.defs.stream import SERVING, Stream
from eos_assets.lib.derived import declared_kpis
from eos_assets.resources.lake import LakeResource
from eos_assets.resources.warehouse import WarehouseResource


def kpis_asset(stream: Stream) -> dg.AssetsDefinition:
    """``<stream>/serving/kpis``: the declared KPIs, served in DuckDB as ``<stream>.<kpi>``."""
    sources = {declared_kpis.WINDOWS: stream.window_aggregates}  # the tables the SQL reads
    if stream.entity is not None:
        sources[declared_kpis.ENTITY] = stream.entity_state
    kpis = dict(stream.served)

    @dg.asset(
        key=stream.kpis,
        deps=list(sources.values()),
        group_name=stream.group(SERVING),
        kinds={"delta", "duckdb"},
        op_tags=AFTER_SERVING,
        automation_condition=automation.FOLLOW_UPSTREAM,
        description=f"The KPIs declared by stream {stream.name} ({', '.join(kpis)}), computed "
        f"by DuckDB over its window and entity tables and served as {stream.name}.<kpi>.",
    )
    def declared_kpi_tables(
        context: dg.AssetExecutionContext, lake: LakeResource, warehouse: WarehouseResource
    ) -> dg.MaterializeResult:
        outcome = run_or_fail(
            lambda: declared_kpis.refresh(
                warehouse.path,
                stream.name,
                kpis,
                {name: lake.table_uri(*key.path) for name, key in sources.items()},
                lake.storage_options,
            )
        )
        if outcome.up_to_date:
            context.log.info("the KPIs already reflect the current Delta versions")
        return dg.MaterializeResult(
            metadata={
                "delta_versions": dg.MetadataValue.json(outcome.versions),
                "rows": dg.MetadataValue.json(outcome.rows),
                "up_to_date": outcome.up_to_date,
                "warehouse": warehouse.path,
                "seconds": round(outcome.seconds, 3),
            }
        )

    return declared_kpi_tables
