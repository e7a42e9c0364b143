//! The value layer, the lowest: JSON values as the instrumented app's languages hold them
//! ([`json`]), a node's input or output as a binding hands it over ([`host_value`]), the
//! canonical text the fingerprints hash ([`canonical`]) and the depth budget every recorded
//! value is cut to ([`depth`], which the parser applies). It uses no other layer.

pub mod canonical;
pub mod depth;
pub mod host_value;
pub mod json;
