//! Tests across Tether's crates that need no apiserver (see the test files beside this one):
//! registry events driving the collector's member clients, end to end in one process.

/// The workspace README's Rust examples, compiled as doctests here rather than in a library
/// whose package would not hold the file.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The book's page on embedding the libraries, its example compiled as a doctest too.
#[cfg(doctest)]
#[doc = include_str!("../docs/src/embedding.md")]
pub struct BookEmbeddingDoctests;
