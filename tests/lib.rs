//! Tests across Tether's crates that need no apiserver (see the test files beside this one):
//! registry events driving the collector's member clients, end to end in one process.
