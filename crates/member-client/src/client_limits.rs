//! [`ClientLimits`]: what one member client may ask of its member and take back from it.

use std::time::Duration;

use crate::ResponseLimits;

/// The default [`ClientLimits::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How many requests one member client has in flight, how long each waits, and how much the
/// member may send back: the same for every member of a collector, set by its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Requests in flight to the member at once; more wait. Watches hold a slot only until
    /// their response headers arrive. Default: 64.
    pub max_concurrent_requests: usize,
    /// How long a request that is not a watch may wait for its response headers before it
    /// fails as unreachable. Default: 10 s.
    pub request_timeout: Duration,
    /// How much the member may send back.
    pub response: ResponseLimits,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            max_concurrent_requests: 64,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            response: ResponseLimits::default(),
        }
    }
}
