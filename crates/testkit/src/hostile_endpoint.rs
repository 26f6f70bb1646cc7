//! [`HostileEndpoint`]: a loopback HTTPS server that plays a member apiserver on an address a
//! hostile definition chose, and records every `Authorization` header it is sent.
//!
//! An attack test points a definition at it (let in with `--allow-endpoint`, see
//! [`allow_endpoint_arg`](HostileEndpoint::allow_endpoint_arg)) and then asks what reached it:
//! a credential that must never leave its own member shows up in
//! [`authorizations`](HostileEndpoint::authorizations). It answers enough of the API for a
//! client to believe it: `/readyz`, `/livez`, `/healthz`, `/version`, discovery, a
//! SelfSubjectReview, empty lists, watches that stay open and silent, and a TokenRequest whose
//! token the test chooses ([`set_minted_token`](HostileEndpoint::set_minted_token)). It refuses
//! streaming lists (422), as an apiserver with the `WatchList` feature off does, so that a
//! client lists in pages.
//!
//! By default it behaves; [`misbehave`](HostileEndpoint::misbehave) makes it send what a
//! member must not be able to exhaust the collector with ([`Misbehaviour`]): a huge `/readyz`,
//! lists without end, `continue` tokens for ever, a watch without a newline, a `/version` that
//! trickles. Every such stream is bounded in bytes and time, so that a collector without limits
//! still ends the test instead of the machine.
//!
//! It binds only loopback addresses (`127.0.0.2`, `127.0.0.3`, …): those are distinct from the
//! real apiservers' `127.0.0.1` to the endpoint policy, and never leave the machine.

use std::{
    convert::Infallible,
    net::Ipv4Addr,
    sync::{Arc, Mutex, PoisonError},
};

use anyhow::{Context as _, Result, ensure};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use member_client::test_util::{ClientAuth, LoopbackServer, TestPki};

pub use misbehaviour::Misbehaviour;
use misbehaviour::misbehave;

/// The most `Authorization` headers kept; a client that loops cannot grow the test's memory.
const MAX_RECORDED: usize = 100_000;

/// The username the endpoint's SelfSubjectReview answers with.
pub const HOSTILE_USERNAME: &str = "system:serviceaccount:hostile:hostile";

/// The running server; stops, connections and all, when dropped.
pub struct HostileEndpoint {
    ca_pem: String,
    state: Arc<State>,
    server: LoopbackServer,
}

impl std::fmt::Debug for HostileEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostileEndpoint")
            .field("addr", &self.server.addr())
            .finish_non_exhaustive()
    }
}

#[derive(Default)]
struct State {
    authorizations: Mutex<Vec<String>>,
    requests: Mutex<Vec<String>>,
    minted_token: Mutex<Option<String>>,
    misbehaviour: Mutex<Option<Misbehaviour>>,
}

impl HostileEndpoint {
    /// Serves HTTPS on a free port of `ip`, which must be a loopback address other than
    /// `127.0.0.1` (the harness's apiservers live there, and the policy tells them apart by
    /// address).
    ///
    /// # Errors
    /// `ip` is not loopback, or the certificate or the listener cannot be made.
    pub async fn start(ip: Ipv4Addr) -> Result<Self> {
        ensure!(
            ip.is_loopback() && ip != Ipv4Addr::LOCALHOST,
            "a hostile endpoint listens on 127.0.0.2 and up, never on {ip}"
        );
        let pki = TestPki::new();
        let config = pki.server_config(ip, ClientAuth::None);
        let state = Arc::new(State::default());
        let shared = Arc::clone(&state);
        let server = LoopbackServer::start(ip, Some(config), move |request, _| {
            std::future::ready(respond(&shared, &request))
        })
        .await
        .with_context(|| format!("serving on {ip}"))?;
        Ok(Self {
            ca_pem: pki.ca_pem(),
            state,
            server,
        })
    }

    /// `https://<ip>:<port>`: the endpoint a hostile definition names.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// The CA (PEM) that signed the endpoint's certificate: the one its definition supplies.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The `--allow-endpoint` value that lets exactly this endpoint's address in.
    pub fn allow_endpoint_arg(&self) -> String {
        format!("{}/32", self.server.addr().ip())
    }

    /// Every `Authorization` header value received so far, in order of arrival.
    pub fn authorizations(&self) -> Vec<String> {
        lock(&self.state.authorizations).clone()
    }

    /// Whether any request carried `Authorization: Bearer <token>`.
    pub fn saw_bearer(&self, token: &str) -> bool {
        let wanted = format!("Bearer {token}");
        lock(&self.state.authorizations).contains(&wanted)
    }

