//! No token reaches anything the collector puts out — conditions, Events, the read API,
//! `/readyz`, `/metrics`, or its logs at TRACE level, `log` records from rustls and hyper
//! included — across a rotation, a Secret holding garbage around the token, and a revocation.

use std::{
    io::Write,
    sync::{Arc, Mutex},
    time::Duration,
};

use e2e::{
    limits::{HOUR, PROBE},
    scenario::Scenario,
};
use k8s_openapi::api::events::v1::Event;
use kube::{Api, api::ListParams};

const CONVERGE: Duration = Duration::from_secs(20);

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn no_output_of_the_collector_holds_a_token() -> anyhow::Result<()> {
    let captured = Captured::default();
    let writer = captured.clone();
    // Global, and bridging the `log` crate, so records of every thread and library land here.
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::TRACE)
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .try_init()
        .unwrap();

    let s = Scenario::start_healthy(1, PROBE).await?;
    let ns = s.namespace.clone();
    let first = s.registered_tokens[0].clone();
    let ca = s.member(1).ca_pem().to_owned();

    // Rotation.
    let second = s.member(1).mint_token(&ns, "agent-b", HOUR).await?;
    s.karmada.write_secret("member1", &second, &ca).await?;
    s.karmada.wait_healthy("member1", CONVERGE).await?;

    // Garbage around the token: an inner newline, and the token where the CA should be.
    let doubled = format!("{second}\n{second}");
    s.karmada.write_secret("member1", &doubled, &second).await?;
    s.wait("member1", "Ready=False/SecretInvalid", CONVERGE)
        .await?;

    // A token the member does not know: rejected.
    // The signature's first character carries six bits of it (its last may carry only padding).
    let (signed, signature) = first.rsplit_once('.').unwrap();
    let flipped = if signature.starts_with('A') { 'B' } else { 'A' };
    let forged = format!("{signed}.{flipped}{}", &signature[1..]);
    s.karmada.write_secret("member1", &forged, &ca).await?;
    s.wait("member1", "CredentialsValid=False/Unauthorized", CONVERGE)
        .await?;

    let status = s.karmada.status("member1").await?;
    let events = Api::<Event>::all(s.karmada.client().clone())
        .list(&ListParams::default())
        .await?;
    let mut outputs = vec![
        ("Cluster status", status.to_string()),
        ("Events", serde_json::to_string(&events.items)?),
    ];
    for path in [
        "/api/v1/clusters",
        "/api/v1/clusters/member1",
        "/api/v1/readiness",
        "/readyz",
        "/metrics",
    ] {
        let (_, body) = s.collector.get(path).await?;
        outputs.push((path, body));
    }
    let logs = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    for (seen, what) in [
        ("member1", "the collector's logs"),
        ("rustls", "the log crate's records"),
    ] {
        assert!(logs.contains(seen), "the capture saw {what}");
    }
    outputs.push(("logs", logs));

    for (what, text) in &outputs {
        for (name, token) in [("first", &first), ("second", &second), ("forged", &forged)] {
            // A JWT's header is the same for every token; its signature is what is secret.
            let signature = token.rsplit('.').next().unwrap();
            assert!(
                !text.contains(signature),
                "the {name} token's signature is in the {what}"
            );
        }
    }
    Ok(())
}
