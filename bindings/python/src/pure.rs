//! The core's pure functions, exported for users (`canonical_json`, `fingerprint`) and for
//! the conformance vectors, which the Python test suite runs through this module so that
//! every value crosses the Python <-> core conversion both ways.

use crate::convert::{fields_value, parse_to_py, py_str, to_py, to_value, to_value_or_marker};
use graphmind_core::json::{self, Value};
use graphmind_core::surface::options::{self, Host};
use graphmind_core::surface::pure::{self, PureError};
use graphmind_core::{edit_input, llm, shrink};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

fn readable(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_value(obj).map_err(|_| PyTypeError::new_err("value cannot be read as JSON"))
}

fn opt_value(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Value>> {
    obj.map(readable).transpose()
}

fn value_error(e: PureError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// `value` as Python, `None` for none.
fn nullable<'py>(py: Python<'py>, value: Option<Value>) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &value.unwrap_or(Value::Null))
}

/// `JSON.stringify` of a value (compact; lone surrogates escaped).
#[pyfunction]
fn to_json(value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(json::to_string(&readable(value)?))
}

/// What a tool call records for `value` (`JSON.stringify` of the converted value, a read
/// that raises degraded to the marker): the converter's output, for the tests.
#[pyfunction]
fn _recorded_json(value: &Bound<'_, PyAny>) -> String {
    json::to_string(&to_value_or_marker(value))
}

/// What a detached tool call records for `value` when it crosses packed
/// (`convert::write_packed`, decoded by the core and written as the recording would be);
/// `None` when the value is converted instead. For the tests: it must equal
/// [`_recorded_json`] wherever it is not `None`.
#[pyfunction]
fn _detached_json(value: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    let mut buf = json::packed::PackedWriter::new();
    if !crate::convert::write_packed(value, &mut buf) {
        return Ok(None);
    }
    let decoded = json::packed::decode(buf.as_bytes()).map_err(|e| {
        PyValueError::new_err(format!("the packed path wrote an unreadable value: {e}"))
    })?;
    Ok(Some(json::to_string(&decoded)))
}

/// What a tool call whose positional arguments fill its parameters records as its input
/// (`convert::fields_value`, the dict-less path of `NativeSession.enter_call`), for the tests.
#[pyfunction]
fn _recorded_args_json(
    names: Vec<Bound<'_, PyString>>,
    args: &Bound<'_, pyo3::types::PyTuple>,
) -> PyResult<String> {
    if names.len() != args.len() {
        return Err(PyValueError::new_err("one name per argument"));
    }
    let names: Vec<json::JsStr> = names.iter().map(py_str).collect();
    let fields: Vec<_> = names.iter().zip(args.iter()).collect();
    Ok(json::to_string(&fields_value(&fields)))
}

/// Parses JSON with the core's strict parser (lone surrogates and key order kept).
#[pyfunction]
fn parse_json<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyAny>> {
    parse_to_py(py, text)
}

/// The canonical JSON text of a value: keys sorted by UTF-16 code units, JavaScript
/// number spelling, `_meta` keys removed at every depth (the loop guard's canon).
#[pyfunction]
#[pyo3(signature = (value, ignore_keys=None))]
fn canonical_json(value: &Bound<'_, PyAny>, ignore_keys: Option<Vec<String>>) -> PyResult<String> {
    Ok(pure::canonical_json(
        &readable(value)?,
        ignore_keys.as_deref(),
    ))
}

/// The canonical text of one call: `[nodeId, input]`.
#[pyfunction]
#[pyo3(signature = (node_id, input=None, ignore_keys=None))]
fn canonical_call(
    node_id: &Bound<'_, PyString>,
    input: Option<&Bound<'_, PyAny>>,
    ignore_keys: Option<Vec<String>>,
) -> PyResult<String> {
    let v = opt_value(input)?;
    Ok(pure::canonical_call(
        &py_str(node_id),
        v.as_ref(),
        ignore_keys.as_deref(),
    ))
}

/// The loop guard's fingerprint of a call: the first 32 hex digits of SHA-256 over its
/// canonical text. `input=None` is an absent input.
#[pyfunction]
#[pyo3(signature = (node_id, input=None, ignore_keys=None))]
fn fingerprint(
    node_id: &Bound<'_, PyString>,
    input: Option<&Bound<'_, PyAny>>,
    ignore_keys: Option<Vec<String>>,
) -> PyResult<String> {
    let v = opt_value(input)?;
    Ok(pure::fingerprint(
        &py_str(node_id),
        v.as_ref(),
        ignore_keys.as_deref(),
    ))
}

