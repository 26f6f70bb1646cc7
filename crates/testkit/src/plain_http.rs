//! A plain-HTTP GET for local test servers (a collector's `/metrics`, `/readyz`, API): their
//! answers are small and the tests want the status and body as text, not a client library.

use std::net::SocketAddr;

use anyhow::{Context as _, Result};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpStream,
};

/// `GET path` over HTTP/1.0 to `addr`: the status code and the body.
///
/// HTTP/1.0 makes the server close the connection after the answer, so reading to the end is
/// reading exactly one response, with no chunked encoding to undo.
///
/// # Errors
/// Connection errors, a body that is not UTF-8, or a malformed status line.
pub async fn http_get(addr: SocketAddr, path: &str) -> Result<(u16, String)> {
    http_get_as(addr, path, None).await
}

/// [`http_get`] with `Authorization: Bearer <token>` when `token` is given.
pub async fn http_get_as(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String)> {
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let mut stream = TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n{authorization}\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let response = String::from_utf8(response)?;
    let (head, body) = response.split_once("\r\n\r\n").context("no header end")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .context("no status code")?
        .parse()?;
    Ok((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests: a panic is the failure report")]

    use super::*;

    #[tokio::test]
    async fn reads_status_and_body_of_one_response() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = vec![0; 1024];
            let n = stream.read(&mut request).await.unwrap();
            stream
                .write_all(
                    b"HTTP/1.0 503 Service Unavailable\r\nContent-Length: 8\r\n\r\nnot ok\r\n",
                )
                .await
                .unwrap();
            String::from_utf8(request[..n].to_vec()).unwrap()
        });
        let (status, body) = http_get(addr, "/readyz").await.unwrap();
        assert_eq!((status, body.as_str()), (503, "not ok\r\n"));
        assert!(
            server
                .await
                .unwrap()
                .starts_with("GET /readyz HTTP/1.0\r\n")
        );
    }
}
