//! A loopback HTTPS server for the transport tests that answers each request with the common
//! name of the client certificate its connection presented (`anonymous` for none).
//!
//! Paths: `/stream` streams one line per [`MtlsServer::tick`] and never ends; `/hold` answers
//! only after the next tick; `/flaky` answers 503 the first time; `/close` closes the
//! connection after answering. Every response says in `x-resumed` whether its connection
//! resumed a TLS session.

use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt as _, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::{
    HandshakeKind, RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _},
    server::WebPkiClientVerifier,
};
use tokio::{net::TcpListener, sync::broadcast, task::JoinSet};
use x509_parser::{certificate::X509Certificate, prelude::FromDer as _};

use crate::ClientIdentity;

/// A test CA that issues the server's certificate and the clients' identities.
pub(crate) struct TestPki {
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl TestPki {
    pub(crate) fn new() -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "test-ca");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        Self {
            ca: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    /// The CA certificate, PEM.
    pub(crate) fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// The CA certificate, DER (what `kube::Config::root_cert` holds).
    pub(crate) fn ca_der(&self) -> Vec<u8> {
        self.ca.der().to_vec()
    }

    /// A client certificate for `cn`, signed by the CA, and its key: PEM.
    pub(crate) fn identity_pem(&self, cn: &str) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// A client identity for `cn`, signed by the CA.
    pub(crate) fn identity(&self, cn: &str) -> ClientIdentity {
        let (chain, key) = self.identity_pem(cn);
        ClientIdentity::from_pem(chain.as_bytes(), key.as_bytes()).unwrap()
    }

    fn serving(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, "server");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap();
        (vec![cert.der().clone()], key)
    }
}

/// Whether the server refuses connections that present no client certificate.
#[derive(Clone, Copy)]
pub(crate) enum ClientAuth {
    Required,
    Optional,
}

/// The running server; stops (connections and all) when dropped.
pub(crate) struct MtlsServer {
    pub(crate) addr: SocketAddr,
    state: Arc<State>,
    accept: tokio::task::JoinHandle<()>,
}

struct State {
    ticks: broadcast::Sender<()>,
    accepted: AtomicUsize,
    open: AtomicUsize,
    holding: AtomicUsize,
    flaked: AtomicBool,
}

impl Drop for MtlsServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl MtlsServer {
    pub(crate) async fn start(pki: &TestPki, auth: ClientAuth) -> Self {
        let mut roots = RootCertStore::empty();
        roots.add(CertificateDer::from(pki.ca_der())).unwrap();
        let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
        let verifier = match auth {
            ClientAuth::Required => verifier.build().unwrap(),
            ClientAuth::Optional => verifier.allow_unauthenticated().build().unwrap(),
        };
        let (chain, key) = pki.serving();
        let config = ServerConfig::builder()
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            ticks: broadcast::channel(16).0,
            accepted: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            holding: AtomicUsize::new(0),
            flaked: AtomicBool::new(false),
        });
        let shared = Arc::clone(&state);
        let accept = tokio::spawn(async move {
            // Owned here, so that aborting this task closes every connection.
            let mut connections = JoinSet::new();
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, state) = (acceptor.clone(), Arc::clone(&shared));
                connections.spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return; // no (acceptable) client certificate
                    };
                    state.accepted.fetch_add(1, Ordering::SeqCst);
                    state.open.fetch_add(1, Ordering::SeqCst);
                    let (_, conn) = tls.get_ref();
                    let peer = Peer {
                        cn: conn
                            .peer_certificates()
                            .and_then(|chain| chain.first())
                            .map_or_else(|| "anonymous".to_owned(), common_name),
                        resumed: conn.handshake_kind() == Some(HandshakeKind::Resumed),
                    };
                    let serving = Arc::clone(&state);
                    let serve = hyper::service::service_fn(move |request| {
                        let (state, peer) = (Arc::clone(&serving), peer.clone());
                        async move { Ok::<_, Infallible>(respond(&state, &peer, request).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), serve)
                        .await;
                    state.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            addr,
            state,
            accept,
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// One more line on every open `/stream`; answers every waiting `/hold`.
    pub(crate) fn tick(&self) {
        let _ = self.state.ticks.send(());
    }

    /// Connections whose handshake succeeded, so far.
    pub(crate) fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// Waits (up to 5 s) until `n` requests to `/hold` have arrived.
    pub(crate) async fn wait_holding(&self, n: usize) {
        for _ in 0..500 {
            if self.state.holding.load(Ordering::SeqCst) >= n {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("{n} requests to /hold never arrived");
    }

    /// Waits (up to 5 s) until at most `max` connections are open; the number open then.
    pub(crate) async fn wait_open_at_most(&self, max: usize) -> usize {
        for _ in 0..500 {
            let open = self.state.open.load(Ordering::SeqCst);
            if open <= max {
                return open;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.state.open.load(Ordering::SeqCst)
    }
}

/// What one connection's handshake established.
#[derive(Clone)]
struct Peer {
    cn: String,
    resumed: bool,
}

fn common_name(cert: &CertificateDer<'_>) -> String {
    let (_, cert) = X509Certificate::from_der(cert).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap();
    cn.as_str().unwrap().to_owned()
}

type Reply = Response<BoxBody<Bytes, Infallible>>;

async fn respond(state: &State, peer: &Peer, request: Request<Incoming>) -> Reply {
    let line = Bytes::from(format!("{}\n", peer.cn));
    let body = match request.uri().path() {
        "/stream" => {
            let ticks = state.ticks.subscribe();
            let lines = futures::stream::unfold((ticks, true), move |(mut ticks, first)| {
                let line = line.clone();
                async move {
                    if !first {
                        ticks.recv().await.ok()?;
                    }
                    Some((Ok(Frame::data(line)), (ticks, false)))
                }
            });
            StreamBody::new(lines).boxed()
        }
        "/hold" => {
            // No response headers until the next tick: the request stays in flight.
            let mut ticks = state.ticks.subscribe();
            state.holding.fetch_add(1, Ordering::SeqCst);
            let _ = ticks.recv().await;
            Full::new(line).boxed()
        }
        "/flaky" if !state.flaked.swap(true, Ordering::SeqCst) => {
            let mut response = Response::new(Full::new(Bytes::new()).boxed());
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            return response;
        }
        _ => Full::new(line).boxed(),
    };
    let mut response = Response::new(body);
    response.headers_mut().insert(
        "x-resumed",
        http::HeaderValue::from_static(if peer.resumed { "true" } else { "false" }),
    );
    if request.uri().path() == "/close" {
        response.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    response
}