    /// How many requests arrived (with or without credentials).
    pub fn requests(&self) -> usize {
        lock(&self.state.requests).len()
    }

    /// `METHOD path?query` of every request so far.
    pub fn request_lines(&self) -> Vec<String> {
        lock(&self.state.requests).clone()
    }

    /// Misbehaves as `misbehaviour` says from now on.
    pub fn misbehave(&self, misbehaviour: Misbehaviour) {
        *lock(&self.state.misbehaviour) = Some(misbehaviour);
    }

    /// The token a TokenRequest is answered with from now on (none: 404).
    pub fn set_minted_token(&self, token: &str) {
        *lock(&self.state.minted_token) = Some(token.to_owned());
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

type Body = BoxBody<Bytes, Infallible>;

fn respond(state: &State, request: &Request<Incoming>) -> Response<Body> {
    let uri = request.uri();
    let line = format!(
        "{} {}",
        request.method(),
        uri.path_and_query().map_or("/", |pq| pq.as_str())
    );
    {
        let mut requests = lock(&state.requests);
        if requests.len() < MAX_RECORDED {
            requests.push(line);
        }
    }
    if let Some(value) = request.headers().get(header::AUTHORIZATION) {
        let mut seen = lock(&state.authorizations);
        if seen.len() < MAX_RECORDED {
            seen.push(String::from_utf8_lossy(value.as_bytes()).into_owned());
        }
    }
    let path = uri.path();
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    // Like an apiserver with the WatchList feature off, so that a client lists in pages, where
    // the misbehaviours are.
    let streaming = uri
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "sendInitialEvents=true"));
    if watch && streaming {
        return json(
            StatusCode::UNPROCESSABLE_ENTITY,
            &serde_json::json!({
                "kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Invalid", "code": 422,
                "message": "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"
            }),
        );
    }
    let misbehaviour = *lock(&state.misbehaviour);
    if let Some(misbehaviour) = misbehaviour
        && request.method() == Method::GET
        && let Some(response) = misbehave(misbehaviour, path, uri.query(), watch)
    {
        return response;
    }
    match (request.method(), path) {
        (&Method::GET, "/readyz" | "/livez" | "/healthz") => text(StatusCode::OK, "ok"),
        (&Method::GET, "/version") => json(
            StatusCode::OK,
            &serde_json::json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0"}),
        ),
        (&Method::GET, "/api") => json(
            StatusCode::OK,
            &serde_json::json!({"kind": "APIVersions", "versions": ["v1"]}),
        ),
        (&Method::GET, "/apis") => json(
            StatusCode::OK,
            &serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}),
        ),
        (&Method::POST, p) if p.ends_with("/selfsubjectreviews") => json(
            StatusCode::CREATED,
            &serde_json::json!({
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "SelfSubjectReview",
                "status": {"userInfo": {"username": HOSTILE_USERNAME}}
            }),
        ),
        (&Method::POST, p) if p.ends_with("/token") => token_request(state),
        (&Method::GET, _) if watch => silent_watch(),
        (&Method::GET, _) => json(
            StatusCode::OK,
            &serde_json::json!({
                "kind": "List",
                "apiVersion": "v1",
                "metadata": {"resourceVersion": "1"},
                "items": []
            }),
        ),
        _ => not_found(),
    }
}

fn token_request(state: &State) -> Response<Body> {
    let Some(token) = lock(&state.minted_token).clone() else {
        return not_found();
    };
    let expires = k8s_openapi::jiff::Timestamp::now()
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(3600))
        .unwrap_or(k8s_openapi::jiff::Timestamp::MAX);
    json(
        StatusCode::CREATED,
        &serde_json::json!({
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": [], "expirationSeconds": 3600},
            "status": {"token": token, "expirationTimestamp": expires.to_string()}
        }),
    )
}

/// A watch that stays open and says nothing, as a quiet apiserver's does; it ends when the
/// endpoint is dropped.
fn silent_watch() -> Response<Body> {
    let body = StreamBody::new(futures::stream::pending::<Result<Frame<Bytes>, Infallible>>());
    response(StatusCode::OK, "application/json", body.boxed())
}

fn not_found() -> Response<Body> {
    json(
        StatusCode::NOT_FOUND,
        &serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "NotFound", "code": 404
        }),
    )
}

fn json(status: StatusCode, value: &serde_json::Value) -> Response<Body> {
    response(
        status,
        "application/json",
        Full::new(Bytes::from(value.to_string())).boxed(),
    )
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    response(status, "text/plain", Full::new(Bytes::from(body)).boxed())
}

fn response(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    response
}

mod misbehaviour;
#[cfg(test)]
mod tests;
