//! `session.gate`, with the options the client helpers build (`toolGateOptions`,
//! `resultGateOptions`): besides `editable` and the live input, the tool's JSON Schema an
//! edit must match and the call's result the smart breakpoints read (both `null` for a
//! plain gate).

use crate::{point_of, NativeSession};
use graphmind_core::session::{Gate, GateOptions};
use napi::bindgen_prelude::*;
use napi::JsString;
use napi_derive::napi;

use crate::text::parse_js_opt;

#[napi]
impl NativeSession {
    /// The gate at `point` of a node with every option: `live_input_json` (offered only
    /// when `editable`), `input_schema_json` (a JSON Schema; an invalid one is dropped
    /// with a warning),
    /// `result_json` (consulted by the smart breakpoints). `0` when nothing holds, else the
    /// token the dispatcher announces.
    #[napi]
    #[allow(clippy::too_many_arguments)]
    pub fn gate_with(
        &mut self,
        env: Env,
        run_id: Option<String>,
        point: String,
        node_id: String,
        kind: String,
        name: String,
        editable: bool,
        live_input_json: Option<JsString<'_>>,
        input_schema_json: Option<JsString<'_>>,
        result_json: Option<JsString<'_>>,
    ) -> Result<u32> {
        let live_input = parse_js_opt(live_input_json.as_ref(), &mut self.scratch)?;
        // A schema the validator refuses is dropped with a warning: the gate still holds.
        let input_schema = match parse_js_opt(input_schema_json.as_ref(), &mut self.scratch)? {
            Some(schema) => match graphmind_core::edit_schema::InputSchema::compile(&schema) {
                Ok(compiled) => Some(compiled),
                Err(e) => {
                    let message =
                        format!("edits of {name} are not checked against its input schema ({e})");
                    self.session.warn(&format!("input-schema:{name}"), &message);
                    None
                }
            },
            None => None,
        };
        let result = parse_js_opt(result_json.as_ref(), &mut self.scratch)?;
        let node = graphmind_core::gate::GateNode {
            node_id,
            kind,
            name,
        };
        let options = GateOptions {
            editable,
            live_input,
            input_schema,
            result,
        };
        match self
            .session
            .gate(run_id.as_deref(), point_of(&point)?, &node, options)
        {
            Gate::Continue => Ok(0),
            Gate::Held(pending) => {
                let token = self.token();
                self.hold(&env, pending, token)?;
                Ok(token)
            }
        }
    }
}
