//! [`Http2Connections`]: one client identity's HTTP/2 connections to a member. Each carries
//! as many concurrent streams (watches, lists, probes) as the member allows, which is its
//! `SETTINGS_MAX_CONCURRENT_STREAMS` (100 on a kube-apiserver), and another is dialled only
//! when every open one is full.
//!
//! hyper's pooled client shares one HTTP/2 connection per host and queues the streams past the
//! member's limit on it (hyperium/hyper#3623): a watch queued behind a hundred other watches
//! would wait with no deadline. client-go opens another connection instead (its transport's
//! `StrictMaxConcurrentStreams` is off), and so does this.

use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::{
        Arc, Mutex, MutexGuard, PoisonError,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::{Duration, Instant},
};

use bytes::Bytes;
use http::{Request, Response};
use http_body::{Frame, SizeHint};
use hyper::{body::Incoming, client::conn::http2};
use hyper_util::{
    client::legacy::connect::Connection,
    rt::{TokioExecutor, TokioTimer},
};
use kube::client::Body;
use tokio::sync::watch;
use tower::{BoxError, Service, ServiceExt as _};

/// How a member's HTTP/2 connections find a peer that went silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Http2Settings {
    /// A PING is sent once a connection has read nothing for this long.
    pub(crate) ping_interval: Duration,
    /// How long a PING may wait for its answer before the connection, and every stream on
    /// it, fails.
    pub(crate) ping_timeout: Duration,
}

impl Default for Http2Settings {
    /// client-go's `ReadIdleTimeout` (30 s) and `PingTimeout` (15 s): a member that went
    /// silent is found within 45 s, while its watches would still look open.
    fn default() -> Self {
        Self {
            ping_interval: Duration::from_secs(30),
            ping_timeout: Duration::from_secs(15),
        }
    }
}

/// How long a new connection may take to read the member's SETTINGS (the first frame it
/// sends), which say how many streams it allows, while requests wait for it rather than dial.
/// A thousand members starting at once on two cores took over a second now and then, and the
/// request that gave up dialled a second connection that stayed.
const SETTINGS_WAIT: Duration = Duration::from_secs(5);

/// The streams a connection carries until the member's SETTINGS say how many it allows: one,
/// so that no stream is ever queued past a limit not yet read. A member that never says keeps
/// it at one (RFC 9113 would allow any number; a kube-apiserver always says).
const STREAMS_BEFORE_SETTINGS: usize = 1;

/// What a request gets back once the member did not negotiate `h2` (by ALPN): the request,
/// unsent, and the connection the member answered on, for an HTTP/1.1 pool to use (to the
/// request that dialled it; the others dial no more).
pub(crate) struct Declined<T> {
    pub(crate) connection: Option<T>,
    pub(crate) request: Request<Body>,
}

/// A response body, holding the stream it arrives on as counted until it is dropped.
pub(crate) struct PoolBody {
    incoming: Incoming,
    _stream: Option<StreamSlot>,
}

impl PoolBody {
    /// A body that occupies no counted stream (HTTP/1.1).
    pub(crate) fn uncounted(incoming: Incoming) -> Self {
        Self {
            incoming,
            _stream: None,
        }
    }
}

impl fmt::Debug for PoolBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBody")
            .field("http2", &self._stream.is_some())
            .finish_non_exhaustive()
    }
}

impl http_body::Body for PoolBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.incoming).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.incoming.size_hint()
    }
}

/// One stream counted against its connection's limit, given back when dropped.
struct StreamSlot(Arc<Http2Connection>);

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.0.streams.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Http2Connection {
    send: http2::SendRequest<Body>,
    /// Set once the member sent GOAWAY: no new stream goes on it, though those open finish.
    going_away: AtomicBool,
    /// Requests sent on it whose response body is still held.
    streams: AtomicUsize,
    /// The member's `SETTINGS_MAX_CONCURRENT_STREAMS` as the connection last read it.
    max_streams: watch::Receiver<usize>,
    dialled_at: Instant,
}

