//! The sections of the table the bench prints ([`crate::table`]), one per phase, from the
//! phases' reports.

use std::time::Duration;

use crate::{
    baselines::{BaselineReport, System, SystemReport},
    credential_kinds::ExecSingleFlightReport,
    overhead::OverheadReport,
    scale::{
        connections::{COUNT_PERIOD, ConnectionCount, ConnectionReport},
        initial_lists::{InitialListReport, StartCost},
        report::{RotationReport, ScaleReport},
    },
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

/// Section 3: the anchors, as processes of their own beside Tether's member client.
pub fn baselines(b: &BaselineReport, scale: &ScaleReport) -> Section {
    let get = |s: System| b.systems.get(&s).cloned().unwrap_or_default();
    let tether = get(System::Tether);
    let n = b.members;
    let use_latency = |r: &SystemReport| {
        let mut text = table::percentiles(&r.rotation_to_use);
        if r.never_switched > 0 {
            text.push_str(&format!(" ({}/{n} never)", r.never_switched));
        }
        text
    };
    let seconds = |d: Option<Duration>| d.map_or(f64::INFINITY, |d| d.as_secs_f64());
    let unauthorized = |r: &SystemReport| match r.last_401_after {
        Some(last) => format!("{} (last {} after)", r.failed_401, table::duration(last)),
        None => r.failed_401.to_string(),
    };
    let mut rows = Vec::new();
    for system in System::ALL.into_iter().filter(|s| *s != System::Tether) {
        let anchor = get(system);
        let name = system.label();
        let p50 = seconds(anchor.rotation_to_use.p50) / seconds(tether.rotation_to_use.p50);
        let mut to_use = Row::plain(
            format!("{name}: rotation → first request with the new token (p50 / p99 / max)"),
            use_latency(&tether),
        )
        .anchor(
            use_latency(&anchor),
            if anchor.never_switched > 0 {
                "∞".to_owned()
            } else {
                format!("p50 {}", table::ratio(p50, 1.0))
            },
        );
        if system == System::Karmada {
            to_use = to_use.goal("≥ 100× (p50)", p50 >= 100.0);
        }
        // A row of Tether's figure beside the anchor's, `show`n and compared by `count`.
        let compare = |label: String,
                       show: &dyn Fn(&SystemReport) -> String,
                       count: fn(&SystemReport) -> f64| {
            Row::plain(label, show(&tether))
                .anchor(show(&anchor), table::ratio(count(&anchor), count(&tether)))
        };
        let mut relists = compare(
            format!("{name}: lists per member from rotation to restart"),
            &|r| format!("{:.1}", r.relists_per_member),
            |r| r.relists_per_member,
        );
        if system == System::ArgoCd {
            relists = relists.goal(
                "0 vs ≥ 1",
                tether.relists_per_member == 0.0 && anchor.relists_per_member >= 1.0,
            );
        }
        let mut blind = compare(
            format!(
                "{name}: members blind {} after revocation + apiserver restart",
                table::duration(b.options.blind_after)
            ),
            &|r| format!("{}/{n}", r.blind),
            |r| r.blind as f64,
        );
        if system.bakes_in() {
            blind = blind.goal("0 vs all", tether.blind == 0 && anchor.blind == n);
        }
        rows.extend([
            to_use,
            compare(
                format!("{name}: 401 responses from rotation to restart"),
                &unauthorized,
                |r| r.failed_401 as f64,
            ),
            relists,
            blind,
            compare(
                format!(
                    "{name}: Secret reads/s, steady for {} (Tether: cache fetches)",
                    table::duration(b.options.window)
                ),
                &|r| format!("{:.2}/s", r.reads_per_second),
                |r| r.reads_per_second,
            ),
            compare(
                format!("{name}: RSS per member (process RSS / {n})"),
                &|r| kib(r.rss_per_member),
                |r| r.rss_per_member as f64,
            ),
        ]);
    }
    Section {
        title: format!("3. Anchors ({n} members)"),
        note: format!(
            "{n} of the same members (those on member1's apiserver, so one restart reconnects \
             them all), collector stopped; each system a process of its own with, per member, a \
             Deployment and a Node watch and a SelfSubjectReview every {} (its answer names the \
             ServiceAccount, so each request shows which token it carried; this bounds the \
             rotation → use figures from below). Tether: member-client over the registry \
             (rust-anchor). Karmada ≥ 1.19: client-go {} transport.NewCachedTokenSource over a \
             Secret GET through the control plane, wrapped by \
             ResettableTokenSourceWrapTransport, 5-min refresh (client-go-anchor --mode karmada; a \
             Secret-read window shorter than that may see none of its reads: \
             --baseline-window). \
             Karmada {} (< #7663): Karmada's own util.BuildClusterConfig \
             (github.com/karmada-io/karmada/pkg/util) over the member's Cluster and Secret read \
             through the control plane, as util.NewClusterClientSet calls it; it copies the \
             Secret's token into rest.Config.BearerToken once (karmada-anchor). client-go \
             BearerToken: rest.Config{{BearerToken}} read once. \
             Argo CD: not gitops-engine (not buildable here) but its handleModEvent behaviour \
             written with client-go informers: on a changed cluster Secret, stop every informer, \
             rebuild the config, start and wait for sync. kube-rs: the token in kube::Config. \
             Rotation as in 2 (old tokens rejected {} after it); then the apiserver restarts, a \
             Deployment's status changes, and members whose watch has not seen it {} later are \
             blind. Tether's Secret reads are token-cache fetches from the registry's in-memory \
             store ({} members in the collector: {:.2}/s). Per-system stderr: {}.",
            table::duration(b.options.probe_period),
            crate::baselines::system::client_go_version(),
            crate::baselines::system::karmada_version(),
            table::duration(b.revoked_after),
            table::duration(b.options.blind_after),
            scale.members,
            scale.fetches_per_second,
            b.log_dir.display(),
        ),
        rows,
    }
}

fn kib(bytes: u64) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

/// An A/B's row: Tether's time per request beside the `baseline`'s, the median ratio with its
/// quartiles and the A/A of the same rounds, and the goal of a median ratio up to `limit`.
fn ab_row(what: String, o: &OverheadReport, baseline: &str, label: &str, limit: f64) -> Row {
    let (ratio, p25, p75) = o.ratio;
    Row::plain(what, format!("{:.1} µs", o.layered_us))
        .anchor(
            format!("{:.1} µs ({baseline})", o.static_us),
            format!(
                "{label} {ratio:.3}× (p25 {p25:.3}, p75 {p75:.3}; A/A {:.3}×)",
                o.control.0
            ),
        )
        .goal(format!("≤ {limit:.2}×"), ratio <= limit)
}

/// Section 4: the `CredentialLayer`'s per-request overhead, one row per concurrency level.
pub fn overhead(levels: &[OverheadReport]) -> Section {
    let rounds = levels.first().map_or(0, |o| o.rounds);
    let batches: Vec<String> = levels
        .iter()
        .map(|o| format!("{} at {}", o.batch, o.concurrency))
        .collect();
    Section {
        title: "4. Per-request overhead".to_owned(),
        note: format!(
            "in process over loopback HTTP, before the apiservers start: per level, {rounds} \
             rounds; a round is a run of GETs with that many in flight ({} each) by three \
             clients, static-token, CredentialLayer and a second static-token one, taking turns in \
             slices of {} waves in every order; ratio = median of the per-round ratios to the \
             first (p25, p75), and A/A = the same for the second static client, which shows how \
             finely the machine resolves a difference; time per request = run wall time / \
             requests.",
            batches.join(", "),
            crate::overhead::WAVES_PER_SLICE,
        ),
        rows: levels
            .iter()
            .map(|o| {
                let what = format!(
                    "CredentialLayer client vs static-token kube client, {} in flight, per request",
                    o.concurrency
                );
                ab_row(what, o, "static token", "Tether/static", 1.05)
            })
            .collect(),
    }
}

/// Section 5: the client-certificate path and the exec single-flight.
pub fn credential_kinds(
    certificate: Option<&OverheadReport>,
    exec: Option<&ExecSingleFlightReport>,
) -> Section {
    let mut rows = Vec::new();
    if let Some(o) = certificate {
        let what = "client certificate from the cache vs baked into a kube client, median per \
                    request";
        rows.push(ab_row(what.to_owned(), o, "baked in", "Tether/baked", 1.10));
    }
    if let Some(e) = exec {
        rows.push(
            Row::plain(
                format!(
                    "{} concurrent misses on an exec plugin (200 ms), plugin runs",
                    e.misses
                ),
                format!("{} in {}", e.execs, table::duration(e.wall)),
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

/// The goal for connections per member over HTTP/2 (3.6 over HTTP/1.1 before it).
const CONNECTIONS_PER_MEMBER_GOAL: f64 = 1.1;

/// Section 6: the collector's connections to the member apiservers and its RSS per member, the
/// scale phase's collector (HTTP/2, the default) beside the same collector with
/// `--member-http2=false` on the same fleet (`http1`, if it ran); `rotated`: the first
/// collector's count at the end of the mass rotation.
pub fn connections(
    http2: &ConnectionReport,
    rotated: &ConnectionCount,
    http1: Option<&ConnectionReport>,
) -> Section {
    let members = http2.members();
    let per_member = |r: &ConnectionReport, c: &ConnectionCount| {
        format!("{:.2} ({})", r.per_member(c), c.total())
    };
    let most = |r: &ConnectionReport| {
        let c = r.most();
        // Counted every few seconds from all Ready: whole seconds say when.
        format!(
            "{:.2} ({} at {} s)",
            r.per_member(&c),
            c.total(),
            c.after.as_secs()
        )
    };
    let beyond = |r: &ConnectionReport| {
        let c = r.most();
        c.beyond_one_per_member(&r.members_per_apiserver)
            .to_string()
    };
    let per_apiserver = |c: &ConnectionCount| slashed(&c.per_apiserver);
    let rss = |r: &ConnectionReport| {
        format!(
            "{} (RSS {}, peak {})",
            kib(r.rss_per_member()),
            table::mib(r.rss_bytes),
            table::mib(r.peak_rss_bytes)
        )
    };
    let ready = |r: &ConnectionReport| r.all_ready.map_or("—".to_owned(), table::duration);
    // A row of the HTTP/2 collector's figure beside the HTTP/1.1 one's, compared by `count`.
    let compare = |what: &str,
                   show: &dyn Fn(&ConnectionReport) -> String,
                   count: &dyn Fn(&ConnectionReport) -> f64| {
        let row = Row::plain(what, show(http2));
        match http1 {
            Some(h1) => row.anchor(show(h1), table::ratio(count(h1), count(http2))),
            None => row.anchor("— (not run)", ""),
        }
    };
    let steady = |r: &ConnectionReport| r.per_member(&r.steady());
    let rows = vec![
        compare(
            "connections per member, end of the window (total)",
            &|r| per_member(r, &r.steady()),
            &steady,
        )
        .goal(
            format!("≤ {CONNECTIONS_PER_MEMBER_GOAL} (HTTP/2)"),
            steady(http2) <= CONNECTIONS_PER_MEMBER_GOAL,
        ),
        compare(
            "connections per member, most seen (total, when after all Ready)",
            &most,
            &|r| r.per_member(&r.most()),
        ),
        Row::plain(
            "connections beyond one per member, most seen (summed per apiserver)",
            beyond(http2),
        )
        .anchor(http1.map_or("— (not run)".to_owned(), beyond), ""),
        compare(
            &format!(
                "connections per apiserver, end of the window (members: {})",
                slashed(&http2.members_per_apiserver)
            ),
            &|r| per_apiserver(&r.steady()),
            &steady,
        ),
        compare(
            "collector RSS per member, end of the window (RSS / members)",
            &rss,
            &|r| r.rss_per_member() as f64,
        ),
        // Not compared: section 1 sees Ready in the Clusters' status, after the status writer
        // (and the Lease), the HTTP/1.1 collector in its own metrics.
        Row::plain(
            "collector start → every member Ready (HTTP/2: Clusters' conditions; HTTP/1.1: tether_member_ready)",
            ready(http2),
        )
        .anchor(http1.map_or("— (not run)".to_owned(), ready), ""),
        Row::plain(
            "connections per member after the mass rotation (total; HTTP/2 only)",
            format!(
                "{:.2} ({})",
                rotated.total() as f64 / members.max(1) as f64,
                rotated.total()
            ),
        ),
    ];
    Section {
        title: "6. Connections to the members".to_owned(),
        note: format!(
            "{members} members; the collector's established TCP connections to the member \
             apiservers' ports, from its /proc entry (its socket inodes in fd/ matched against \
             net/tcp and net/tcp6), every {} from all Ready to the end of the steady-state window. \
             Tether: section 1's collector, HTTP/2 by ALPN (the default); anchor: the same binary \
             on the same fleet with --member-http2=false (HTTP/1.1 to every member), started after \
             section 2 with the first stopped, Ready by its own tether_member_ready (section 1's by \
             the Clusters' conditions), then the same settle time and window. Members share \
             apiservers and differ only by token, so /proc cannot tell whose a connection is: \
             \"beyond one per member\" is, per apiserver, the connections above its members, \
             summed.",
            table::duration(COUNT_PERIOD),
        ),
        rows,
    }
}

/// The line under the table with every count of section 6, so that a surplus shows when it came
/// and whether it stayed.
pub fn connection_counts(http2: &ConnectionReport, http1: Option<&ConnectionReport>) -> String {
    let series = |r: &ConnectionReport| {
        let counts: Vec<String> = (r.counts.iter())
            .map(|c| format!("{} s {}", c.after.as_secs(), c.total()))
            .collect();
        counts.join(", ")
    };
    let mut line = format!(
        "connections to the member apiservers after all Ready, HTTP/2: {}",
        series(http2)
    );
    if let Some(h1) = http1 {
        line += &format!("; HTTP/1.1: {}", series(h1));
    }
    line + "\n"
}

/// `334/333/333`.
fn slashed(counts: &[usize]) -> String {
    let counts: Vec<String> = counts.iter().map(usize::to_string).collect();
    counts.join("/")
}

/// Section 7: the collector's start with streaming lists beside the same start with paged
/// lists, medians over the starts of each kind.
pub fn initial_lists(report: &InitialListReport, members: usize) -> Section {
    let median = |starts: &[StartCost], value: &dyn Fn(&StartCost) -> f64| {
        InitialListReport::median(starts, value)
    };
    let ready = |s: &StartCost| s.all_ready.map_or(f64::INFINITY, |d| d.as_secs_f64());
    let cpu = |s: &StartCost| s.apiserver_cpu.as_secs_f64();
    // The median, then every start in the order they ran: a few starts vary a lot here.
    let shown = |starts: &[StartCost], value: &dyn Fn(&StartCost) -> f64, unit: &str| {
        let each: Vec<String> = starts.iter().map(|s| format!("{:.1}", value(s))).collect();
        format!("{:.1}{unit} ({})", median(starts, value), each.join(", "))
    };
    let row = |what: &str, value: &dyn Fn(&StartCost) -> f64, unit: &str| {
        let (streaming, paged) = (
            median(&report.streaming, value),
            median(&report.paged, value),
        );
        Row::plain(what, shown(&report.streaming, value, unit)).anchor(
            shown(&report.paged, value, unit),
            table::ratio(paged, streaming),
        )
    };
    let count = |what: &str, value: &dyn Fn(&StartCost) -> f64| {
        let (streaming, paged) = (
            median(&report.streaming, value),
            median(&report.paged, value),
        );
        Row::plain(what, format!("{streaming:.0}")).anchor(format!("{paged:.0}"), "")
    };
    Section {
        title: "7. Streaming lists at the start".to_owned(),
        note: format!(
            "{members} members; a collector started {} times with streaming lists (Tether's \
             column) and {} times with --member-streaming-lists=false (the other), taking turns, \
             with no other collector running and --write-status=false; each start until its own \
             tether_member_ready says every member is Ready. The member apiservers' CPU time \
             (utime + stime from their /proc entries, summed) and their apiserver_request_total \
             LISTs and apiserver_watch_list_duration_seconds_count over that time. The median \
             of the starts of each kind (the lower of the middle two), then each start.",
            report.streaming.len(),
            report.paged.len()
        ),
        rows: vec![
            row("collector start → every member Ready", &ready, " s"),
            row(
                "member apiservers' CPU during the start (summed)",
                &cpu,
                " s",
            ),
            count("LIST requests the member apiservers served", &|s| s.lists),
            count("streaming lists they served", &|s| s.streamed),
        ],
    }
}
