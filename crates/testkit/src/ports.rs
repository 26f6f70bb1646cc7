//! Loopback ports: picking free ones and waiting for one to be released.

use std::collections::HashSet;
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::eventually::eventually;

/// Lowest port the harness hands out.
const LOWEST: u16 = 10_000;

/// Every port handed out in this process, so two environments never get the same one (a port
/// is released between picking and the server binding it).
///
/// NB: a process-wide set on purpose, against the "no global state" rule: the ports are a
/// process-wide resource and the environments of parallel tests know nothing of each other.
static HANDED_OUT: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// Reserves `n` distinct free ports on 127.0.0.1, never handed out before in this process.
///
/// NB: they are picked *below* the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`): outgoing connections take their local port from
/// that range, and one could otherwise grab a stopped apiserver's port before it restarts on
/// it. All listeners are held until every port is picked, then released for the servers.
pub(crate) fn free_ports(n: usize) -> Result<Vec<u16>> {
    let ephemeral_low = ephemeral_range_start().unwrap_or(32_768);
    if ephemeral_low <= LOWEST + 1_000 {
        bail!(
            "the ephemeral port range starts at {ephemeral_low}: no room below it for test servers"
        );
    }
    let span = u64::from(ephemeral_low - LOWEST);
    let random = RandomState::new();
    let mut handed_out = HANDED_OUT.lock().unwrap_or_else(PoisonError::into_inner);
    let handed_out = handed_out.get_or_insert_with(HashSet::new);
    let mut held = Vec::with_capacity(n);
    for attempt in 0u64.. {
        if held.len() == n {
            break;
        }
        if attempt == 10_000 {
            bail!(
                "found only {} of {n} free ports in {LOWEST}..{ephemeral_low}",
                held.len()
            );
        }
        let offset = u16::try_from(random.hash_one(attempt) % span)?;
        let port = LOWEST + offset;
        if handed_out.contains(&port) {
            continue;
        }
        if let Ok(listener) = TcpListener::bind((Ipv4Addr::LOCALHOST, port)) {
            handed_out.insert(port);
            held.push(listener);
        }
    }
    held.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// A free `127.0.0.1` address for a test server (a collector's HTTP listener), picked like the
/// apiservers' ports so that no outgoing connection takes it before the server binds it.
///
/// # Errors
/// No free port below the ephemeral range.
pub fn free_loopback_addr() -> Result<SocketAddr> {
    let port = free_ports(1)?
        .pop()
        .context("free_ports(1) returned no port")?;
    Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_range_start() -> Option<u16> {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    range.split_whitespace().next()?.parse().ok()
}

/// Whether nothing listens on `127.0.0.1:port`.
///
/// NB: std sets `SO_REUSEADDR`, so a port whose old connections sit in `TIME_WAIT` counts as free,
/// as it does for the apiserver (Go sets the same option).
pub(crate) fn port_is_free(port: u16) -> bool {
    TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok()
}

/// Waits (bounded) until nothing listens on `127.0.0.1:port`.
pub(crate) async fn wait_port_free(port: u16, timeout: Duration) -> Result<()> {
    let what = format!("nothing listens on 127.0.0.1:{port}");
    eventually(&what, timeout, || async move { port_is_free(port) }).await
}
