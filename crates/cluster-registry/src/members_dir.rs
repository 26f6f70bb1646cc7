//! [`MembersDir`]: the one way a file under `--members-dir` is opened, read or replaced.
//!
//! Whoever writes a member file names the files Tether reads and, with `rotation:`, the token
//! file it writes. Every such path is resolved by the kernel, relative to a descriptor of the
//! directory, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: no absolute path, no
//! `..`, no symlink (absolute, or relative and climbing out) and no `/proc` magic link can
//! take the lookup out of the directory, and nothing can swap a checked path for another
//! between a check and the open, because there is no separate check. Symlinks that stay
//! beneath the directory (the kubelet's `..data` layout of a ConfigMap or Secret volume) are
//! followed.
//!
//! A file is read only if it is a regular file: it is opened with `O_NONBLOCK`, so a FIFO
//! does not block the poll, and `fstat`ed before a byte is read, so a device is refused
//! unread. A file is replaced by writing a new file with a random name (`O_EXCL`, mode
//! `0600`) beside it and renaming it over the old one: the rename replaces the directory
//! entry, never what a symlink there points to.
//!
//! `openat2` needs Linux 5.6. Without it the directory is not read at all (fail closed): a
//! check-then-open fallback is exactly the race this module exists to remove.

use std::{
    fmt::Write as _,
    io::{self, Read as _, Write as _},
    os::fd::OwnedFd,
    path::{Component, Path},
};

use rustix::{
    fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags},
    io::Errno,
    rand::GetRandomFlags,
};

use crate::bounded_file::FileError;

/// How often an open that raced a rename or mount (`EAGAIN`) is tried again.
const RACE_RETRIES: usize = 3;

/// A members directory, held open: every path below is resolved from this descriptor.
#[derive(Debug)]
pub(crate) struct MembersDir {
    fd: OwnedFd,
}

impl MembersDir {
    /// Opens the directory itself. Its path is the operator's, so symlinks in it are followed.
    pub(crate) fn open(dir: &Path) -> Result<Self, FileError> {
        let fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|err| {
            refused(&format!(
                "members directory unreadable ({})",
                io::Error::from(err)
            ))
        })?;
        Ok(Self { fd })
    }

    /// Reads `relative` if it resolves beneath the directory, is a regular file and holds at
    /// most `cap` bytes.
    pub(crate) fn read(&self, relative: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
        let fd = self.open_beneath(
            relative,
            OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
            Mode::empty(),
        )?;
        let stat =
            rustix::fs::fstat(&fd).map_err(|err| refused(&io::Error::from(err).to_string()))?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
            return Err(refused("is not a regular file"));
        }
        if u64::try_from(stat.st_size).unwrap_or(u64::MAX) > cap {
            return Err(too_large(cap));
        }
        let mut bytes = Vec::new();
        std::fs::File::from(fd)
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|err| refused(&format!("unreadable ({err})")))?;
        // It may have grown since the fstat.
        if bytes.len() as u64 > cap {
            return Err(too_large(cap));
        }
        Ok(bytes)
    }

    /// Replaces the file `name` (a plain file name, directly in the directory) with
    /// `content`, atomically: readers see the old content or the new. Nothing is left behind
    /// when it fails.
    pub(crate) fn replace(&self, name: &Path, content: &[u8]) -> Result<(), FileError> {
        let mut components = name.components();
        let (Some(Component::Normal(file_name)), None) = (components.next(), components.next())
        else {
            return Err(refused(
                "is not a plain file name directly in the members directory",
            ));
        };
        let temporary = temporary_name(&file_name.to_string_lossy())?;
        let fd = self.open_beneath(
            Path::new(&temporary),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOCTTY,
            Mode::RUSR | Mode::WUSR,
        )?;
        let written = write_and_sync(fd, content).and_then(|()| {
            rustix::fs::renameat(&self.fd, &temporary, &self.fd, file_name).map_err(io::Error::from)
        });
        if let Err(err) = written {
            // Best effort: its name is random and hidden, and it holds at most one token.
            let _ = rustix::fs::unlinkat(&self.fd, &temporary, AtFlags::empty());
            return Err(refused(&format!("not written ({err})")));
        }
        // The rename is done; syncing the directory only makes it survive a crash, and a
        // crash before it leaves the old token, which is still valid, in place.
        let _ = rustix::fs::fsync(&self.fd);
        Ok(())
    }

    /// The opener: `relative` resolved by the kernel strictly beneath the directory.
    fn open_beneath(
        &self,
        relative: &Path,
        flags: OFlags,
        mode: Mode,
    ) -> Result<OwnedFd, FileError> {
        if relative.is_absolute() {
            return Err(refused(
                "is an absolute path outside the members directory; name it relative to the \
                 directory",
            ));
        }
        if relative.components().any(|c| c == Component::ParentDir) {
            return Err(refused("climbs out with '..'"));
        }
        let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS;
        let mut tries = 0;
        let err = loop {
            match rustix::fs::openat2(&self.fd, relative, flags | OFlags::CLOEXEC, mode, resolve) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN) if tries < RACE_RETRIES => tries += 1,
                Err(err) => break err,
            }
        };
        Err(match err {
            Errno::NOENT => FileError::NotFound,
            Errno::XDEV => refused(
                "is a symlink that leads out of the members directory (or an absolute symlink)",
            ),
            Errno::LOOP => refused("has too many (or magic) symlinks"),
            Errno::NOSYS => refused(
                "cannot be opened safely: the kernel lacks openat2 (Linux 5.6 or later is \
                 needed to read the members directory)",
            ),
            err => refused(&format!("unreadable ({})", io::Error::from(err))),
        })
    }
}

/// `.<name>.tmp-<16 random hex digits>`: hidden (not a member file), and not guessable, so
/// nobody can create it first.
fn temporary_name(name: &str) -> Result<String, FileError> {
    let mut random = [0_u8; 8];
    rustix::rand::getrandom(&mut random, GetRandomFlags::empty())
        .map_err(|err| refused(&format!("no random name ({})", io::Error::from(err))))?;
    let mut temporary = format!(".{name}.tmp-");
    for byte in random {
        let _ = write!(temporary, "{byte:02x}");
    }
    Ok(temporary)
}

fn write_and_sync(fd: OwnedFd, content: &[u8]) -> io::Result<()> {
    let mut file = std::fs::File::from(fd);
    file.write_all(content)?;
    file.sync_all()
}

fn too_large(cap: u64) -> FileError {
    refused(&format!("is larger than {cap} bytes"))
}

fn refused(why: &str) -> FileError {
    FileError::Refused(why.to_owned())
}

#[cfg(test)]
pub(crate) mod tests;
