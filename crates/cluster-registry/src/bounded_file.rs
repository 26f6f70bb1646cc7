//! [`read`]: one file of the members directory, read as a hostile author could have laid it
//! out.
//!
//! Whoever writes a member file names the files it reads (`tokenFile`, `caFile`,
//! `clientCertFile`, `clientKeyFile`, `kubeconfig`). Read naively, `../../etc` or a symlink to
//! `/var/run/secrets/...` makes Tether read (and send) a token that is not the member's,
//! `/dev/zero` grows a buffer until the process is killed, and a FIFO blocks the poll forever.
//! So every file is opened through [`MembersDir`], which resolves it beneath the directory,
//! opens it without blocking, reads only regular files, and reads them through a size cap.

use std::path::Path;

use crate::members_dir::MembersDir;

/// The most a member file may hold.
pub(crate) const MEMBER_FILE_CAP: u64 = 64 * 1024;
/// The most a token file may hold (also the token cap of every source).
pub(crate) const TOKEN_FILE_CAP: u64 = member_client::Credential::MAX_TOKEN_BYTES as u64;
/// The most a CA file may hold.
pub(crate) const CA_FILE_CAP: u64 = 1024 * 1024;

/// Why a file was not read.
#[derive(Debug)]
pub(crate) enum FileError {
    /// It does not exist (or a path component does not).
    NotFound,
    /// It may not or cannot be read; the `String` says why, in words that quote only the path.
    Refused(String),
}

/// Reads `path` (relative to `dir`, or a path inside it) if it resolves beneath `dir`, is a
/// regular file, and holds at most `cap` bytes.
pub(crate) fn read(dir: &Path, path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let relative = path.strip_prefix(dir).unwrap_or(path);
    MembersDir::open(dir)?.read(relative, cap)
}
