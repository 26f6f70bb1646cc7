//! How many cases a property test runs.

use proptest::test_runner::Config;

/// `cases` per property in CI; `PROPTEST_CASES=<n>` runs `n` instead. Nothing is persisted:
/// a failure prints its input, and the tree stays clean.
pub fn proptest_config(cases: u32) -> Config {
    let more = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok());
    Config {
        cases: more.unwrap_or(cases),
        failure_persistence: None,
        ..Config::default()
    }
}
