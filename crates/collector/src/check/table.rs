//! The report for people: one row per member, then each member's details and remedy.

use std::fmt::Write as _;

use super::{
    credential::human_duration,
    probe::Access,
    report::{MemberReport, Report},
    tls::TlsReport,
};

const HEADER: [&str; 8] = [
    "MEMBER",
    "REASON",
    "USER",
    "CREDENTIAL",
    "EXPIRES IN",
    "LIST/WATCH",
    "READYZ",
    "TLS",
];

/// Renders `report` as text: the sources, the table, then one block per member.
pub(crate) fn render(report: &Report) -> String {
    let mut out = String::new();
    for source in &report.sources {
        let error = source
            .error
            .as_deref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default();
        let _ = writeln!(out, "source {}: {}{error}", source.source, source.state);
    }
    let rows: Vec<[String; 8]> = report.members.iter().map(row).collect();
    let mut widths = HEADER.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let _ = writeln!(out);
    push_row(&mut out, &HEADER.map(str::to_owned), &widths);
    for row in &rows {
        push_row(&mut out, row, &widths);
    }
    for member in &report.members {
        let _ = writeln!(out);
        details(&mut out, member);
    }
    out
}

fn push_row(out: &mut String, cells: &[String; 8], widths: &[usize; 8]) {
    let line = cells
        .iter()
        .zip(widths)
        .map(|(cell, width)| format!("{cell:<width$}"))
        .collect::<Vec<_>>()
        .join("  ");
    let _ = writeln!(out, "{}", line.trim_end());
}

fn row(m: &MemberReport) -> [String; 8] {
    let dash = || "-".to_owned();
    let user = m
        .whoami
        .as_ref()
        .map_or_else(dash, |w| match (&w.user, &w.error) {
            (Some(user), _) => user.clone(),
            (None, Some(error)) if error.contains("401") => "(rejected)".to_owned(),
            (None, Some(error)) if error.contains("403") => "(forbidden)".to_owned(),
            _ => "(unknown)".to_owned(),
        });
    let credential = m.credential.as_ref();
    let kind = credential
        .and_then(|c| c.kind)
        .map_or_else(dash, str::to_owned);
    let expires = credential.map_or_else(dash, |c| match &c.expiry {
        Some(expiry) => human_duration(expiry.expires_in_seconds),
        None => "never".to_owned(),
    });
    let reviewed = (m.access.iter()).all(|a| a.list.is_some() && a.watch.is_some());
    let access = if m.access.is_empty() || !reviewed {
        // A review that got no answer says nothing of what is allowed.
        dash()
    } else {
        let allowed = m.access.iter().filter(|a| a.allowed()).count();
        format!("{allowed}/{} allowed", m.access.len())
    };
    let readyz = m
        .readyz
        .as_ref()
        .map_or_else(dash, |r| if r.ok { "ok" } else { "failed" }.to_owned());
    let tls = m.tls.as_ref().map_or_else(dash, tls_cell);
    [
        m.name.clone(),
        m.reason.clone(),
        user,
        kind,
        expires,
        access,
        readyz,
        tls,
    ]
}

fn tls_cell(tls: &TlsReport) -> String {
    match (tls.verified, tls.hostname_matches) {
        (true, Some(true)) => "ok",
        (_, Some(false)) => "wrong name",
        (false, Some(true)) => "untrusted",
        _ if tls.error.is_some() => "failed",
        _ => "-",
    }
    .to_owned()
}

fn details(out: &mut String, m: &MemberReport) {
    let _ = writeln!(out, "{} ({})", m.name, m.reason);
    let mut line = |label: &str, text: String| {
        let _ = writeln!(out, "  {label:<11} {text}");
    };
    if let Some(definition) = &m.definition {
        let source = m.source.map(|s| format!(" ({s})")).unwrap_or_default();
        line("definition", format!("{definition}{source}"));
    }
    if let Some(endpoint) = &m.endpoint {
        line("endpoint", endpoint.clone());
    }
    if let Some(c) = &m.credential {
        let mut text = match c.kind {
            Some(kind) => format!("{kind} from {}", c.from),
            None => format!("from {}", c.from),
        };
        if let Some(jwt) = &c.jwt {
            let iss = jwt.iss.as_deref().unwrap_or("-");
            let exp = jwt.exp.as_deref().unwrap_or("-");
            let _ = write!(
                text,
                "; JWT iss {iss}, aud [{}], exp {exp}",
                jwt.aud.join(", ")
            );
        }
        if let Some(cert) = &c.certificate {
            let _ = write!(
                text,
                "; certificate {}, notAfter {}",
                cert.subject, cert.not_after
            );
        }
        if let Some(expiry) = &c.expiry {
            let _ = write!(
                text,
                " ({} left)",
                human_duration(expiry.expires_in_seconds)
            );
        }
        if let Some(error) = &c.error {
            let _ = write!(text, "; unreadable: {error}");
        }
        line("credential", text);
    }
    if let Some(w) = &m.whoami {
        let text = match (&w.user, &w.error) {
            (Some(user), _) => format!("{user} [{}]", w.groups.join(", ")),
            (None, Some(error)) => error.clone(),
            (None, None) => "no user in the answer".to_owned(),
        };
        line("whoami", text);
    }
    let access: Vec<String> = m.access.iter().map(access_text).collect();
    if !access.is_empty() {
        line("access", access.join("; "));
    }
    if let Some(r) = &m.readyz {
        line("readyz", r.detail.clone());
    }
    if let Some(tls) = &m.tls {
        line("tls", tls_text(tls));
    }
    line("message", m.message.clone());
    line("remedy", m.remedy.to_owned());
}

fn access_text(a: &Access) -> String {
    let verdict = |allowed: Option<bool>| match allowed {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    };
    let mut text = format!(
        "{} list {} watch {}",
        a.resource,
        verdict(a.list),
        verdict(a.watch)
    );
    if let Some(error) = &a.error {
        let _ = write!(text, " ({error})");
    }
    text
}

fn tls_text(tls: &TlsReport) -> String {
    let mut text = format!("trusts {}", tls.trusted_ca.join(" | "));
    if let Some(subject) = &tls.serving_subject {
        let _ = write!(text, "; serving certificate {subject}");
    }
    if let Some(not_after) = &tls.serving_not_after {
        let _ = write!(text, ", notAfter {not_after}");
    }
    if let Some(matches) = tls.hostname_matches {
        let verdict = if matches { "matches" } else { "does NOT match" };
        let _ = write!(text, "; {} {verdict}", tls.server_name);
    }
    if tls.verified {
        text.push_str("; verified");
    }
    if let Some(error) = &tls.error {
        let _ = write!(text, "; {error}");
    }
    text
}
