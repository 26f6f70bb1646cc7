//! [`HostileEndpoint`]: a loopback HTTPS server that plays a member apiserver on an address a
//! hostile definition chose, and records every `Authorization` header it is sent.
//!
//! An attack test points a definition at it (let in with `--allow-endpoint`, see
//! [`allow_endpoint_arg`](HostileEndpoint::allow_endpoint_arg)) and then asks what reached it:
//! a credential that must never leave its own member shows up in
//! [`authorizations`](HostileEndpoint::authorizations). It answers enough of the API for a
//! client to believe it: `/readyz`, `/livez`, `/healthz`, `/version`, discovery, a
//! SelfSubjectReview, empty lists, watches that stay open and silent, and a TokenRequest whose
//! token the test chooses ([`set_minted_token`](HostileEndpoint::set_minted_token)).
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
    net::{Ipv4Addr, SocketAddr},
    sync::{Arc, Mutex, PoisonError},
};

use anyhow::{Context as _, Result, ensure};
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use rustls::{
    ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
};
use tokio::{net::TcpListener, task::JoinSet};

use crate::pki::TestCa;

/// The most `Authorization` headers kept; a client that loops cannot grow the test's memory.
const MAX_RECORDED: usize = 100_000;

/// The username the endpoint's SelfSubjectReview answers with.
pub const HOSTILE_USERNAME: &str = "system:serviceaccount:hostile:hostile";

/// The running server; stops, connections and all, when dropped.
pub struct HostileEndpoint {
    addr: SocketAddr,
    ca_pem: String,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for HostileEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostileEndpoint")
            .field("addr", &self.addr)
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

/// Something a hostile member sends to exhaust a client's memory or time, set with
/// [`HostileEndpoint::misbehave`]. Each stream ends after its `bytes` (or pages, or ten
/// minutes), so that a client without limits is hurt but the test still ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misbehaviour {
    /// `/readyz` answers 200 with `bytes` of `o`.
    HugeReadyz {
        /// How much it streams.
        bytes: u64,
    },
    /// Every list ignores `limit` and streams `bytes` of items (`{"metadata":{"name":…}}`).
    EndlessList {
        /// How much it streams before it closes the list.
        bytes: u64,
    },
    /// Every list page holds `items` objects (new names each page) and a `continue` token,
    /// for `pages` pages.
    EndlessContinue {
        /// Objects per page.
        items: usize,
        /// Pages before the last.
        pages: u32,
    },
    /// Every list is empty; every watch streams `bytes` of one event without a newline.
    WatchWithoutNewline {
        /// How much it streams.
        bytes: u64,
    },
    /// `/version` sends its headers and then one space a second, for ten minutes.
    TricklingVersion,
}

/// Bytes per frame of a streamed body.
const CHUNK: usize = 64 * 1024;

