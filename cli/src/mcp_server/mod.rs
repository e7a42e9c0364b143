//! placeholder
pub fn main(_argv: &[String]) -> i32 { 2 }