impl Http2Connection {
    /// A stream on it, if it is open and below the member's limit.
    fn try_stream(self: &Arc<Self>) -> Option<StreamSlot> {
        let limit = *self.max_streams.borrow();
        self.streams
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < limit).then_some(n + 1)
            })
            .ok()
            .map(|_| StreamSlot(Arc::clone(self)))
    }
}

/// What a request finds among the open connections.
enum Found {
    Stream(StreamSlot),
    /// None free, but this one has not read the member's limit yet, for up to this long.
    Unsettled(watch::Receiver<usize>, Duration),
    Full,
}

/// The HTTP/2 connections of one client identity to one member, and how to dial another.
pub(crate) struct Http2Connections<C> {
    dial: C,
    handshake: http2::Builder<TokioExecutor>,
    /// The most a dial and handshake may take.
    dial_deadline: Duration,
    open: Mutex<Vec<Arc<Http2Connection>>>,
    /// Held while dialling, so that a burst of requests dials one connection, not one each.
    dialing: tokio::sync::Mutex<()>,
    /// Dials that failed so far, and the last one's error: a request that waited for a dial
    /// that failed fails with it, rather than dial again after it (and so wait one dial
    /// deadline per request ahead of it).
    failed_dials: AtomicUsize,
    last_dial_error: Mutex<Option<DialFailed>>,
    /// Set once the member answered a dial without `h2`.
    declined: AtomicBool,
}

impl<C> Http2Connections<C> {
    fn connections(&self) -> MutexGuard<'_, Vec<Arc<Http2Connection>>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the member answered a dial without `h2`: HTTP/1.1 only from then on.
    pub(crate) fn declined(&self) -> bool {
        self.declined.load(Ordering::Acquire)
    }
}

impl<C> fmt::Debug for Http2Connections<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http2Connections")
            .field("open", &self.connections().len())
            .finish_non_exhaustive()
    }
}

