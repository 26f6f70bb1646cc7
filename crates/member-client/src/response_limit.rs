//! Limits on what a member may send back, enforced on the bytes below kube.
//!
//! kube collects a whole response into memory before it parses it, and its watch decoder
//! buffers a line until it sees a newline, without a bound: a member (or an endpoint a
//! definition names) that streams a 2 GB `/readyz`, a list without end, or a watch event
//! without a newline would grow the collector until the kernel kills it, and every member with
//! it. Here every response body is counted as it arrives (`ResponseLimit`, in the
//! member's transport, under kube and above the connection pool):
//!
//! - `/readyz`, `/livez`, `/healthz` and `/version`: [`HEALTH_RESPONSE_BYTES`];
//! - a watch: no total (it streams for minutes), but no more than
//!   [`ResponseLimits::watch_line_bytes`] since the last newline, which is what kube buffers;
//! - every other response (a list page, a get, a create): [`ResponseLimits::response_bytes`];
//! - a paginated list: no more than [`ResponseLimits::list_pages`] `continue` requests in a
//!   row for one path, so a member that hands out `continue` tokens for ever cannot keep a list
//!   going.
//!
//! A response over its limit fails as [`LimitExceeded`], which [`FailureKind`](crate::FailureKind)
//! classifies as [`FailureKind::LimitExceeded`](crate::FailureKind::LimitExceeded).

use std::{
    collections::HashMap,
    fmt,
    pin::Pin,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tower::{BoxError, Service};

/// The most a health check's (`/readyz`, `/livez`, `/healthz`, `/version`) response may hold:
/// an apiserver answers these in a few hundred bytes, verbose `/readyz` in a few KiB.
pub const HEALTH_RESPONSE_BYTES: u64 = 64 * 1024;

/// The default [`ResponseLimits::response_bytes`]: 16 MiB, a list page of 100 objects of
/// 160 KiB each.
pub const DEFAULT_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// The default [`ResponseLimits::watch_line_bytes`]: 16 MiB, far above the 3 MB an apiserver
/// accepts as one object.
pub const DEFAULT_WATCH_LINE_BYTES: u64 = 16 * 1024 * 1024;

/// The default [`ResponseLimits::list_pages`].
pub const DEFAULT_LIST_PAGES: u32 = 2_010;

/// How much a member may send back: the whole body of a response that is not a watch, one
/// watch line, and the pages of one list. Every body is counted as it arrives, below kube,
/// which would otherwise buffer it whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Bytes in one response that is neither a health check nor a watch (a list page, say).
    pub response_bytes: u64,
    /// Bytes of a watch stream between two newlines (one event).
    pub watch_line_bytes: u64,
    /// `continue` requests in a row for one list.
    pub list_pages: u32,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        Self {
            response_bytes: DEFAULT_RESPONSE_BYTES,
            watch_line_bytes: DEFAULT_WATCH_LINE_BYTES,
            list_pages: DEFAULT_LIST_PAGES,
        }
    }
}

/// Which limit a response is held to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    /// `/readyz`, `/livez`, `/healthz`, `/version`.
    Health,
    /// A list page, a get, a create: anything but a health check or a watch.
    Other,
}

impl fmt::Display for RequestKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Health => "a health check (/readyz, /livez, /healthz, /version)",
            Self::Other => "a list page or other request",
        })
    }
}

/// A limit a member broke. Each names itself in a member's condition
/// ([`condition_reason`](Self::condition_reason)).
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::VariantNames, strum::IntoStaticStr,
)]
#[non_exhaustive]
pub enum LimitExceeded {
    /// A response body was larger than its limit.
    #[error("the response to {request} exceeded {limit} bytes")]
    ResponseTooLarge {
        /// Which kind of request it answered.
        request: RequestKind,
        /// The limit, in bytes.
        limit: u64,
    },
    /// A watch stream went on for longer than its limit without a newline.
    #[error("a watch event exceeded {limit} bytes (no newline)")]
    WatchLineTooLong {
        /// The limit, in bytes.
        limit: u64,
    },
    /// A response body that is not a watch did not arrive within its deadline.
    #[error("the response body did not arrive within {deadline:?}")]
    ResponseTooSlow {
        /// The deadline.
        deadline: Duration,
    },
    /// A list handed out more `continue` tokens in a row than its limit.
    #[error("a list went on for more than {limit} pages")]
    TooManyListPages {
        /// The limit, in pages.
        limit: u32,
    },
    /// A list or watch held more objects of one kind than its limit.
    #[error("more than {limit} objects of one kind")]
    TooManyObjects {
        /// The limit, in objects.
        limit: usize,
    },
}

