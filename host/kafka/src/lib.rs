//! refract's librdkafka layer: the one owner of librdkafka's C API (every `unsafe` call into it
//! in the host) and of setting up clients.
//!
//! rdkafka 0.39 wraps most of librdkafka safely, but not everything refract needs: admin
//! requests it does not wrap (ACLs, consumer groups, incremental config changes, authorized
//! operations), offset commits with a time limit, consumer errors with their partition,
//! OAUTHBEARER tokens refract fetches itself, and what librdkafka caches about a client. Keeping
//! those FFI calls here, behind safe functions, lets the mirror, the CLI and the tests use Kafka
//! without `unsafe`, and gives the client configuration (what refract forces, secrets kept out of
//! errors, token refresh) and the connection check (why a cluster cannot be reached, in words)
//! one home.

pub mod acls;
pub mod admin_ffi;
mod client_state;
pub mod clients;
pub mod connect;
pub mod coordinator;
pub mod groups;
pub mod headers;
pub mod oauth;
pub mod source_queue;

pub use client_state::{cached_high_watermark, queued_events, OwnClient};

/// An ACL operation as librdkafka names it (`RD_KAFKA_ACL_OPERATION_READ`, ...).
pub use rdkafka_sys::rd_kafka_AclOperation_t as AclOperation;
/// An ACL's permission type (`RD_KAFKA_ACL_PERMISSION_TYPE_ALLOW` or `_DENY`).
pub use rdkafka_sys::rd_kafka_AclPermissionType_t as AclPermission;
/// librdkafka's error code (`rd_kafka_resp_err_t`) as its admin results report it; the same
/// codes as rdkafka's `RDKafkaErrorCode`, by librdkafka's names.
pub use rdkafka_sys::rd_kafka_resp_err_t as RawErrorCode;
