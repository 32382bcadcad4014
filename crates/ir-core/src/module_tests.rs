//! Unit tests of the IR body.
