//! kube's request spans (`ClientBuilder::try_from`'s `TraceLayer`): one `HTTP` span per request
//! at debug level, with OpenTelemetry's attribute names, so that a member's requests show in
//! the same traces as a kube client's.

use std::time::Duration;

use http::{HeaderMap, Request, Response};
use kube::client::Body;
use tower_http::{
    classify::{ServerErrorsAsFailures, ServerErrorsFailureClass, SharedClassifier},
    trace::TraceLayer,
};
use tracing::Span;

use super::http2_connections::PoolBody;

type MakeSpan = fn(&Request<Body>) -> Span;
type OnRequest = fn(&Request<Body>, &Span);
type OnResponse = fn(&Response<PoolBody>, Duration, &Span);
type OnEos = fn(Option<&HeaderMap>, Duration, &Span);
type OnFailure = fn(ServerErrorsFailureClass, Duration, &Span);

/// The layer, on the connection pools' side of the stack, where kube has it.
pub(super) fn layer() -> TraceLayer<
    SharedClassifier<ServerErrorsAsFailures>,
    MakeSpan,
    OnRequest,
    OnResponse,
    (),
    OnEos,
    OnFailure,
> {
    TraceLayer::new_for_http()
        .make_span_with(make_span as MakeSpan)
        .on_request((|_, _| tracing::debug!("requesting")) as OnRequest)
        .on_response(on_response as OnResponse)
        .on_body_chunk(())
        .on_eos((|_, _, _| tracing::debug!("stream closed")) as OnEos)
        .on_failure(on_failure as OnFailure)
}

fn make_span(request: &Request<Body>) -> Span {
    tracing::debug_span!(
        "HTTP",
        http.method = %request.method(),
        http.url = %request.uri(),
        http.status_code = tracing::field::Empty,
        otel.name = request.extensions().get::<&'static str>().unwrap_or(&"HTTP"),
        otel.kind = "client",
        otel.status_code = tracing::field::Empty,
    )
}

fn on_response(response: &Response<PoolBody>, _latency: Duration, span: &Span) {
    let status = response.status();
    span.record("http.status_code", status.as_u16());
    if status.is_client_error() || status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
}

/// A transport error, a body error or a 5xx.
fn on_failure(class: ServerErrorsFailureClass, _latency: Duration, span: &Span) {
    span.record("otel.status_code", "ERROR");
    match class {
        ServerErrorsFailureClass::StatusCode(status) => {
            span.record("http.status_code", status.as_u16());
            tracing::error!("failed with status {status}");
        }
        ServerErrorsFailureClass::Error(err) => tracing::error!("failed with error {err}"),
    }
}
