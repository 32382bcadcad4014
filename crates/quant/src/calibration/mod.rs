//! Calibration: how `calibrate` accumulates statistics of an observed value
//! and how `insert-fakeq` turns them into a range. Two open registries
//! ([`methods::QuantMethods`]: observers and range methods, installed in the
//! `Context`), the statistics every observer keeps in its `qnn.observe`
//! ([`stats::ObserverStats`] with its [`histogram::Histogram`] and
//! [`channel_means::ChannelMeans`]), and the built-in [`observers`] and
//! [`ranges`].

pub mod batch;
pub mod channel_means;
pub mod histogram;
pub mod methods;
pub mod observers;
pub mod ranges;
pub mod stats;
