//! The collector: long-lived informers on every member cluster that survive credential
//! rotation, status written back to the control plane, and `/metrics`, `/healthz`, `/readyz`.
//!
//! [`app::run`] is the whole program; `collector --help` lists its flags ([`cli::Args`]).
//! Per member, [`supervisor::Supervisor`] runs a [`member_task::MemberTask`]: watches
//! ([`informers`]) mirrored into [`mirror::Mirror`], a `/readyz` probe classified into
//! [`member_health::MemberHealth`], and status written by [`status_writer::StatusWriter`].

pub mod app;
pub mod cli;
pub mod http;
pub mod informers;
pub mod member_health;
pub mod member_status;
pub mod member_task;
pub mod metrics;
pub mod mirror;
pub mod mirrored_resource;
pub mod readiness;
pub mod source_readiness;
pub mod status_writer;
pub mod supervisor;
