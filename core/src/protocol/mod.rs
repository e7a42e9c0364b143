//! The protocol layer: what travels between an app and the debugger. The message types,
//! vocabularies and payloads ([`event`]), the envelope writer and tolerant parser
//! ([`wire`]), and the randomness the ids are made of ([`random`]). It uses only the value
//! layer.

pub mod event;
pub mod random;
pub mod wire;