impl LimitExceeded {
    /// Every [`condition_reason`](Self::condition_reason), one per variant: derived from the
    /// variants' names, so that a new variant is listed without anyone listing it.
    pub const CONDITION_REASONS: &'static [&'static str] = <Self as strum::VariantNames>::VARIANTS;

    /// The member condition's reason: the limit's name.
    pub fn condition_reason(&self) -> &'static str {
        self.into()
    }

    /// The limit `err` or one of its causes is, looking inside `io::Error`s too (kube wraps a
    /// watch body's error in one).
    pub fn find_in<'e>(err: &'e (dyn std::error::Error + 'static)) -> Option<&'e Self> {
        crate::error::causes(err).find_map(|cause| cause.downcast_ref::<Self>())
    }
}

/// Holds every response of a service to its [`ResponseLimits`].
#[derive(Clone, Debug)]
pub(crate) struct ResponseLimit<S> {
    inner: S,
    limits: ResponseLimits,
    /// `continue` requests in a row, by path. Its keys are the paths this client lists: the
    /// collector's choice, not the member's.
    pages: Arc<Mutex<HashMap<String, u32>>>,
}

/// How a request's response is counted.
#[derive(Clone, Copy, Debug)]
enum Budget {
    Total { request: RequestKind, limit: u64 },
    Lines { limit: u64 },
}

fn query_has(uri: &http::Uri, wanted: impl Fn(&str, &str) -> bool) -> bool {
    uri.query().is_some_and(|query| {
        query.split('&').any(|pair| {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            wanted(key, value)
        })
    })
}

fn is_watch(uri: &http::Uri) -> bool {
    query_has(uri, |key, value| {
        key == "watch" && matches!(value, "true" | "1")
    })
}

impl<S> ResponseLimit<S> {
    /// `inner`, each of its responses held to `limits`.
    pub(crate) fn new(inner: S, limits: ResponseLimits) -> Self {
        Self {
            inner,
            limits,
            pages: Arc::default(),
        }
    }

    fn budget(&self, uri: &http::Uri) -> Budget {
        if is_watch(uri) {
            return Budget::Lines {
                limit: self.limits.watch_line_bytes,
            };
        }
        let (request, limit) = match uri.path() {
            "/readyz" | "/livez" | "/healthz" | "/version" => {
                (RequestKind::Health, HEALTH_RESPONSE_BYTES)
            }
            _ => (RequestKind::Other, self.limits.response_bytes),
        };
        Budget::Total { request, limit }
    }

    /// Counts a list's pages: a `continue` request adds one for its path, a first page starts
    /// again. Whether the page is one too many.
    fn too_many_pages(&self, request: &http::Request<impl Sized>) -> bool {
        let uri = request.uri();
        if request.method() != http::Method::GET || is_watch(uri) {
            return false;
        }
        let continued = query_has(uri, |key, value| key == "continue" && !value.is_empty());
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        if continued {
            let count = pages.entry(uri.path().to_owned()).or_insert(0);
            *count = count.saturating_add(1);
            *count > self.limits.list_pages
        } else {
            // Most requests are not part of a paged list: no path to hash when none is counted.
            if !pages.is_empty() {
                pages.remove(uri.path());
            }
            false
        }
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for ResponseLimit<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = http::Response<LimitedBody<ResBody>>;
    type Error = BoxError;
    type Future = Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, BoxError>> + Send + 'static>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<ReqBody>) -> Self::Future {
        if self.too_many_pages(&request) {
            let limit = self.limits.list_pages;
            return Box::pin(async move {
                Err(Box::new(LimitExceeded::TooManyListPages { limit }) as BoxError)
            });
        }
        let budget = self.budget(request.uri());
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await.map_err(Into::into)?;
            Ok(response.map(|body| LimitedBody {
                inner: body,
                budget,
                counted: 0,
            }))
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that fails with [`LimitExceeded`] once it breaks its budget.
    #[derive(Debug)]
    pub(crate) struct LimitedBody<B> {
        #[pin]
        inner: B,
        budget: Budget,
        // Bytes so far (in all), or since the last newline (a watch).
        counted: u64,
    }
}

impl<B> Body for LimitedBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        let frame = match std::task::ready!(this.inner.poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(err)) => return Poll::Ready(Some(Err(err.into()))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref() {
            let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
            let broken = match *this.budget {
                Budget::Total { request, limit } => {
                    *this.counted = this.counted.saturating_add(len);
                    (*this.counted > limit)
                        .then_some(LimitExceeded::ResponseTooLarge { request, limit })
                }
                Budget::Lines { limit } => {
                    let first = data.iter().position(|&byte| byte == b'\n');
                    let last = data.iter().rposition(|&byte| byte == b'\n');
                    let offset = |at: usize| u64::try_from(at).unwrap_or(u64::MAX);
                    // The line this frame ends, then the one it leaves open.
                    let ended = first.map_or(0, |at| this.counted.saturating_add(offset(at)));
                    *this.counted = match last {
                        Some(at) => len.saturating_sub(offset(at)).saturating_sub(1),
                        None => this.counted.saturating_add(len),
                    };
                    (ended.max(*this.counted) > limit)
                        .then_some(LimitExceeded::WatchLineTooLong { limit })
                }
            };
            if let Some(broken) = broken {
                return Poll::Ready(Some(Err(Box::new(broken))));
            }
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
