//! The collector's log subscriber: `RUST_LOG` (or a default level), text or JSON, coloured
//! only where `--color` says, and never a member's response body.
//!
//! kube-client logs the whole body of a response it could not parse, and of an error it
//! could not read as a `Status`, under its own target [`KUBE_BODY_TARGET`] (at `warn` for a
//! body that is not the JSON asked for). A member chooses those bytes: megabytes, forged log
//! lines, terminal escapes. That target is dropped whatever `RUST_LOG` says; the error itself
//! still reaches the collector, which logs and reports it sanitized.

use tracing::{Metadata, Subscriber};
use tracing_subscriber::{
    EnvFilter, Layer as _, filter::filter_fn, fmt::MakeWriter, layer::SubscriberExt as _,
};

use crate::cli::LogFormat;

/// The target of kube-client's events that carry response bodies (its `client` module).
/// Other kube-client targets (the HTTP trace layer's, `kube_client::client::builder`) log
/// no body and are kept.
pub const KUBE_BODY_TARGET: &str = "kube_client::client";

/// Whether an event may be logged at all.
fn loggable(meta: &Metadata<'_>) -> bool {
    meta.target() != KUBE_BODY_TARGET
}

/// The subscriber: `RUST_LOG`, else `default` (e.g. `info`), in `format`, to `writer`, with
/// ANSI colour codes in text lines only if `ansi` (see [`crate::cli::LogColor::enabled`]).
pub fn subscriber<W>(
    format: LogFormat,
    ansi: bool,
    default: &str,
    writer: W,
) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_writer(writer);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt.json().boxed(),
    };
    tracing_subscriber::registry().with(fmt.with_filter(filter).with_filter(filter_fn(loggable)))
}

#[cfg(test)]
mod tests {
    use kube::client::Body;
    use member_client::test_util::LogBuffer;

    use super::*;

    /// A member that answers every request with `body` (200, not JSON, or a 500).
    fn member(status: u16, body: String) -> kube::Client {
        let service = tower::service_fn(move |_: http::Request<Body>| {
            let body = body.clone();
            async move {
                http::Response::builder()
                    .status(status)
                    .body(Body::from(body.into_bytes()))
            }
        });
        kube::Client::new(service, "default")
    }

    #[tokio::test]
    async fn a_members_response_body_never_reaches_the_logs() {
        let hostile = format!(
            "\n2026-01-01T00:00:00Z  INFO forged line\u{1b}[2J\u{1b}[31m{}",
            "x".repeat(1 << 20)
        );
        for format in [LogFormat::Text, LogFormat::Json] {
            let captured = LogBuffer::default();
            let writer = captured.clone();
            let subscriber = subscriber(format, true, "trace", move || writer.clone());
            let _guard = tracing::subscriber::set_default(subscriber);
            tracing::warn!(target: "tether_probe", "the log works");
            for status in [200, 500] {
                let request = http::Request::get("/version").body(Vec::new()).unwrap();
                let answered: Result<serde_json::Value, _> =
                    member(status, hostile.clone()).request(request).await;
                assert!(answered.is_err());
            }
            let logged = captured.text();
            assert!(logged.contains("the log works"), "{logged}");
            assert!(
                !logged.contains("forged line"),
                "{format:?}: {}",
                &logged[..2000.min(logged.len())]
            );
            assert!(!logged.contains("\u{1b}[2J"), "{format:?}");
            assert!(
                logged.len() < 64 * 1024,
                "{format:?}: {} bytes logged",
                logged.len()
            );
        }
    }
}
