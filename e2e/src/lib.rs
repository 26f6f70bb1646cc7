//! End-to-end tests of Tether against real kube-apiservers; see `tests/`.