/// `serializePayload`: `(json, truncated, original_bytes)`.
#[pyfunction]
#[pyo3(signature = (payload, max_bytes=shrink::MAX_PAYLOAD_BYTES, event_type=None))]
fn serialize_payload(
    payload: &Bound<'_, PyAny>,
    max_bytes: usize,
    event_type: Option<&str>,
) -> PyResult<(String, bool, usize)> {
    let s = shrink::serialize_payload(&readable(payload)?, max_bytes, event_type);
    Ok((s.json, s.truncated, s.original_bytes))
}

/// The shrinker's constants, by their reference names.
#[pyfunction]
fn shrink_constants<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &pure::shrink_constants())
}

/// Options (camelCase, ms) + an environment mapping + a flavor -> `Config::to_json()`.
#[pyfunction]
#[pyo3(signature = (options, env, flavor="python"))]
fn resolve_config<'py>(
    py: Python<'py>,
    options: &Bound<'_, PyAny>,
    env: &Bound<'_, PyAny>,
    flavor: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let flavor = pure::flavor(flavor).map_err(value_error)?;
    let (options, env) = (to_value_or_marker(options), to_value_or_marker(env));
    to_py(py, &pure::resolve_config(&options, &env, flavor))
}

/// The session's keyword options (Python spelling, seconds) as the core's camelCase
/// option object (milliseconds): the core's option table does the mapping.
#[pyfunction]
fn core_options<'py>(py: Python<'py>, options: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    to_py(
        py,
        &options::to_core(Host::Python, &to_value_or_marker(options)),
    )
}

/// Redacts a sequence of `{type, payload, runId?, nodeKind?}` events with one fresh
/// redactor under `switches` (`hideInputs`, ...): each result is the payload, or `None`
/// when the event is dropped.
#[pyfunction]
fn redact_events<'py>(
    py: Python<'py>,
    switches: &Bound<'_, PyAny>,
    events: &Bound<'_, PyList>,
) -> PyResult<Bound<'py, PyList>> {
    let switches = readable(switches)?;
    let events = events
        .iter()
        .map(|e| readable(&e))
        .collect::<PyResult<Vec<_>>>()?;
    let out = PyList::empty(py);
    for payload in pure::redact_events(&switches, &events) {
        match payload {
            Some(p) => out.append(to_py(py, &p)?)?,
            None => out.append(py.None())?,
        }
    }
    Ok(out)
}

/// The wire finish reason of a provider's raw one (`None`: unknown / absent).
#[pyfunction]
fn finish_reason(raw: &Bound<'_, PyAny>, has_tool_calls: bool) -> PyResult<Option<&'static str>> {
    Ok(llm::normalize_finish_reason(Some(&readable(raw)?), has_tool_calls).map(|r| r.as_str()))
}

/// The wire form of one tool call (`None` when it has no name).
#[pyfunction]
#[pyo3(signature = (id=None, name=None, args=None))]
fn tool_call<'py>(
    py: Python<'py>,
    id: Option<&Bound<'_, PyAny>>,
    name: Option<&Bound<'_, PyAny>>,
    args: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let (id, name, args) = (opt_value(id)?, opt_value(name)?, opt_value(args)?);
    nullable(
        py,
        llm::tool_call(id.as_ref(), name.as_ref(), args.as_ref()),
    )
}

/// The schema hash of a tool definition.
#[pyfunction]
fn schema_hash(definition: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(llm::schema_hash(&readable(definition)?))
}

/// A tool definition with secrets dropped, as recorded.
#[pyfunction]
fn sanitize_tool_definition<'py>(
    py: Python<'py>,
    definition: &Bound<'_, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &llm::sanitize_tool_definition(&readable(definition)?))
}

/// A provider's usage as the wire's `TokenUsage` (`None`: nothing reported).
#[pyfunction]
fn provider_usage<'py>(
    py: Python<'py>,
    provider: &str,
    raw: &Bound<'_, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let usage = pure::provider_usage(provider, &readable(raw)?).map_err(value_error)?;
    nullable(py, usage)
}

