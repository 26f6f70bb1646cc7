//! [`Misbehaviour`]: what a hostile member streams to exhaust a client, each stream bounded so
//! that the test still ends.

use std::convert::Infallible;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;

use super::{Body, json, response};

/// Something a hostile member sends to exhaust a client's memory or time, set with
/// [`HostileEndpoint::misbehave`](super::HostileEndpoint::misbehave). Each stream ends after its `bytes` (or pages, or ten
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

/// What `misbehaviour` answers to `GET path?query`, if it concerns that request.
pub(super) fn misbehave(
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
