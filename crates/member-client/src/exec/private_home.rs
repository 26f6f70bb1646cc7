//! The private `HOME` (and working directory) of one plugin run: a fresh directory that
//! nobody else can read, removed after the run.

use std::{
    fs, io,
    os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _},
    path::{Path, PathBuf},
};

use super::RunAs;

/// The most entries removed from one home; a plugin that leaves more leaves the rest (it is
/// only disk, and a warning says where).
const MAX_ENTRIES: usize = 10_000;
/// The deepest directory removed.
const MAX_DEPTH: usize = 32;

/// A fresh `0700` directory in the system temp dir, owned by the plugin's user when it runs as
/// another one. Dropping it removes it (see [`remove`](Self::remove)).
#[derive(Debug)]
pub(crate) struct PrivateHome {
    path: PathBuf,
}

impl PrivateHome {
    /// Creates the directory with a random name; `run_as` becomes its owner.
    ///
    /// # Errors
    /// The temp dir not writable, or the ownership change not permitted (no `CAP_CHOWN`).
    pub(crate) fn create(run_as: Option<RunAs>) -> io::Result<Self> {
        let base = std::env::temp_dir();
        let mut last = None;
        for _ in 0..8 {
            let mut name = [0_u8; 12];
            rustix::rand::getrandom(&mut name, rustix::rand::GetRandomFlags::empty())?;
            let suffix: String = name.iter().map(|b| format!("{b:02x}")).collect();
            let path = base.join(format!("tether-exec-{suffix}"));
            // `create`, not `create_dir_all`: an existing path (a planted symlink) fails.
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let home = Self { path };
                    if let Some(run_as) = run_as {
                        let (uid, gid) = (Some(run_as.uid), Some(run_as.gid));
                        std::os::unix::fs::chown(&home.path, uid, gid)?;
                    }
                    return Ok(home);
                }
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last = Some(err),
                Err(err) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free name for the plugin's HOME")))
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the directory and what the plugin left in it, taking back ownership of each
    /// directory first (a plugin run as another user may have left directories only it could
    /// write). Reads the file system: call it off the async workers.
    pub(crate) fn remove(self) {
        drop(self);
    }
}

impl Drop for PrivateHome {
    fn drop(&mut self) {
        let mut budget = MAX_ENTRIES;
        if let Err(err) = remove_dir(&self.path, 0, &mut budget) {
            tracing::warn!(
                    home = %self.path.display(),
                error = %err,
                "an exec plugin's private HOME could not be removed whole"
            );
        }
    }
}

/// Removes `dir`, which must be a directory (never followed through a symlink), and all in it.
fn remove_dir(dir: &Path, depth: usize, budget: &mut usize) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other("nested too deep"));
    }
    // A directory the plugin made (or chmod-ed) may not be the collector's to read or write.
    if rustix::process::geteuid().as_raw() != fs::symlink_metadata(dir)?.uid() {
        std::os::unix::fs::lchown(dir, Some(rustix::process::geteuid().as_raw()), None)?;
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    for entry in fs::read_dir(dir)? {
        *budget = budget
            .checked_sub(1)
            .ok_or_else(|| io::Error::other("too many entries"))?;
        let entry = entry?;
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            remove_dir(&path, depth + 1, budget)?;
        } else {
            fs::remove_file(&path)?;
        }
    }
    fs::remove_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_home_is_private_fresh_and_removed_with_what_is_left_in_it() {
        let home = PrivateHome::create(None).unwrap();
        let path = home.path().to_owned();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        fs::create_dir_all(path.join(".cache/deep")).unwrap();
        fs::write(path.join(".cache/deep/file"), "x").unwrap();
        fs::set_permissions(path.join(".cache"), fs::Permissions::from_mode(0o500)).unwrap();
        std::os::unix::fs::symlink("/etc", path.join("etc-link")).unwrap();
        let other = PrivateHome::create(None).unwrap();
        assert_ne!(other.path(), path);
        home.remove();
        assert!(!path.exists());
        let why = "the symlink was not followed";
        assert!(Path::new("/etc/passwd").exists(), "{why}");
        let other_path = other.path().to_owned();
        drop(other);
        assert!(!other_path.exists());
    }

    #[test]
    fn a_home_for_another_user_is_theirs_and_still_removed() {
        if rustix::process::geteuid().as_raw() != 0 {
            // Needs CAP_CHOWN; the tests run as root in CI.
            return;
        }
        let run_as = RunAs {
            uid: 65534,
            gid: 65534,
        };
        let home = PrivateHome::create(Some(run_as)).unwrap();
        let path = home.path().to_owned();
        let meta = fs::metadata(&path).unwrap();
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534));
        fs::create_dir(path.join("sub")).unwrap();
        std::os::unix::fs::chown(path.join("sub"), Some(65534), Some(65534)).unwrap();
        home.remove();
        assert!(!path.exists());
    }
}