impl<C> Http2Connections<C>
where
    C: Service<http::Uri, Error: Into<BoxError>, Future: Send> + Clone + Send + Sync + 'static,
    C::Response: Connection + hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
{
    /// Connections dialled through `dial`, pinged as `settings` say; a dial (TCP, TLS, the
    /// HTTP/2 preface) may take `dial_deadline`.
    #[cfg_attr(
        not(feature = "__rustls"),
        expect(dead_code, reason = "kube's OpenSSL connector offers no ALPN")
    )]
    pub(crate) fn new(dial: C, settings: Http2Settings, dial_deadline: Duration) -> Self {
        let mut handshake = http2::Builder::new(TokioExecutor::new());
        handshake
            .timer(TokioTimer::new())
            .initial_max_send_streams(STREAMS_BEFORE_SETTINGS)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .keep_alive_interval(settings.ping_interval)
            .keep_alive_timeout(settings.ping_timeout)
            .keep_alive_while_idle(true);
        Self {
            dial,
            handshake,
            dial_deadline,
            open: Mutex::new(Vec::new()),
            dialing: tokio::sync::Mutex::new(()),
            failed_dials: AtomicUsize::new(0),
            last_dial_error: Mutex::new(None),
            declined: AtomicBool::new(false),
        }
    }

    /// Sends `request` over a connection with a free stream, dialling one if none has.
    ///
    /// # Errors
    /// The dial's, the handshake's or hyper's; `Ok(Err(declined))` when the member answered a
    /// dial without `h2`.
    pub(crate) async fn send(
        &self,
        mut request: Request<Body>,
    ) -> Result<Result<Response<PoolBody>, Declined<C::Response>>, BoxError> {
        let mut refusals = 0;
        loop {
            match self.find() {
                Found::Stream(slot) => {
                    let connection = Arc::clone(&slot.0);
                    let copy = (refusals < MAX_REFUSALS)
                        .then(|| crate::credential_layer::replayable(&request))
                        .flatten();
                    match (Self::send_on(slot, request).await, copy) {
                        (Err(err), Some(copy)) if refused_unprocessed(err.as_ref()) => {
                            connection.going_away.store(true, Ordering::Release);
                            (request, refusals) = (copy, refusals + 1);
                            continue;
                        }
                        (sent, _) => return Ok(Ok(sent?)),
                    }
                }
                Found::Unsettled(mut max_streams, patience) => {
                    let read = max_streams.wait_for(|max| *max != STREAMS_BEFORE_SETTINGS);
                    // Read or not, the next look finds a stream, or dials once it is too old.
                    let _ = tokio::time::timeout(patience, read).await;
                    continue;
                }
                Found::Full => {}
            }
            let failed_before = self.failed_dials.load(Ordering::Acquire);
            let dialing = self.dialing.lock().await;
            if self.declined() {
                let connection = None;
                return Ok(Err(Declined {
                    connection,
                    request,
                }));
            }
            if self.failed_dials.load(Ordering::Acquire) != failed_before {
                let ahead = self.last_dial_error.lock().map(|last| last.clone());
                if let Ok(Some(failed)) = ahead {
                    return Err(failed.into());
                }
            }
            if !matches!(self.find(), Found::Full) {
                continue;
            }
            let uri = request.uri().clone();
            let dialled = tokio::time::timeout(self.dial_deadline, self.dial(uri))
                .await
                .map_err(|_| BoxError::from(DialTimedOut(self.dial_deadline)))
                .and_then(|dialled| dialled);
            let dialled = dialled.map_err(|err| {
                let failed = DialFailed(Arc::from(err));
                *self
                    .last_dial_error
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(failed.clone());
                self.failed_dials.fetch_add(1, Ordering::AcqRel);
                failed
            })?;
            drop(dialing);
            match dialled {
                Dialled::Http2(slot) => return Ok(Ok(Self::send_on(slot, request).await?)),
                Dialled::Http1(connection) => {
                    self.declined.store(true, Ordering::Release);
                    let connection = Some(connection);
                    return Ok(Err(Declined {
                        connection,
                        request,
                    }));
                }
            }
        }
    }

    /// A free stream on an open connection; closed connections, and idle ones beside the
    /// first, are let go on the way.
    fn find(&self) -> Found {
        let mut open = self.connections();
        open.retain(|connection| {
            !connection.send.is_closed() && !connection.going_away.load(Ordering::Acquire)
        });
        let mut index = 0;
        open.retain(|connection| {
            index += 1;
            index == 1 || connection.streams.load(Ordering::Acquire) > 0
        });
        if let Some(slot) = open.iter().find_map(Http2Connection::try_stream) {
            return Found::Stream(slot);
        }
        let unsettled = open.iter().find_map(|connection| {
            let patience = SETTINGS_WAIT.checked_sub(connection.dialled_at.elapsed())?;
            let unread = *connection.max_streams.borrow() == STREAMS_BEFORE_SETTINGS;
            unread.then(|| Found::Unsettled(connection.max_streams.clone(), patience))
        });
        unsettled.unwrap_or(Found::Full)
    }

    /// A new connection to `uri`'s member, with a stream on it for the request that dialled it.
    async fn dial(&self, uri: http::Uri) -> Result<Dialled<C::Response>, BoxError> {
        let io = self.dial.clone().oneshot(uri).await.map_err(Into::into)?;
        if !io.connected().is_negotiated_h2() {
            return Ok(Dialled::Http1(io));
        }
        let (send, connection) = self.handshake.handshake(io).await?;
        let (publish, max_streams) = watch::channel(STREAMS_BEFORE_SETTINGS);
        tokio::spawn(async move {
            if let Err(err) = ReadingSettings::new(connection, publish).await {
                tracing::debug!(error = %err, "HTTP/2 connection to a member closed");
            }
        });
        let connection = Arc::new(Http2Connection {
            send,
            going_away: AtomicBool::new(false),
            streams: AtomicUsize::new(1),
            max_streams,
            dialled_at: Instant::now(),
        });
        self.connections().push(Arc::clone(&connection));
        Ok(Dialled::Http2(StreamSlot(connection)))
    }

    async fn send_on(
        slot: StreamSlot,
        request: Request<Body>,
    ) -> Result<Response<PoolBody>, BoxError> {
        let mut send = slot.0.send.clone();
        let sent = send.send_request(request).await;
        Ok(sent?.map(|incoming| PoolBody {
            incoming,
            _stream: Some(slot),
        }))
    }
}

