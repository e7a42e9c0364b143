//! The OTLP wire formats for the live export (issue #24, first step): the OTLP/JSON
//! document that `record --format otlp` writes (`import::to_otlp`, the one span mapping)
//! decoded into the OpenTelemetry protobuf messages of `opentelemetry-proto` and encoded
//! with `prost` as an OTLP/HTTP protobuf request body. No mapping lives here.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

/// An OTLP/JSON document that is not a valid `ExportTraceServiceRequest`.
#[derive(Debug)]
pub struct WireError(pub String);

/// Decodes an OTLP/JSON document (hex ids, string nanoseconds) into the protobuf message.
pub fn request_from_json(doc: &str) -> Result<ExportTraceServiceRequest, WireError> {
    serde_json::from_str(doc).map_err(|e| WireError(format!("not an OTLP/JSON trace request: {e}")))
}

/// The OTLP/HTTP protobuf body (`application/x-protobuf`) for an OTLP/JSON document.
pub fn protobuf_body(doc: &str) -> Result<Vec<u8>, WireError> {
    Ok(request_from_json(doc)?.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::RunRow;
    use graphmind_core::json;

    #[test]
    fn record_mapping_encodes_as_protobuf_and_decodes_back() {
        let run = RunRow { id: "r1".into(), app: "app".into(), started_at: 1000.0, finished_at: Some(2000.0), status: "ok".into(), schema_version: 1, source: "live".into(), event_count: 4, error_count: 1 };
        let evs: Vec<_> = [
            r#"{"type":"node.started","ts":1100,"payload":{"nodeId":"n1","name":"chat","kind":"llm","input":{"q":1}}}"#,
            r#"{"type":"node.finished","ts":1200,"payload":{"nodeId":"n1","output":"hi","usage":{"inputTokens":7,"outputTokens":3}}}"#,
            r#"{"type":"node.started","ts":1300,"payload":{"nodeId":"n2","name":"search","kind":"tool","parentId":"n1"}}"#,
            r#"{"type":"node.error","ts":1400,"payload":{"nodeId":"n2","error":{"message":"boom","name":"E"}}}"#,
        ]
        .iter()
        .map(|s| json::parse_str(s).unwrap())
        .collect();
        let doc = crate::import::to_otlp(&run, &evs);
        let body = protobuf_body(&doc).unwrap();
        let req = ExportTraceServiceRequest::decode(body.as_slice()).unwrap();
        let spans = &req.resource_spans[0].scope_spans[0].spans;
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[0].name, "app");
        assert_eq!(spans[1].name, "chat");
        assert_eq!(spans[1].parent_span_id, spans[0].span_id);
        assert_eq!(spans[2].parent_span_id, spans[1].span_id);
        assert_eq!(spans[1].trace_id.len(), 16);
        assert_eq!(spans[1].start_time_unix_nano, 1_100_000_000);
        let prompt = spans[1].attributes.iter().find(|a| a.key == "llm.token_count.prompt").unwrap();
        assert_eq!(format!("{:?}", prompt.value), format!("{:?}", Some(opentelemetry_proto::tonic::common::v1::AnyValue { value: Some(opentelemetry_proto::tonic::common::v1::any_value::Value::IntValue(7)) })));
        assert_eq!(spans[2].status.as_ref().unwrap().code, 2);
    }
}
