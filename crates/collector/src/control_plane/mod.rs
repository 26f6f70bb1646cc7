//! The collector's side of the control plane: its own client and the guard on that client's
//! credential, and the leader election that decides which replica writes.

mod client;
mod guard;
mod leader;

pub(crate) use client::{ControlPlane, self_probe};
pub(crate) use guard::SelfCredentialGuard;
pub(crate) use leader::{Lease, Startup};
