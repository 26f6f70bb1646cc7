//! Reading a whole file that must be small: a configuration or PEM file named by an operator.

use std::{io::Read as _, path::Path};

/// The content of the file at `path`, or `None` when it holds more than `limit` bytes.
///
/// At most `limit + 1` bytes are read, so a huge or endless file (`/dev/zero`, a FIFO kept
/// open) costs no more memory than a file at the limit.
///
/// # Errors
/// If the file cannot be opened or read.
pub fn read_bounded(path: &Path, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut raw = Vec::new();
    std::fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut raw)?;
    Ok((u64::try_from(raw.len()).unwrap_or(u64::MAX) <= limit).then_some(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_at_the_limit_is_read_and_one_byte_more_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"1234").unwrap();
        assert_eq!(
            read_bounded(&path, 4).unwrap().as_deref(),
            Some(&b"1234"[..])
        );
        assert_eq!(read_bounded(&path, 3).unwrap(), None);
    }

    #[test]
    fn an_endless_file_is_refused_at_the_limit() {
        assert_eq!(read_bounded(Path::new("/dev/zero"), 1 << 16).unwrap(), None);
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_bounded(&dir.path().join("absent"), 4).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    }
}
