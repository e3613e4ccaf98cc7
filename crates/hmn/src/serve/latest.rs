//! What the collector hands the HTTP server: the last [`Rendered`] collection, shared as
//! [`Latest`].

use std::sync::{Arc, RwLock};
use std::time::Instant;

/// One rendered collection.
#[derive(Debug)]
pub struct Rendered {
    pub openmetrics: String,
    pub prometheus: String,
    /// The same with every `hmn_collector_success` at 0, served once stale.
    pub stale_openmetrics: String,
    pub stale_prometheus: String,
    /// From when on this collection is stale.
    pub stale_at: Instant,
}

/// The last rendering, shared between the collector and the server.
pub type Latest = Arc<RwLock<Option<Arc<Rendered>>>>;
