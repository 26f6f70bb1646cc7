//! `collector check`: the doctor. It reads the members exactly as the collector would (the
//! same flags, the same registry, the same client stack), checks each once, and says per
//! member where its definition and credential come from, what the credential is (never the
//! token), who the member says it is, what it may list and watch, whether `/readyz` answers,
//! what TLS shows, the reason Tether would give, and what to do about it.
//!
//! [`run`] is the whole check and [`CheckArgs`] its flags.
//!
//! - `run`: start-up, the wait for the sources, and the concurrent member checks.
//! - `member`: one member's checks, judged into a reason.
//! - `credential`, `probe`, `tls`: what each check asks and how it is summarized.
//! - `report`, `table`, `remedy`: the findings, the exit-code rule, how they print, and what
//!   to do.

mod args;
pub(crate) mod credential;
mod member;
pub(crate) mod probe;
pub(crate) mod remedy;
mod report;
mod run;
mod table;
#[cfg(test)]
mod tests;
mod tls;

pub use args::{CheckArgs, Output};
pub use run::{CheckOutcome, run};
