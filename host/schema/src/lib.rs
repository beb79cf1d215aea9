//! Schema-registry translation for refract's flows.
//!
//! Records framed for a Confluent-compatible schema registry (byte 0, a 4-byte schema id, the
//! payload) carry ids that mean something only in the registry they were written against. A
//! flow with `schemas = "translate"` gives each framed key and value the id its schema has in
//! the target cluster's registry, registering the schema there under the subject the
//! replication policy names ([`translate`]), and copies the subjects of its topics ahead of
//! traffic ([`Translator::sync_subjects`]). [`client`] speaks the registries' REST API and
//! [`wire`] the framing.

pub mod client;
#[cfg(test)]
mod standin;
pub mod translate;
pub mod wire;

pub use client::{RegistryClient, RegistryError, Schema};
pub use translate::{Field, LastIds, Rename, SchemaCounters, Stats, TranslateError, Translator};
