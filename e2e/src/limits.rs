//! The times most tests share: how often a collector under test probes its members, how long
//! a start-up may take, and how long a token minted for a test lives.

use std::time::Duration;

/// The probe period of a collector under test.
pub const PROBE: Duration = Duration::from_secs(1);

/// How long a start-up may take: apiservers up, members listed and probed once.
pub const START: Duration = Duration::from_secs(30);

/// How long a token minted for a test lives.
pub const HOUR: Duration = Duration::from_secs(3600);
