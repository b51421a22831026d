//! Event decoding: `bits` reads bit fields, `compile` turns field types into decoder
//! trees, `exec` runs them into flat [`Slot`]s.

pub(crate) mod bits;
pub(crate) mod compile;
pub(crate) mod exec;

pub use exec::Slot;