/// Bytes a connection may receive that no stream has read yet: client-go's 1 GiB, so that a
/// few streams whose readers lag (each held to hyper's 2 MiB stream window) never stall the
/// others on the connection, as they could not over HTTP/1.1.
const CONNECTION_WINDOW: u32 = 1 << 30;

/// How often a new connection looks whether the member's SETTINGS have been read, while
/// requests wait for them.
const SETTINGS_RECHECK: Duration = Duration::from_millis(5);

pin_project_lite::pin_project! {
    /// Drives a connection, and publishes the member's stream limit whenever a poll finds it
    /// changed: hyper keeps it on the connection only. hyper reads frames on a task of its own,
    /// which does not wake this one, so until the member's SETTINGS have been read (for up to
    /// [`SETTINGS_WAIT`]) this looks again every [`SETTINGS_RECHECK`]; later changes are seen
    /// at the next request.
    struct ReadingSettings<F> {
        #[pin]
        connection: F,
        publish: watch::Sender<usize>,
        dialled_at: Instant,
        #[pin]
        recheck: tokio::time::Sleep,
    }
}

impl<F> ReadingSettings<F> {
    fn new(connection: F, publish: watch::Sender<usize>) -> Self {
        Self {
            connection,
            publish,
            dialled_at: Instant::now(),
            recheck: tokio::time::sleep(SETTINGS_RECHECK),
        }
    }
}

impl<T> Future for ReadingSettings<http2::Connection<T, Body, TokioExecutor>>
where
    T: hyper::rt::Read + hyper::rt::Write + Send + Unpin + 'static,
{
    type Output = hyper::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let polled = this.connection.as_mut().poll(cx);
        let max = this.connection.current_max_send_streams();
        this.publish.send_if_modified(|published| {
            let changed = *published != max;
            *published = max;
            changed
        });
        let unread = max == STREAMS_BEFORE_SETTINGS;
        if polled.is_pending() && unread && this.dialled_at.elapsed() < SETTINGS_WAIT {
            while this.recheck.as_mut().poll(cx).is_ready() {
                let next = tokio::time::Instant::now() + SETTINGS_RECHECK;
                this.recheck.as_mut().reset(next);
            }
        }
        polled
    }
}

enum Dialled<T> {
    Http2(StreamSlot),
    Http1(T),
}

/// How many times a request is sent again after the member refused it unprocessed. A
/// kube-apiserver answers one 401 per HTTP/2 connection and refuses the streams sent beside it,
/// so requests carrying a rejected credential get their 401s one connection at a time: this
/// bounds the in-flight requests of such a member that all get their answer.
const MAX_REFUSALS: u32 = 8;

/// Whether `err` says the request never reached the member: refused by a GOAWAY whose last
/// stream came before it (RFC 9113 §6.8), or dropped by hyper unsent as the connection closed.
/// A kube-apiserver sends GOAWAY after it answered a request with 401 over HTTP/2, so requests
/// sent beside that one meet this. Such a request is safe to send again, on another connection.
fn refused_unprocessed(err: &(dyn std::error::Error + 'static)) -> bool {
    crate::error::causes(err).any(|cause| {
        let refused = cause
            .downcast_ref::<h2::Error>()
            .is_some_and(|h2| h2.is_go_away() && h2.is_remote());
        refused
            || cause
                .downcast_ref::<hyper::Error>()
                .is_some_and(hyper::Error::is_canceled)
    })
}

/// A dial that failed, shared by the requests that waited for it; its source is the dial's
/// own error (a refused address, a TLS failure), whatever request meets it.
#[derive(Clone, Debug)]
struct DialFailed(Arc<dyn std::error::Error + Send + Sync>);

impl fmt::Display for DialFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("connecting to the member failed")
    }
}

impl std::error::Error for DialFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// A dial and handshake that outlasted their deadline.
#[derive(Debug, thiserror::Error)]
#[error("connecting to the member took longer than {0:?}")]
struct DialTimedOut(Duration);
