//! Test doubles for member-client and the crates above it; compiled for member-client's own
//! tests and, elsewhere, with the `test-util` feature (take it under `[dev-dependencies]`
//! only).
//!
//! - [`FakeSource`]: a credential source whose answer, pace and failures the test sets.
//! - [`LoopbackServer`]: the HTTP(S) server loop of every stand-in for a member apiserver, on a
//!   loopback address, with the test's handler.
//! - [`TestPki`]: a throwaway CA for its TLS and the client identities it sees.
//! - [`TestMember`]: a member client over a fake source, built as the collector builds one.
//! - [`jwt`]: a token with claims.
//! - [`LogBuffer`]: where a test's log subscriber writes, for the test to read.
//! - [`proptest_config`]: how many cases a property test runs.

mod fake_source;
mod jwt;
mod log_buffer;
mod loopback_server;
mod proptest_config;
mod test_member;
mod test_pki;

pub use fake_source::FakeSource;
pub use jwt::jwt;
pub use log_buffer::LogBuffer;
pub use loopback_server::{LoopbackServer, Peer, Reply};
pub use proptest_config::proptest_config;
pub use test_member::TestMember;
pub use test_pki::{ClientAuth, TestPki};
