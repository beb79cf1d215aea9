//! The schema-translation series of a flow with `schemas = "translate"`: their names, help
//! texts and the counters [`RefractSeries::schemas`](super::RefractSeries::schemas) registers
//! for refract-schema.

use refract_telemetry::{Metrics, MetricsError};

/// Framed keys and values whose schema id was translated, per flow.
pub const SCHEMA_TRANSLATIONS_TOTAL: &str = "refract_schema_translations_total";
/// Translations that had to ask the registries (an id seen for the first time), per flow.
pub const SCHEMA_CACHE_MISSES_TOTAL: &str = "refract_schema_cache_misses_total";
/// Schemas registered on (or found in) the target registry, per flow and target cluster.
pub const SCHEMA_REGISTERED_TOTAL: &str = "refract_schema_registered_total";
/// Failed schema-registry requests, per flow and cluster whose registry failed.
pub const SCHEMA_REGISTRY_ERRORS_TOTAL: &str = "refract_schema_registry_errors_total";

const SCHEMA_TRANSLATIONS_HELP: &str = "Framed keys and values that left with their schema id translated to the target registry's (fields; schemas = \"translate\").";
const SCHEMA_CACHE_MISSES_HELP: &str = "Schema-id translations that asked the registries because the id was new for its remote topic (fields).";
const SCHEMA_REGISTERED_HELP: &str = "Schemas registered on the target cluster's registry, or found there already, by translation and subject sync (schemas).";
const SCHEMA_REGISTRY_ERRORS_HELP: &str =
    "Schema-registry requests that failed, per cluster whose registry failed them (requests).";

/// What [`RefractSeries::schemas`](super::RefractSeries::schemas) registers (or finds): the
/// schema-translation series of flow `flow` between clusters `source` and `target`.
pub(super) fn counters(
    metrics: &Metrics,
    flow: &str,
    source: &str,
    target: &str,
) -> Result<refract_schema::SchemaCounters, MetricsError> {
    let errors = |cluster: &str| {
        metrics.counter(
            SCHEMA_REGISTRY_ERRORS_TOTAL,
            SCHEMA_REGISTRY_ERRORS_HELP,
            &[("flow", flow), ("cluster", cluster)],
        )
    };
    Ok(refract_schema::SchemaCounters {
        translations: metrics.counter(
            SCHEMA_TRANSLATIONS_TOTAL,
            SCHEMA_TRANSLATIONS_HELP,
            &[("flow", flow)],
        )?,
        cache_misses: metrics.counter(
            SCHEMA_CACHE_MISSES_TOTAL,
            SCHEMA_CACHE_MISSES_HELP,
            &[("flow", flow)],
        )?,
        registered: metrics.counter(
            SCHEMA_REGISTERED_TOTAL,
            SCHEMA_REGISTERED_HELP,
            &[("flow", flow), ("cluster", target)],
        )?,
        source_errors: errors(source)?,
        target_errors: errors(target)?,
    })
}
