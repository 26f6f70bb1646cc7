//! The bench's credential-kind phases, small: they run, and the exec single-flight holds. No
//! timing is asserted.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use scale_bench::credential_kinds;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_concurrent_misses_run_the_plugin_once() {
    let report = credential_kinds::exec_single_flight(1000).await.unwrap();
    eprintln!("{report:?}");
    assert_eq!(report.misses, 1000);
    assert_eq!(report.execs, 1, "{report:?}");
}

#[tokio::test]
async fn the_certificate_path_answers_over_mtls() {
    let report = credential_kinds::certificate_overhead(3, 10).await.unwrap();
    eprintln!("{report:?}");
    assert!(report.layered_us.is_finite() && report.static_us.is_finite());
    assert!(report.control.0.is_finite(), "the A/A control ran");
    assert_eq!(report.rounds, 3);
    // Whole cycles of the six orders: 10 GETs in slices of 4 are 3 turns, rounded up to 6.
    assert_eq!(report.batch, 24);
}
