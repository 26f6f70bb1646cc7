//! The sections of the table the bench prints ([`crate::table`]), one per phase, from the
//! phases' reports.

use std::time::Duration;

use crate::{
    baselines::{BaselineReport, ModelReport, models::Model},
    credential_kinds::ExecSingleFlightReport,
    overhead::OverheadReport,
    scale::report::{RotationReport, ScaleReport},
    table::{self, Row, Section},
};

/// Section 1: the scale phase.
pub fn scale(s: &ScaleReport) -> Section {
    let all_ready = match s.all_ready {
        Some(d) => format!(
            "{} (p50 {})",
            table::duration(d),
            s.ready.p50.map_or("—".into(), table::duration)
        ),
        None => format!("only {}/{} Ready", s.ready_count, s.members),
    };
    Section {
        title: "1. Scale".to_owned(),
        note: format!(
            "{} members, each with its own ServiceAccount, token, Secret and Karmada Cluster, on {} \
             member apiservers (memberN → apiserver N mod {}); the release collector as a child \
             process (RSS, CPU from /proc); Ready from a watch on the Clusters' conditions; watches \
             from apiserver_longrunning_requests{{verb=WATCH}} minus those open before the collector; \
             steady state measured {} after all were Ready.",
            s.members,
            s.apiservers,
            s.apiservers,
            table::duration(s.settle)
        ),
        rows: vec![
            Row::plain(
                "setup: SAs (2 per member), tokens, Secrets, Clusters",
                table::duration(s.setup),
            ),
            Row::plain(
                "collector start → all Ready (Cluster conditions)",
                all_ready,
            )
            .goal(
                "≤ 60 s",
                s.all_ready.is_some_and(|d| d <= Duration::from_secs(60)),
            ),
            Row::plain(
                "collector RSS, steady state (peak)",
                format!(
                    "{} ({})",
                    table::mib(s.rss_bytes),
                    table::mib(s.peak_rss_bytes)
                ),
            )
            .goal("≤ 512 MiB", s.rss_bytes <= 512 * 1024 * 1024),
            Row::plain(
                format!(
                    "collector CPU, steady state ({} window)",
                    table::duration(s.window)
                ),
                format!("{:.3} cores", s.cpu_cores),
            ),
            Row::plain(
                "open watch streams on the member apiservers (collector's)",
                format!("{:.0} (expected {})", s.watches, s.watches_expected),
            ),
            Row::plain(
                "API requests/s to the member apiservers, steady state (apiserver_request_total)",
                format!("{:.1}/s", s.requests_per_second),
            ),
            Row::plain(
                "token-cache fetches/s (Secret store reads), steady state",
                format!("{:.2}/s", s.fetches_per_second),
            ),
        ],
    }
}

/// Section 2: the mass rotation.
pub fn rotation(r: &RotationReport) -> Section {
    let mut switched = table::percentiles(&r.switched);
    if r.not_switched > 0 {
        switched.push_str(&format!(" ({} never logged)", r.not_switched));
    }
    Section {
        title: "2. Mass rotation".to_owned(),
        note: format!(
            "all {} Secrets rewritten at once (32 writes in flight) with a token of each member's \
             second ServiceAccount, then the old ServiceAccounts deleted and every old token checked \
             with TokenReview until rejected, then one more probe period. \"Switched\": the \
             collector logs `credentials rotated` for a member after the registry has invalidated \
             its cache entry, so its next request carries the new token; its log timestamp minus \
             the write's acknowledgement. \"First request\": after a switch the member's next \
             request misses the cache and fetches once; the token-cache fetch counter, polled every \
             100 ms, gives when the k-th member did. Counters are deltas of the collector's \
             /metrics over the rotation; CredentialsValid from a watch on the Clusters.",
            r.members
        ),
        rows: vec![
            Row::plain(
                "Secret writes, first sent → last acknowledged",
                table::duration(r.writes),
            ),
            Row::plain(
                "per member: write acknowledged → collector switched (p50 / p99 / max)",
                switched,
            ),
            Row::plain(
                "rotation start → k-th member's first request with its new token (p50 / p99 / max)",
                table::percentiles(&r.in_use),
            ),
            Row::plain(
                "rotation start → every old token rejected by its apiserver",
                table::duration(r.revoked_after),
            ),
            Row::plain(
                "Secret fetches per rotated Secret",
                format!("{:.3}", r.fetches_per_secret()),
            )
            .goal("exactly 1", r.fetches_per_secret() == 1.0),
            Row::plain("relists caused", format!("{:.0}", r.relists)).goal("0", r.relists == 0.0),
            Row::plain(
                "401s answered by members (after old tokens were rejected too)",
                format!("{:.0}", r.unauthorized),
            )
            .goal("0", r.unauthorized == 0.0),
            Row::plain(
                "members that went CredentialsValid=False",
                r.credentials_false.len().to_string(),
            )
            .goal("0", r.credentials_false.is_empty()),
        ],
    }
}

