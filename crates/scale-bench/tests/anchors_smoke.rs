//! The anchors phase of the scale bench (run in full by `hack/bench.sh`) with 10 members: every
//! system's process starts, syncs every member and reports, and each behaves as the system it
//! stands for does. It asserts what each must do (switch or not, relist or not, go blind or
//! not), no timing.
#![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

use std::time::Duration;

use scale_bench::{
    baselines::{self, BaselineOptions, Programs, System},
    scale::fleet::Fleet,
};

const MEMBERS: usize = 10;

#[tokio::test]
async fn every_anchor_runs_ten_members_and_behaves_as_the_system_it_stands_for() {
    let mut fleet = Fleet::start(MEMBERS, 1, 8).await.unwrap();
    let options = BaselineOptions {
        members: MEMBERS,
        probe_period: Duration::from_secs(1),
        window: Duration::from_secs(2),
        blind_after: Duration::from_secs(10),
        limit: Duration::from_secs(90),
        programs: Programs {
            rust_anchor: env!("CARGO_BIN_EXE_rust-anchor").into(),
            client_go_anchor: testkit::interop::binary("client-go-anchor").unwrap(),
            karmada_anchor: testkit::interop::binary("karmada-anchor").unwrap(),
        },
    };
    let report = baselines::run(&mut fleet, &options).await.unwrap();
    for (system, r) in &report.systems {
        eprintln!("{system:?}: {r:?}");
    }
    assert_eq!(report.systems.len(), System::ALL.len());
    let get = |s: System| report.systems[&s].clone();
    for (system, r) in &report.systems {
        assert_eq!(
            r.malformed, 0,
            "{system:?} wrote lines that are not observations"
        );
        assert!(r.rss_per_member > 0, "{system:?}: {r:?}");
    }

    // Tether: switches without a 401 or a relist, and keeps watching after the restart.
    let tether = get(System::Tether);
    assert_eq!(tether.never_switched, 0, "{tether:?}");
    assert_eq!(tether.failed_401, 0, "{tether:?}");
    assert_eq!(tether.relists_per_member, 0.0, "{tether:?}");
    assert_eq!(tether.blind, 0, "{tether:?}");

    // Karmada ≥ 1.19: switches once the old token is refused (a 401 resets the cache).
    let karmada = get(System::Karmada);
    assert_eq!(karmada.never_switched, 0, "{karmada:?}");
    assert!(karmada.failed_401 >= MEMBERS as u64, "{karmada:?}");
    assert_eq!(karmada.blind, 0, "{karmada:?}");

    // Argo CD: switches by rebuilding, which relists both watched collections of every member.
    let argocd = get(System::ArgoCd);
    assert_eq!(argocd.never_switched, 0, "{argocd:?}");
    assert!(argocd.relists_per_member >= 2.0, "{argocd:?}");
    assert_eq!(argocd.blind, 0, "{argocd:?}");

    // Token baked in, by Karmada v1.18.2's own config builder, in client-go and in kube-rs: never
    // switch, refused, blind after the restart.
    for system in [
        System::KarmadaBefore7663,
        System::ClientGoBearerToken,
        System::KubeRsBakedIn,
    ] {
        let r = get(system);
        assert_eq!(r.never_switched, MEMBERS, "{system:?}: {r:?}");
        assert!(r.failed_401 > 0, "{system:?}: {r:?}");
        assert_eq!(r.blind, MEMBERS, "{system:?}: {r:?}");
    }
}
