//! [`LogBuffer`]: where a test's log subscriber writes, so that the test can read the lines.

use std::{
    io,
    sync::{Arc, Mutex, PoisonError},
};

/// An in-memory sink for a `tracing_subscriber::fmt()` subscriber: give the builder
/// `.with_writer(move || logs.clone())` and read what it wrote with [`text`](Self::text).
/// Clones share one buffer.
#[derive(Clone, Debug, Default)]
pub struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl LogBuffer {
    /// Everything written so far (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
    }
}

impl io::Write for LogBuffer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let mut buffer = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
