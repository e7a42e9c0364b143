//! Loop guard (placeholder: the full module lands from the loop-guard work).
#[derive(Clone, Copy, Debug, PartialEq, Eq)] pub enum LoopMode { Pause, Warn, Off }
#[derive(Clone, Debug, PartialEq)] pub struct LoopGuardConfig { pub threshold: u32, pub mode: LoopMode, pub allow_nodes: Vec<String>, pub ignore_keys: Vec<String>, pub kinds: Vec<String> }
impl Default for LoopGuardConfig { fn default() -> Self { LoopGuardConfig { threshold: 3, mode: LoopMode::Pause, allow_nodes: vec![], ignore_keys: vec!["_meta".into()], kinds: vec!["tool".into()] } } }