/// Section 3: the baseline models on a subset of the same members, against Tether's own
/// steady state from the scale phase.
pub fn baselines(b: &BaselineReport, scale: &ScaleReport) -> Section {
    let get = |m: Model| b.models.get(&m).cloned().unwrap_or_default();
    let (tether, baked, ttl, every) = (
        get(Model::Tether),
        get(Model::BakedIn),
        get(Model::TtlOnly),
        get(Model::EveryRequest),
    );
    let n = b.members;
    let use_latency = |r: &ModelReport| {
        let mut text = table::percentiles(&r.rotation_to_use);
        if r.never_switched > 0 {
            text.push_str(&format!(" ({}/{n} never)", r.never_switched));
        }
        text
    };
    let p50 = |r: &ModelReport| {
        r.rotation_to_use
            .p50
            .map_or(f64::INFINITY, |d| d.as_secs_f64())
    };
    let max = |r: &ModelReport| {
        r.rotation_to_use
            .max
            .map_or(f64::INFINITY, |d| d.as_secs_f64())
    };
    Section {
        title: format!("3. Baselines ({n} members)"),
        note: format!(
            "{n} of the same members (those on member1's apiserver, so one restart reconnects \
             them all), collector stopped; per member 4 clients in this process (bake-in: token \
             in kube::Config; TTL only: 5-min cache, reset on 401, no retry; read every request: \
             Secret GET per request; Tether: member-client over the registry's cache), each \
             running a Deployment watch and a SelfSubjectReview every {} (its answer names the \
             ServiceAccount, so each request shows which token it carried). Rotation as in 2 \
             (old tokens rejected {} after it); then the apiserver restarts, a Deployment's status \
             changes, and members whose watch has not seen it {} later are blind. A subset because \
             4 models x 1,000 members would need 4,000 more clients on 2 cores.",
            table::duration(b.options.probe_period),
            table::duration(b.revoked_after),
            table::duration(b.options.blind_after),
        ),
        rows: vec![
            Row::plain(
                format!(
                    "bake-in: members blind {} after revocation + apiserver restart",
                    table::duration(b.options.blind_after)
                ),
                format!("{}/{n}", tether.blind),
            )
            .anchor(
                format!("{}/{n} blind", baked.blind),
                table::ratio(baked.blind as f64, tether.blind as f64),
            ),
            Row::plain(
                "bake-in: rotation → first request with the new token (p50 / p99 / max)",
                use_latency(&tether),
            )
            .anchor(use_latency(&baked), "∞".to_owned()),
            Row::plain(
                "TTL only (5 min, reset on 401): rotation → use (p50 / p99 / max)",
                use_latency(&tether),
            )
            .anchor(
                use_latency(&ttl),
                format!(
                    "p50 {} / max {}",
                    table::ratio(p50(&ttl), p50(&tether)),
                    table::ratio(max(&ttl), max(&tether))
                ),
            ),
            Row::plain(
                "TTL only: requests failed with 401 from rotation to end",
                tether.failed_401.to_string(),
            )
            .anchor(
                ttl.failed_401.to_string(),
                table::ratio(ttl.failed_401 as f64, tether.failed_401 as f64),
            ),
            Row::plain(
                format!(
                    "read every request: Secret reads/s, steady ({n} members; Tether: cache fetches)"
                ),
                format!(
                    "{:.2}/s ({} members in the collector: {:.2}/s)",
                    tether.reads_per_second, scale.members, scale.fetches_per_second
                ),
            )
            .anchor(
                format!("{:.1}/s", every.reads_per_second),
                table::ratio(every.reads_per_second, tether.reads_per_second),
            ),
            Row::plain(
                "read every request: rotation → use (p50 / p99 / max)",
                use_latency(&tether),
            )
            .anchor(use_latency(&every), String::new()),
        ],
    }
}

/// Section 4: the `BearerLayer`'s per-request overhead.
pub fn overhead(o: &OverheadReport) -> Section {
    let (ratio, p25, p75) = o.ratio;
    Section {
        title: "4. Per-request overhead".to_owned(),
        note: format!(
            "in process over loopback HTTP, before the apiservers start: {} rounds x {} \
             sequential GETs per client, alternating, ratio = median of per-round ratios \
             (the A/B of crates/member-client/benches/bearer_overhead.rs).",
            o.rounds, o.batch
        ),
        rows: vec![
            Row::plain(
                "BearerLayer client vs static-token kube client, median per request",
                format!("{:.1} µs", o.layered_us),
            )
            .anchor(
                format!("{:.1} µs (static token)", o.static_us),
                format!("Tether/static {ratio:.3}× (p25 {p25:.3}, p75 {p75:.3})"),
            )
            .goal("≤ 1.05×", ratio <= 1.05),
        ],
    }
}

/// Section 5: the client-certificate path and the exec single-flight.
pub fn credential_kinds(
    certificate: Option<&OverheadReport>,
    exec: Option<&ExecSingleFlightReport>,
) -> Section {
    let mut rows = Vec::new();
    if let Some(o) = certificate {
        let (ratio, p25, p75) = o.ratio;
        rows.push(
            Row::plain(
                "client certificate from the cache vs baked into a kube client, median per request",
                format!("{:.1} µs", o.layered_us),
            )
            .anchor(
                format!("{:.1} µs (baked in)", o.static_us),
                format!("Tether/baked {ratio:.3}× (p25 {p25:.3}, p75 {p75:.3})"),
            )
            .goal("≤ 1.10×", ratio <= 1.10),
        );
    }
    if let Some(e) = exec {
        rows.push(
            Row::plain(
                format!(
                    "{} concurrent misses on an exec plugin (200 ms), plugin runs",
                    e.misses
                ),
                format!("{} in {}", e.execs, crate::table::duration(e.wall)),
            )
            .goal("exactly 1", e.execs == 1),
        );
    }
    Section {
        title: "5. Credential kinds".to_owned(),
        note: "in process over loopback: mTLS GETs, alternating as in section 4; a cold cache \
               over an exec plugin that takes 200 ms."
            .to_owned(),
        rows,
    }
}
