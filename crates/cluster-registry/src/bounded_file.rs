//! [`read`]: one file of the members directory, read as a hostile author could have laid it
//! out.
//!
//! Whoever writes a member file names the files it reads (`tokenFile`, `caFile`,
//! `clientCertFile`, `clientKeyFile`, `kubeconfig`). Read naively, `../../etc` or a symlink to
//! `/var/run/secrets/...` makes Tether read (and send) a token that is not the member's,
//! `/dev/zero` grows a buffer until the process is killed, and a FIFO blocks the poll forever. So: the path must resolve inside the directory (the kubelet's `..data`
//! symlinks inside it are fine), the file is opened without blocking, must be a regular file,
//! and is read through a size cap.

use std::{
    io::{self, Read as _},
    path::{Component, Path, PathBuf},
};

use rustix::fs::{FileType, Mode, OFlags};

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

/// Reads `path` (relative to `dir`, or a path inside it) if it resolves inside `dir`, is a
/// regular file, and holds at most `cap` bytes.
pub(crate) fn read(dir: &Path, path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    let resolved = resolve(dir, path)?;
    let fd = rustix::fs::open(
        &resolved,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|err| refused(&format!("unreadable ({})", io::Error::from(err))))?;
    let stat = rustix::fs::fstat(&fd).map_err(|err| refused(&io::Error::from(err).to_string()))?;
    if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
        return Err(refused("is not a regular file"));
    }
    if u64::try_from(stat.st_size).unwrap_or(u64::MAX) > cap {
        return Err(refused(&format!("is larger than {cap} bytes")));
    }
    let mut bytes = Vec::new();
    std::fs::File::from(fd)
        .take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|err| refused(&format!("unreadable ({err})")))?;
    // It may have grown since the fstat.
    if bytes.len() as u64 > cap {
        return Err(refused(&format!("is larger than {cap} bytes")));
    }
    Ok(bytes)
}

/// `path` made absolute inside `dir`, symlinks followed, or why it may not be read.
fn resolve(dir: &Path, path: &Path) -> Result<PathBuf, FileError> {
    let relative = path.strip_prefix(dir).unwrap_or(path);
    if relative.is_absolute() {
        return Err(refused(
            "is an absolute path outside the members directory; name it relative to the directory",
        ));
    }
    if relative.components().any(|c| c == Component::ParentDir) {
        return Err(refused("climbs out with '..'"));
    }
    let root = dir
        .canonicalize()
        .map_err(|err| refused(&format!("members directory unreadable ({err})")))?;
    let resolved = match root.join(relative).canonicalize() {
        Ok(resolved) => resolved,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Err(FileError::NotFound),
        Err(err) => return Err(refused(&format!("unreadable ({err})"))),
    };
    if !resolved.starts_with(&root) {
        return Err(refused(
            "is a symlink that leads out of the members directory",
        ));
    }
    Ok(resolved)
}

fn refused(why: &str) -> FileError {
    FileError::Refused(why.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{os::unix::fs::symlink, time::Instant};

    fn reason(result: Result<Vec<u8>, FileError>) -> String {
        match result {
            Ok(bytes) => format!("read {} bytes", bytes.len()),
            Err(FileError::NotFound) => "not found".to_owned(),
            Err(FileError::Refused(why)) => why,
        }
    }

    #[test]
    fn files_inside_the_directory_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t"), "tok").unwrap();
        assert_eq!(read(dir.path(), Path::new("t"), 16).unwrap(), b"tok");
        assert_eq!(read(dir.path(), &dir.path().join("t"), 16).unwrap(), b"tok");
        assert!(matches!(
            read(dir.path(), Path::new("missing"), 16),
            Err(FileError::NotFound)
        ));
    }

    #[test]
    fn the_kubelet_data_layout_is_fine() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("..2026_01_01_00_00_00.1");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("token"), "tok").unwrap();
        symlink("..2026_01_01_00_00_00.1", dir.path().join("..data")).unwrap();
        symlink("..data/token", dir.path().join("token")).unwrap();
        assert_eq!(read(dir.path(), Path::new("token"), 16).unwrap(), b"tok");
    }

    #[test]
    fn paths_out_of_the_directory_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "not yours").unwrap();
        let dir = tempfile::tempdir().unwrap();
        symlink(outside.path().join("secret"), dir.path().join("link")).unwrap();
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        for (path, want) in [
            (outside.path().join("secret"), "absolute path"),
            (PathBuf::from("../secret"), "'..'"),
            (PathBuf::from("sub/../../secret"), "'..'"),
            (PathBuf::from("link"), "symlink"),
        ] {
            let got = reason(read(dir.path(), &path, 1024));
            assert!(got.contains(want), "{}: {got}", path.display());
        }
    }

    #[test]
    fn only_small_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big"), vec![b'x'; 17]).unwrap();
        std::fs::create_dir(dir.path().join("d")).unwrap();
        symlink("/dev/zero", dir.path().join("zero")).unwrap();
        assert!(reason(read(dir.path(), Path::new("big"), 16)).contains("larger than 16"));
        assert!(reason(read(dir.path(), Path::new("d"), 16)).contains("not a regular file"));
        // /dev/zero is outside the directory; a device inside it is refused as not regular.
        assert!(reason(read(dir.path(), Path::new("zero"), 16)).contains("symlink"));
    }

    #[test]
    fn a_fifo_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::RUSR | Mode::WUSR,
            0,
        )
        .unwrap();
        let started = Instant::now();
        assert!(reason(read(dir.path(), Path::new("fifo"), 16)).contains("not a regular file"));
        assert!(started.elapsed().as_secs() < 1);
    }
}
