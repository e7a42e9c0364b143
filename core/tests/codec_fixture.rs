//! Every case of the reference LLM-capture fixture, carried inside the provider shapes and
//! read back through `graphmind_core::codec` (what every SDK's integration records).

use graphmind_core::codec::{self, Api};
use graphmind_core::json::{self, Map, Value};
use graphmind_core::llm::SAMPLING_PARAM_KEYS;

#[path = "support/verdict.rs"]
mod verdict;
use verdict::finish;

fn section(name: &str) -> Vec<Value> {
    let path = format!(
        "{}/../tests/vectors/reference/llm-fixture.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let fixture = json::parse(&std::fs::read(&path).expect("read fixture")).expect("parse fixture");
    fixture
        .get(name)
        .and_then(Value::as_array)
        .expect("section")
        .clone()
}

fn v(text: &str) -> Value {
    json::parse_str(text).expect("json")
}

fn obj(entries: Vec<(&str, Value)>) -> Value {
    let mut m = Map::new();
    for (k, val) in entries {
        m.insert(k, val);
    }
    Value::Object(m)
}

/// A reply of `provider` carrying `raw` as its reported usage.
fn reply_with_usage(provider: &str, raw: &Value) -> (Api, Value) {
    let api = Api::from_name(provider).expect("provider");
    let reply = match api {
        Api::OpenAiChat => obj(vec![("choices", v("[]")), ("usage", raw.clone())]),
        Api::OpenAiResponses => obj(vec![("output", v("[]")), ("usage", raw.clone())]),
        Api::Anthropic => obj(vec![("content", v("[]")), ("usage", raw.clone())]),
        Api::AiSdk => obj(vec![("content", v("[]")), ("usage", raw.clone())]),
        Api::RubyLlm => obj(vec![("content", v("\"\"")), ("tokens", raw.clone())]),
        Api::LangChain => {
            let message = obj(vec![("usage_metadata", raw.clone())]);
            let generation = obj(vec![("text", v("\"\"")), ("message", message)]);
            obj(vec![(
                "generations",
                Value::Array(vec![Value::Array(vec![generation])]),
            )])
        }
    };
    (api, reply)
}

#[test]
fn usage_through_every_codec() {
    let cases = section("usage");
    let mut failures = Vec::new();
    for case in &cases {
        let provider = case.get("provider").and_then(Value::as_str).unwrap();
        let (api, reply) = reply_with_usage(provider, case.get("raw").unwrap());
        let got = codec::decode_response(api, &reply).usage;
        let want = case.get("out").filter(|o| !o.is_null()).cloned();
        if got.as_ref().map(json::to_string) != want.as_ref().map(json::to_string) {
            failures.push(format!(
                "{provider} {}: got {got:?}, want {want:?}",
                json::to_string(case.get("name").unwrap())
            ));
        }
    }
    finish("usage", cases.len(), failures);
}

#[test]
fn tool_calls_through_chat_and_anthropic() {
    let cases = section("toolCalls");
    let mut failures = Vec::new();
    for case in &cases {
        let input = case.get("in").unwrap();
        let want = case
            .get("out")
            .filter(|o| !o.is_null())
            .map(json::to_string);
        let mut function = Map::new();
        let mut block = Map::new();
        block.insert("type", Value::from("tool_use"));
        for (key, chat_key, block_key) in [("name", "name", "name"), ("args", "arguments", "input")]
        {
            if let Some(val) = input.get(key) {
                function.insert(chat_key, val.clone());
                block.insert(block_key, val.clone());
            }
        }
        let mut call = Map::new();
        if let Some(id) = input.get("id") {
            call.insert("id", id.clone());
            block.insert("id", id.clone());
        }
        call.insert("function", Value::Object(function));
        let message = obj(vec![
            ("content", Value::Null),
            ("tool_calls", Value::Array(vec![Value::Object(call)])),
        ]);
        let chat = obj(vec![(
            "choices",
            Value::Array(vec![obj(vec![("message", message)])]),
        )]);
        let anthropic = obj(vec![("content", Value::Array(vec![Value::Object(block)]))]);
        for (api, reply) in [(Api::OpenAiChat, chat), (Api::Anthropic, anthropic)] {
            let out = codec::decode_response(api, &reply).output;
            let got = out
                .get("toolCalls")
                .and_then(Value::as_array)
                .and_then(|c| c.first())
                .map(json::to_string);
            // Anthropic's `input` is always an object: a string there is taken as JSON text too.
            if got != want {
                failures.push(format!(
                    "{api:?} {}: got {got:?}, want {want:?}",
                    json::to_string(input)
                ));
            }
        }
    }
    finish("toolCalls", cases.len(), failures);
}

#[test]
fn finish_reasons_through_chat_completions() {
    let cases = section("finishReasons");
    let mut failures = Vec::new();
    for case in &cases {
        let c = case.as_array().unwrap();
        let calls = if c[1].as_bool() == Some(true) {
            v(r#"[{"id":"c","function":{"name":"f","arguments":"{}"}}]"#)
        } else {
            v("[]")
        };
        let message = obj(vec![("content", v("\"\"")), ("tool_calls", calls)]);
        let choice = obj(vec![("message", message), ("finish_reason", c[0].clone())]);
        let out = codec::decode_response(
            Api::OpenAiChat,
            &obj(vec![("choices", Value::Array(vec![choice]))]),
        )
        .output;
        let got = out.get("finishReason").and_then(Value::as_str);
        if got != c[2].as_str() {
            failures.push(format!(
                "{}: got {got:?}, want {:?}",
                json::to_string(&c[0]),
                c[2].as_str()
            ));
        }
    }
    finish("finishReasons", cases.len(), failures);
}

#[test]
fn sampling_params_are_recorded_by_every_request_codec() {
    let cases = section("samplingParams");
    let mut failures = Vec::new();
    for key in &cases {
        let key = key.as_str().unwrap();
        assert!(SAMPLING_PARAM_KEYS.contains(&key));
        let request = obj(vec![
            ("model", v("\"m\"")),
            (key, v("1")),
            ("api_key", v("\"sk-secret\"")),
        ]);
        for api in Api::ALL {
            let input = codec::request_input(api, &request);
            if input.get(key).map(json::to_string).as_deref() != Some("1")
                || input.contains_key("api_key")
            {
                failures.push(format!(
                    "{api:?} {key}: {}",
                    json::to_string(&Value::Object(input))
                ));
            }
        }
    }
    finish("samplingParams", cases.len(), failures);
}
