//! A loopback HTTP server standing in for a member apiserver, and helpers that drive member
//! clients against it.
#![allow(dead_code, reason = "each test binary uses a different part")]

use std::{
    collections::HashSet,
    net::{Ipv4Addr, SocketAddr},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use member_client::test_util::{FakeSource, LoopbackServer, Reply, TestMember};
use tokio::{sync::Barrier, task::JoinHandle};

/// One request as the server received it.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub authorization: Option<String>,
    pub body: Bytes,
}

#[derive(Default)]
struct ServerState {
    accepted: Mutex<HashSet<String>>,
    seen: Mutex<Vec<Seen>>,
    hold_401s: Mutex<Option<Arc<Barrier>>>,
    delay: Mutex<Duration>,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

/// A loopback HTTP server that records the `Authorization` header of every request.
///
/// A request whose bearer token is not accepted gets 401 (a Kubernetes `Status`). With an
/// accepted token, a path ending in `/forbidden` gets 403, one ending in `/missing` gets 404, and
/// anything else gets 200 with the request body echoed back (or `{}`).
pub struct LoopbackApiserver {
    pub addr: SocketAddr,
    state: Arc<ServerState>,
    _server: LoopbackServer,
}

impl LoopbackApiserver {
    pub async fn start(accepted: &[&str]) -> Self {
        let state = Arc::new(ServerState::default());
        state.set_accepted(accepted);
        let shared = state.clone();
        let server = LoopbackServer::start(Ipv4Addr::LOCALHOST, None, move |req, _| {
            respond(shared.clone(), req)
        })
        .await
        .unwrap();
        Self {
            addr: server.addr(),
            state,
            _server: server,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// From now on only these tokens are accepted (a revocation, or a rotation).
    pub fn accept_only(&self, tokens: &[&str]) {
        self.state.set_accepted(tokens);
    }

    /// Holds every 401 response until `n` of them are waiting, so that `n` requests are
    /// certainly rejected with the same token before any of them can refresh it.
    pub fn hold_401s_until(&self, n: usize) {
        *self.state.hold_401s.lock().unwrap() = Some(Arc::new(Barrier::new(n)));
    }

    /// Answers every request `delay` after it arrives.
    pub fn delay_responses(&self, delay: Duration) {
        *self.state.delay.lock().unwrap() = delay;
    }

    /// The most requests that were being answered at once.
    pub fn most_in_flight(&self) -> usize {
        self.state.most_in_flight.load(Ordering::SeqCst)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// How many requests carried `Bearer <token>`.
    pub fn seen_with(&self, token: &str) -> usize {
        let want = format!("Bearer {token}");
        self.seen()
            .iter()
            .filter(|s| s.authorization.as_deref() == Some(want.as_str()))
            .count()
    }
}

impl ServerState {
    fn set_accepted(&self, tokens: &[&str]) {
        *self.accepted.lock().unwrap() = tokens.iter().map(|t| t.to_string()).collect();
    }
}

async fn respond(state: Arc<ServerState>, req: Request<Incoming>) -> Reply {
    let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    state.most_in_flight.fetch_max(now, Ordering::SeqCst);
    let delay = *state.delay.lock().unwrap();
    tokio::time::sleep(delay).await;
    let response = answer(&state, req).await;
    state.in_flight.fetch_sub(1, Ordering::SeqCst);
    response
}

async fn answer(state: &ServerState, req: Request<Incoming>) -> Reply {
    let (parts, body) = req.into_parts();
    let authorization = (parts.headers.get(http::header::AUTHORIZATION))
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let seen = Seen {
        method: parts.method,
        path: parts.uri.path().to_owned(),
        authorization,
        body: body
            .collect()
            .await
            .map(|b| b.to_bytes())
            .unwrap_or_default(),
    };
    state.seen.lock().unwrap().push(seen.clone());

    let token = seen
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "));
    let accepted = token.is_some_and(|t| state.accepted.lock().unwrap().contains(t));
    if !accepted {
        let barrier = state.hold_401s.lock().unwrap().clone();
        if let Some(barrier) = barrier {
            barrier.wait().await;
        }
        return status(StatusCode::UNAUTHORIZED, "Unauthorized");
    }
    if seen.path.ends_with("/forbidden") {
        return status(StatusCode::FORBIDDEN, "Forbidden");
    }
    if seen.path.ends_with("/missing") {
        return status(StatusCode::NOT_FOUND, "NotFound");
    }
    let echo = if seen.body.is_empty() {
        Bytes::from_static(b"{}")
    } else {
        seen.body
    };
    Response::new(Full::new(echo).boxed())
}

fn status(code: StatusCode, reason: &str) -> Reply {
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": reason, "reason": reason, "code": code.as_u16(),
    });
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *response.status_mut() = code;
    response
}

/// A loopback apiserver that accepts `token-a`, a source holding it, and a member client over
/// both.
pub async fn member_with_token_a() -> (LoopbackApiserver, Arc<FakeSource>, TestMember) {
    let server = LoopbackApiserver::start(&["token-a"]).await;
    let source = Arc::new(FakeSource::token("token-a"));
    let member = TestMember::new(&server.url(), &source);
    (server, source, member)
}

/// `n` GETs of `path` sent at once, each from a task of its own.
pub fn spawn_gets(
    member: &Arc<TestMember>,
    path: &'static str,
    n: usize,
) -> Vec<JoinHandle<Result<String, kube::Error>>> {
    (0..n)
        .map(|_| {
            let member = member.clone();
            tokio::spawn(async move { member.get(path).await })
        })
        .collect()
}

/// Waits for every one of `gets`, failing the test if one fails.
pub async fn all_succeed(gets: Vec<JoinHandle<Result<String, kube::Error>>>) {
    for get in gets {
        get.await.unwrap().unwrap();
    }
}

/// Polls `check` every 10 ms until it holds, failing the test after `limit`.
pub async fn wait_until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + limit;
    while !check() {
        let now = tokio::time::Instant::now();
        assert!(now < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
