//! Everything per member: the supervisor that starts one task per member, and what a task
//! runs — informers, a probe classified into a health, a status, the status writer.

pub(crate) mod confirmation;
pub(crate) mod health;
pub(crate) mod informer_state;
pub(crate) mod informers;
pub(crate) mod leadership;
pub(crate) mod status;
pub(crate) mod status_fence;
pub(crate) mod status_writer;
pub(crate) mod supervisor;
pub(crate) mod task;