impl Drop for HostileEndpoint {
    fn drop(&mut self) {
        self.accept.abort();
    }
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
        let ca = TestCa::generate("hostile-endpoint-ca")?;
        let serving = ca.issue_serving_cert_for("hostile-endpoint", &[&ip.to_string()])?;
        let chain = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("parsing the serving certificate")?;
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())
            .context("parsing the serving key")?;
        let config =
            ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .context("TLS versions")?
                .with_no_client_auth()
                .with_single_cert(chain, key)
                .context("serving certificate")?;
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind(SocketAddr::from((ip, 0)))
            .await
            .with_context(|| format!("binding {ip}"))?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let shared = Arc::clone(&state);
        let accept = tokio::spawn(async move {
            // Owned here, so that aborting this task closes every connection.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, state) = (acceptor.clone(), Arc::clone(&shared));
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let serve = hyper::service::service_fn(move |request| {
                        let state = Arc::clone(&state);
                        async move { Ok::<_, Infallible>(respond(&state, &request)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), serve)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            ca_pem: ca.pem(),
            state,
            accept,
        })
    }

    /// `https://<ip>:<port>`: the endpoint a hostile definition names.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA (PEM) that signed the endpoint's certificate: the one its definition supplies.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The `--allow-endpoint` value that lets exactly this endpoint's address in.
    pub fn allow_endpoint_arg(&self) -> String {
        format!("{}/32", self.addr.ip())
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

/// What `misbehaviour` answers to `GET path?query`, if it concerns that request.
fn misbehave(
    misbehaviour: Misbehaviour,
    path: &str,
    query: Option<&str>,
    watch: bool,
) -> Option<Response<Body>> {
    let list = !watch && (path.starts_with("/api/v1/") || path.starts_with("/apis/"));
    match misbehaviour {
        Misbehaviour::HugeReadyz { bytes } if path == "/readyz" => Some(streamed(
            "text/plain",
            Bytes::new(),
            Bytes::from(vec![b'o'; CHUNK]),
            bytes,
            Bytes::new(),
        )),
        Misbehaviour::EndlessList { bytes } if list => {
            let item = r#"{"metadata":{"name":"n","resourceVersion":"1"}},"#;
            let items = item.repeat(CHUNK / item.len());
            Some(streamed(
                "application/json",
                Bytes::from_static(
                    br#"{"kind":"List","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":["#,
                ),
                Bytes::from(items),
                bytes,
                Bytes::from_static(br#"{"metadata":{"name":"last"}}]}"#),
            ))
        }
        Misbehaviour::EndlessContinue { items, pages } if list => {
            let page: u32 = query
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("continue=p")))
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let objects: Vec<_> = (0..items)
                .map(|i| {
                    serde_json::json!({"metadata": {
                        "name": format!("p{page}-{i}"), "namespace": "hostile",
                        "resourceVersion": "1"
                    }})
                })
                .collect();
            let next = (page < pages).then(|| format!("p{}", page + 1));
            Some(json(
                StatusCode::OK,
                &serde_json::json!({
                    "kind": "List",
                    "apiVersion": "v1",
                    "metadata": {"resourceVersion": "1", "continue": next},
                    "items": objects
                }),
            ))
        }
        Misbehaviour::WatchWithoutNewline { bytes } if watch => Some(streamed(
            "application/json",
            Bytes::from_static(br#"{"type":"ADDED","object":{"metadata":{"name":""#),
            Bytes::from(vec![b'a'; CHUNK]),
            bytes,
            Bytes::new(),
        )),
        Misbehaviour::TricklingVersion if path == "/version" => {
            let spaces = futures::stream::unfold(0_u32, |sent| async move {
                if sent >= 600 {
                    return None;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                Some((Ok(Frame::data(Bytes::from_static(b" "))), sent + 1))
            });
            Some(response(
                StatusCode::OK,
                "application/json",
                StreamBody::new(spaces).boxed(),
            ))
        }
        _ => None,
    }
}

/// `head`, then `chunk` repeated until `bytes` are sent, then `tail`.
fn streamed(
    content_type: &'static str,
    head: Bytes,
    chunk: Bytes,
    bytes: u64,
    tail: Bytes,
) -> Response<Body> {
    use futures::StreamExt as _;
    let len = u64::try_from(chunk.len()).unwrap_or(u64::MAX).max(1);
    let repeats = bytes.div_ceil(len);
    let middle = futures::stream::iter((0..repeats).map(move |_| chunk.clone()));
    let frames = futures::stream::once(std::future::ready(head))
        .chain(middle)
        .chain(futures::stream::once(std::future::ready(tail)))
        .filter(|bytes| std::future::ready(!bytes.is_empty()))
        .map(|bytes| Ok::<_, Infallible>(Frame::data(bytes)));
    response(
        StatusCode::OK,
        content_type,
        http_body_util::BodyExt::boxed(StreamBody::new(frames)),
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    async fn client(endpoint: &HostileEndpoint, token: &str) -> kube::Client {
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": "c", "cluster": {
                "server": endpoint.url(),
                "certificate-authority-data": base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD, endpoint.ca_pem()),
            }}],
            "users": [{"name": "u", "user": {"token": token}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        });
        let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(kubeconfig).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    }

    #[tokio::test]
    async fn it_records_the_bearer_a_client_sends_and_answers_like_an_apiserver() {
        let endpoint = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 2))
            .await
            .unwrap();
        let client = client(&endpoint, "stolen").await;
        let version = client.apiserver_version().await.unwrap();
        assert_eq!(version.minor, "36");
        let namespaces = kube::Api::<k8s_openapi::api::core::v1::Namespace>::all(client)
            .list(&Default::default())
            .await
            .unwrap();
        assert!(namespaces.items.is_empty());
        assert!(endpoint.saw_bearer("stolen"));
        assert!(!endpoint.saw_bearer("other"));
        assert_eq!(endpoint.requests(), 2, "{:?}", endpoint.request_lines());
        assert_eq!(endpoint.allow_endpoint_arg(), "127.0.0.2/32");
    }

    #[tokio::test]
    async fn it_answers_a_token_request_with_the_token_the_test_chose() {
        let endpoint = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 3))
            .await
            .unwrap();
        let client = client(&endpoint, "current").await;
        let accounts =
            kube::Api::<k8s_openapi::api::core::v1::ServiceAccount>::namespaced(client, "ns");
        let request = k8s_openapi::api::authentication::v1::TokenRequest::default();
        assert!(
            accounts
                .create_token_request("sa", &Default::default(), &request)
                .await
                .is_err(),
            "no token chosen yet: 404"
        );
        endpoint.set_minted_token("made-up");
        let answer = accounts
            .create_token_request("sa", &Default::default(), &request)
            .await
            .unwrap();
        assert_eq!(answer.status.unwrap().token.as_deref(), Some("made-up"));
    }

    #[tokio::test]
    async fn it_misbehaves_only_when_told_and_within_its_bounds() {
        let endpoint = HostileEndpoint::start(Ipv4Addr::new(127, 0, 0, 4))
            .await
            .unwrap();
        let client = client(&endpoint, "t").await;
        let readyz = || http::Request::get("/readyz").body(Vec::new()).unwrap();
        assert_eq!(client.request_text(readyz()).await.unwrap(), "ok");
        endpoint.misbehave(Misbehaviour::HugeReadyz { bytes: 1 << 20 });
        assert_eq!(client.request_text(readyz()).await.unwrap().len(), 1 << 20);

        endpoint.misbehave(Misbehaviour::EndlessContinue { items: 3, pages: 2 });
        let maps = kube::Api::<k8s_openapi::api::core::v1::ConfigMap>::all(client);
        let mut params = kube::api::ListParams::default().limit(1);
        let mut pages = Vec::new();
        loop {
            let page = maps.list(&params).await.unwrap();
            pages.push(page.items.len());
            match page.metadata.continue_ {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
            assert!(pages.len() < 10, "the pages never end");
        }
        assert_eq!(pages, [3, 3, 3], "limit ignored, two continue tokens");
    }

    #[tokio::test]
    async fn it_refuses_to_listen_anywhere_but_loopback_beside_the_apiservers() {
        assert!(HostileEndpoint::start(Ipv4Addr::LOCALHOST).await.is_err());
        assert!(
            HostileEndpoint::start(Ipv4Addr::new(10, 0, 0, 1))
                .await
                .is_err()
        );
    }
}
