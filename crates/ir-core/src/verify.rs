//! Placeholder replaced by the verifier work.
