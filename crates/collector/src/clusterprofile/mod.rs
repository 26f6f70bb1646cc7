//! Publishing members as SIG-Multicluster `ClusterProfile`s (`--publish-clusterprofiles`):
//! one profile per member, in one namespace of the control plane, for tools that read the
//! cluster inventory (KEP-4322).
//!
//! What a profile says is decided in [`profile`], from the member's definition ([`access`])
//! and its status; [`publisher`] queues and writes, through [`api`], and marks each member's
//! credential Secret for `tether-credential` ([`credential_marks`]); [`start`] wires it into
//! the collector and its leader election.
//!
//! ```text
//! Supervisor ──define / forget──► ProfilePublisher ──latest per member──► one writer task
//! MemberTask ──submit(status)───►                                          │ leader only
//!                                                                          ▼
//!                                     ClusterProfile (apply) + status (apply) / delete
//! ```

mod access;
mod api;
mod credential_marks;
mod profile;
mod publisher;
mod queue;
mod start;

pub(crate) use access::ProfileAccess;
pub(crate) use publisher::ProfilePublisher;
pub(crate) use start::start;

#[cfg(test)]
mod tests;
