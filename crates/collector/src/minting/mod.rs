//! Token minting: Tether mints each opted-in member's tokens with the TokenRequest API on the
//! member, checks each new one with a SelfSubjectReview, and writes it back where the member's
//! credential lives ([`TokenHome`](cluster_registry::minting::TokenHome)), so that
//! Karmada, Argo CD and anything else reading that Secret get it too.
//!
//! ```text
//!  TokenChain (one per opted-in member, in its task)
//!    read the home ──► schedule::next ──► wait │ mint: TokenRequest ─► SelfSubjectReview ─► write (resourceVersion)
//!        ▲                                                                                     │
//!        └──────── the registry sees the new token, the member's clients use it ◄──────────────┘
//! ```
//!
//! - **When**: at [`--mint-at-fraction`](MintArgs::mint_at_fraction) of the current
//!   token's lifetime as granted (`iat`/`nbf` to `exp`), at once for a new
//!   `tether.io/mint-now` value or a token without `exp`. Decided from the home as read,
//!   never from memory, so any replica decides the same.
//! - **Who**: the leader only. A replica that just became leader waits out the longest mint
//!   first ([`Minter::handover_grace`]), so a mint its predecessor started is written
//!   (or abandoned) before it looks. The write carries the `resourceVersion` it read, so a
//!   replica that lost the race overwrites nothing.
//! - **For whom**: the operator decides ([`MintArgs`]): `--mint-tokens` for every member
//!   whose definition names a ServiceAccount, `--mint-tokens-for` for named ones. A
//!   definition can only opt out; asking for more than `--mint-max-expiration` or an
//!   audience `--mint-audience` does not list is refused ([`policy`]).
//! - **As whom**: only the ServiceAccount the current token already is (its `sub`), and a
//!   minted token is written only if its `sub` and `iss` are the current token's
//!   ([`identity`]); a `tether.io/mint-now` is heeded at most once per
//!   `--mint-retry-seconds`.
//! - **Broken chains** are loud: `CredentialsValid=False` with `TokenExpired`,
//!   `RotationFailed` or the refusal's reason, an Event on the Secret, and `tether_token_mints_total`.

mod args;
mod chain;
mod identity;
mod mint;
mod policy;
mod schedule;
mod start;
mod state;

use std::time::Duration;

use kube::Client;
use member_client::validation::EndpointPolicy;
use tokio::sync::watch;

#[cfg(test)]
pub(crate) use args::FORMER_VARIABLES;
pub use args::MintArgs;
pub(crate) use chain::TokenChain;
pub(crate) use policy::{Permit, permit};
pub(crate) use start::minter;
pub(crate) use state::MintState;
#[cfg(test)]
pub(crate) use state::RefusalKind;

use crate::metrics::Metrics;

/// What every member's token chain shares: the control plane the homes live in, this
/// replica's identity and leadership, and the flags.
#[derive(Clone)]
pub(crate) struct Minter {
    /// The control plane (`None` with member files only).
    pub(crate) control_plane: Option<Client>,
    /// This replica, as Events name it.
    pub(crate) identity: String,
    /// The leader-election Lease's verdict (`None`: no election, this replica always mints
    /// tokens that live in the control plane).
    pub(crate) leader: Option<watch::Receiver<bool>>,
    /// Why this replica may mint no token that lives in the control plane: it runs with
    /// leader election but joined none, so it cannot know it is the only one minting.
    pub(crate) refusal: Option<String>,
    /// The flags.
    pub(crate) args: MintArgs,
    /// Where verifying clients may connect (the members' own policy).
    pub(crate) policy: EndpointPolicy,
    /// How long each request of a mint may take.
    pub(crate) request_timeout: Duration,
    /// Counters.
    pub(crate) metrics: Metrics,
}

impl Minter {
    /// How long a new leader waits before its first mint: a TokenRequest, a
    /// SelfSubjectReview and a write, each to its deadline, and a second to spare.
    pub(crate) fn handover_grace(&self) -> Duration {
        self.request_timeout * 3 + Duration::from_secs(1)
    }
}
