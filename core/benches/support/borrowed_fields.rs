//! The serde_json floor the node benches print: the two events of a tool node serialized
//! with their payloads borrowed (`json!` would deep-copy each payload first, and time that).

/// An event's fields by reference, serialized as an object in this order.
pub struct Fields<'a>(pub Vec<(&'a str, &'a serde_json::Value)>);

impl<'a> FromIterator<(&'a str, &'a serde_json::Value)> for Fields<'a> {
    fn from_iter<I: IntoIterator<Item = (&'a str, &'a serde_json::Value)>>(iter: I) -> Self {
        Fields(iter.into_iter().collect())
    }
}

impl serde::Serialize for Fields<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

/// The fixed fields of the two events, as serde_json values.
pub struct NodeEvents {
    node_id: serde_json::Value,
    kind: serde_json::Value,
    name: serde_json::Value,
    instance: serde_json::Value,
    duration: serde_json::Value,
    status: serde_json::Value,
}

impl NodeEvents {
    /// A `tool:search_files` node's fields.
    pub fn new() -> Self {
        NodeEvents {
            node_id: serde_json::json!("tool:search_files"),
            kind: serde_json::json!("tool"),
            name: serde_json::json!("search_files"),
            instance: serde_json::json!("inst_0123456789ab"),
            duration: serde_json::json!(0.5),
            status: serde_json::json!("ok"),
        }
    }

    /// `node.started` with `input` and `node.finished` with `output`, as JSON text.
    pub fn serialize(
        &self,
        input: &serde_json::Value,
        output: &serde_json::Value,
    ) -> (String, String) {
        let started: Fields = [
            ("nodeId", &self.node_id),
            ("kind", &self.kind),
            ("name", &self.name),
            ("instanceId", &self.instance),
            ("input", input),
        ]
        .into_iter()
        .collect();
        let finished: Fields = [
            ("nodeId", &self.node_id),
            ("instanceId", &self.instance),
            ("output", output),
            ("durationMs", &self.duration),
            ("status", &self.status),
        ]
        .into_iter()
        .collect();
        (
            serde_json::to_string(&started).unwrap(),
            serde_json::to_string(&finished).unwrap(),
        )
    }
}
