//! Test doubles for member-client and the crates above it; compiled for member-client's own
//! tests and, elsewhere, with the `test-util` feature (take it under `[dev-dependencies]`
//! only).
//!
//! - [`FakeSource`]: a credential source whose answer, pace and failures the test sets.

mod fake_source;

pub use fake_source::FakeSource;
