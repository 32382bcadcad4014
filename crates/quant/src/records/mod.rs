//! What the quantization passes record in the IR beyond ops and types, each
//! read and written in one place: the bias corrections and absorptions a
//! pass made ([`bias_correction`], [`bias_absorption`]), the decisions a
//! person or `quantize-search` leaves for later passes ([`hints`]: cast
//! hints, observer storage, `qnn.skip`), and the quantization [`scheme`]
//! options that `insert-fakeq` and `propagate-qparams` read.

pub mod bias_absorption;
pub mod bias_correction;
mod channel_record;
pub mod hints;
pub mod scheme;