/// The allow-listed sampling parameters of a request body.
#[pyfunction]
fn pick_params<'py>(py: Python<'py>, body: &Bound<'_, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    to_py(py, &Value::Object(llm::pick_params(&readable(body)?)))
}

/// The sampling-parameter allow-list, in order.
#[pyfunction]
fn sampling_param_keys() -> Vec<&'static str> {
    pure::sampling_param_keys()
}

/// The refusal code of a proposed inject/edit value (`None`: acceptable).
#[pyfunction]
fn proposed_value_refusal(value: &Bound<'_, PyAny>) -> PyResult<Option<&'static str>> {
    Ok(edit_input::proposed_value_refusal(&readable(value)?).map(|c| c.as_str()))
}

/// Whether an edit holds a prototype-pollution key.
#[pyfunction]
fn prototype_key_refused(value: &Bound<'_, PyAny>) -> PyResult<bool> {
    Ok(edit_input::prototype_key_refusal(&readable(value)?).is_some())
}

/// A validator's result normalized: `{ok, value}` or `{ok: false, code, message?}`.
#[pyfunction]
#[pyo3(signature = (result=None))]
fn normalize_validation<'py>(
    py: Python<'py>,
    result: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let r = opt_value(result)?;
    to_py(py, &edit_input::normalize_validation(r.as_ref()).to_value())
}

/// A refusal message cut and cleaned (`None` when nothing remains).
#[pyfunction]
#[pyo3(signature = (message=None))]
fn sanitize_short_text<'py>(
    py: Python<'py>,
    message: Option<&Bound<'_, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let m = opt_value(message)?;
    nullable(
        py,
        edit_input::sanitize_short_text(m.as_ref()).map(Value::String),
    )
}

/// Merges an edit into the live tool input: `(merged, None)` or `(None, refusal_code)`.
#[pyfunction]
#[pyo3(signature = (live=None, proposed=None, input_hidden=false))]
fn merge_edited_input<'py>(
    py: Python<'py>,
    live: Option<&Bound<'_, PyAny>>,
    proposed: Option<&Bound<'_, PyAny>>,
    input_hidden: bool,
) -> PyResult<(Bound<'py, PyAny>, Option<&'static str>)> {
    let (l, p) = (opt_value(live)?, opt_value(proposed)?);
    match edit_input::merge_edited_input(l.as_ref(), p.as_ref(), input_hidden) {
        Ok(v) => Ok((to_py(py, &v)?, None)),
        Err(r) => Ok((py.None().into_bound(py), Some(r.code.as_str()))),
    }
}

/// Adds this module's functions to `_native`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(to_json, m)?)?;
    m.add_function(wrap_pyfunction!(_recorded_json, m)?)?;
    m.add_function(wrap_pyfunction!(_detached_json, m)?)?;
    m.add_function(wrap_pyfunction!(_recorded_args_json, m)?)?;
    m.add_function(wrap_pyfunction!(parse_json, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_json, m)?)?;
    m.add_function(wrap_pyfunction!(canonical_call, m)?)?;
    m.add_function(wrap_pyfunction!(fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(serialize_payload, m)?)?;
    m.add_function(wrap_pyfunction!(shrink_constants, m)?)?;
    m.add_function(wrap_pyfunction!(resolve_config, m)?)?;
    m.add_function(wrap_pyfunction!(core_options, m)?)?;
    m.add_function(wrap_pyfunction!(redact_events, m)?)?;
    m.add_function(wrap_pyfunction!(finish_reason, m)?)?;
    m.add_function(wrap_pyfunction!(tool_call, m)?)?;
    m.add_function(wrap_pyfunction!(schema_hash, m)?)?;
    m.add_function(wrap_pyfunction!(sanitize_tool_definition, m)?)?;
    m.add_function(wrap_pyfunction!(provider_usage, m)?)?;
    m.add_function(wrap_pyfunction!(pick_params, m)?)?;
    m.add_function(wrap_pyfunction!(sampling_param_keys, m)?)?;
    m.add_function(wrap_pyfunction!(proposed_value_refusal, m)?)?;
    m.add_function(wrap_pyfunction!(prototype_key_refused, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_validation, m)?)?;
    m.add_function(wrap_pyfunction!(sanitize_short_text, m)?)?;
    m.add_function(wrap_pyfunction!(merge_edited_input, m)?)?;
    Ok(())
}
