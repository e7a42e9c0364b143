//! The codecs on the shapes the providers really send (the fake provider server of the
//! SDK suites sends the same ones over HTTP).

use super::*;
use crate::json::{parse_str, to_string};

fn v(text: &str) -> Value {
    parse_str(text).expect("json")
}

fn out(d: &Decoded) -> String {
    to_string(&Value::Object(d.output.clone()))
}

fn usage(d: &Decoded) -> String {
    d.usage.as_ref().map(to_string).unwrap_or_default()
}

fn stream(api: Api, chunks: &[&str]) -> (Vec<(TokenChannel, String)>, Decoded) {
    let mut decoder = StreamDecoder::new(api);
    let mut deltas = Vec::new();
    for c in chunks {
        for (ch, t) in decoder.push(&v(c)) {
            deltas.push((ch, t.to_string_lossy().into_owned()));
        }
    }
    (deltas, decoder.finish(None))
}

fn joined(deltas: &[(TokenChannel, String)], channel: TokenChannel) -> String {
    deltas
        .iter()
        .filter(|(c, _)| *c == channel)
        .map(|(_, t)| t.as_str())
        .collect()
}

#[test]
fn chat_completion_with_a_tool_call() {
    let d = decode_response(
        Api::OpenAiChat,
        &v(
            r#"{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lisbon\"}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":7,"prompt_tokens_details":{"cached_tokens":10}}}"#,
        ),
    );
    assert_eq!(
        out(&d),
        r#"{"text":"","toolCalls":[{"id":"call_1","name":"get_weather","input":{"city":"Lisbon"}}],"finishReason":"tool-calls","rawFinishReason":"tool_calls"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":30,"outputTokens":7,"inclusive":true,"cacheReadTokens":10}"#
    );
    assert_eq!(
        d.response_id.as_ref().and_then(JsStr::as_str),
        Some("chatcmpl-1")
    );
}

#[test]
fn chat_request_keeps_the_prompt_and_allow_listed_params_only() {
    let input = request_input(
        Api::OpenAiChat,
        &v(
            r#"{"model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"user":"u1","stream":true,
            "stream_options":{"include_usage":true},"tools":[]}"#,
        ),
    );
    assert_eq!(
        to_string(&Value::Object(input)),
        r#"{"provider":"openai","model":"gpt","messages":[{"role":"user","content":"hi"}],"temperature":0.2,"stream":true}"#
    );
}

#[test]
fn chat_stream_assembles_tool_calls_and_reads_the_usage_chunk() {
    let (deltas, d) = stream(
        Api::OpenAiChat,
        &[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"Sun"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"ny, ","reasoning_content":"hm"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"ty\": \"Lisbon\"}"}}]},"finish_reason":"tool_calls"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":9,"completion_tokens_details":{"reasoning_tokens":3}}}"#,
        ],
    );
    assert_eq!(joined(&deltas, TokenChannel::Text), "Sunny, ");
    assert_eq!(joined(&deltas, TokenChannel::Reasoning), "hm");
    assert_eq!(
        joined(&deltas, TokenChannel::ToolArgs),
        r#"{"city": "Lisbon"}"#
    );
    assert_eq!(
        out(&d),
        r#"{"text":"Sunny, ","chunks":5,"toolCalls":[{"id":"call_9","name":"get_weather","input":{"city":"Lisbon"}}],"finishReason":"tool-calls","rawFinishReason":"tool_calls"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":20,"outputTokens":9,"inclusive":true,"reasoningTokens":3}"#
    );
}

#[test]
fn a_cut_off_streamed_call_keeps_its_text() {
    let (_, d) = stream(
        Api::OpenAiChat,
        &[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"w","arguments":"{\"p"}}]},"finish_reason":"length"}]}"#,
        ],
    );
    assert!(
        out(&d).contains(r#""input":null,"inputText":"{\"p""#),
        "{}",
        out(&d)
    );
    assert!(out(&d).contains(r#""finishReason":"length""#));
}

#[test]
fn responses_incomplete_answer() {
    let d = decode_response(
        Api::OpenAiResponses,
        &v(
            r#"{"id":"resp_1","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},
            "output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Partial"}]},
            {"type":"function_call","call_id":"call_7","name":"lookup","arguments":"{\"q\": \"x"},
            {"type":"web_search_call","id":"ws_1","status":"completed"}],
            "usage":{"input_tokens":11,"output_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens_details":{"reasoning_tokens":2}}}"#,
        ),
    );
    assert_eq!(
        out(&d),
        r#"{"text":"Partial","toolCalls":[{"id":"call_7","name":"lookup","input":null,"inputText":"{\"q\": \"x"}],"builtinTools":[{"type":"web_search_call","id":"ws_1","status":"completed"}],"finishReason":"length","rawFinishReason":"max_output_tokens","status":"incomplete"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":11,"outputTokens":5,"inclusive":true,"cacheReadTokens":0,"reasoningTokens":2}"#
    );
}

#[test]
fn responses_stream_takes_the_final_answer() {
    let (deltas, d) = stream(
        Api::OpenAiResponses,
        &[
            r#"{"type":"response.created","response":{"status":"in_progress","output":[]}}"#,
            r#"{"type":"response.output_text.delta","delta":"Hi "}"#,
            r#"{"type":"response.reasoning_summary_text.delta","delta":"think"}"#,
            r#"{"type":"response.output_text.delta","delta":"there"}"#,
            r#"{"type":"response.function_call_arguments.delta","delta":"{\"q\": 1}"}"#,
            r#"{"type":"response.completed","response":{"id":"resp_2","status":"completed","output":[
                {"type":"message","content":[{"type":"output_text","text":"Hi there"}]},
                {"type":"function_call","call_id":"call_8","name":"lookup","arguments":"{\"q\": 1}"}],
                "usage":{"input_tokens":6,"output_tokens":4,"input_tokens_details":{"cached_tokens":1},"output_tokens_details":{"reasoning_tokens":0}}}}"#,
        ],
    );
    assert_eq!(joined(&deltas, TokenChannel::Text), "Hi there");
    assert_eq!(joined(&deltas, TokenChannel::Reasoning), "think");
    assert_eq!(
        out(&d),
        r#"{"text":"Hi there","chunks":6,"toolCalls":[{"id":"call_8","name":"lookup","input":{"q":1}}],"finishReason":"tool-calls","rawFinishReason":"completed","status":"completed"}"#
    );
    assert_eq!(
        d.response_id.as_ref().and_then(JsStr::as_str),
        Some("resp_2")
    );
    assert!(usage(&d).starts_with(r#"{"inputTokens":6,"#));
}

#[test]
fn anthropic_message_with_thinking_and_tool_use() {
    let d = decode_response(
        Api::Anthropic,
        &v(
            r#"{"id":"msg_1","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"Checking."},
            {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Faro"}}],"stop_reason":"tool_use",
            "usage":{"input_tokens":5,"output_tokens":8,"cache_read_input_tokens":100}}"#,
        ),
    );
    assert_eq!(
        out(&d),
        r#"{"thinking":"hmm","text":"Checking.","toolCalls":[{"id":"toolu_1","name":"get_weather","input":{"city":"Faro"}}],"finishReason":"tool-calls","rawFinishReason":"tool_use"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":105,"outputTokens":8,"inclusive":true,"cacheReadTokens":100}"#
    );
}

#[test]
fn anthropic_stream_in_pieces() {
    let (deltas, d) = stream(
        Api::Anthropic,
        &[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1,"cache_creation":{"ephemeral_5m_input_tokens":4}}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"check."}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{}}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}"#,
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"Faro\"}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}}"#,
            r#"{"type":"message_stop"}"#,
        ],
    );
    assert_eq!(joined(&deltas, TokenChannel::Text), "Let me check.");
    assert_eq!(
        joined(&deltas, TokenChannel::ToolArgs),
        r#"{"city": "Faro"}"#
    );
    assert_eq!(
        out(&d),
        r#"{"text":"Let me check.","chunks":11,"toolCalls":[{"id":"toolu_2","name":"get_weather","input":{"city":"Faro"}}],"finishReason":"tool-calls","rawFinishReason":"tool_use"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":7,"outputTokens":12,"inclusive":true,"cacheWriteTokens":4}"#
    );
}

#[test]
fn anthropic_raw_stream_records_server_tools() {
    // `messages.create({stream: true})` read raw, no `finalMessage`: the server tool's
    // input arrives as `input_json_delta`s, its result block whole in its start event.
    let (deltas, d) = stream(
        Api::Anthropic,
        &[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"query\": "}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"faro\"}"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[{"type":"web_search_result","url":"https://example.test"}]}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"srvtoolu_2","name":"code_execution","input":{"code":"1+1"}}}"#,
            r#"{"type":"content_block_stop","index":2}"#,
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}"#,
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"Sunny."}}"#,
            r#"{"type":"content_block_stop","index":3}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#,
            r#"{"type":"message_stop"}"#,
        ],
    );
    assert_eq!(joined(&deltas, TokenChannel::Text), "Sunny.");
    let o = out(&d);
    assert!(
        o.contains(r#""builtinTools":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"faro"},"output":[{"type":"web_search_result","url":"https://example.test"}]},{"type":"server_tool_use","id":"srvtoolu_2","name":"code_execution","input":{"code":"1+1"}}]"#),
        "{o}"
    );
    assert!(
        !o.contains("toolCalls"),
        "server tools are not the app's tool calls: {o}"
    );
    assert!(o.contains(r#""finishReason":"stop""#), "{o}");
}

#[test]
fn langchain_result_with_invalid_call() {
    let d = decode_response(
        Api::LangChain,
        &v(
            r#"{"generations":[[{"text":"five","message":{"tool_calls":[{"id":"a","name":"add","args":{"a":2}}],
            "invalid_tool_calls":[{"id":"b","name":"add","args":"{\"a\":"}],"usage_metadata":{"input_tokens":5,"output_tokens":1},
            "response_metadata":{"finish_reason":"stop"}}}]],"llm_output":{"model_name":"fake"}}"#,
        ),
    );
    assert_eq!(
        out(&d),
        r#"{"text":"five","toolCalls":[{"id":"a","name":"add","input":{"a":2}},{"id":"b","name":"add","input":null,"inputText":"{\"a\":"}],"finishReason":"tool-calls","rawFinishReason":"stop","model":"fake"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":5,"outputTokens":1,"inclusive":true}"#
    );
}

#[test]
fn ruby_llm_message() {
    let d = decode_response(
        Api::RubyLlm,
        &v(
            r#"{"role":"assistant","content":"It is 21C","model_id":"gpt-4o","tool_calls":{"c1":{"id":"c1","name":"weather","arguments":{"city":"Oslo"}}},
            "input_tokens":10,"output_tokens":4,"cached_tokens":6}"#,
        ),
    );
    assert_eq!(
        out(&d),
        r#"{"text":"It is 21C","toolCalls":[{"id":"c1","name":"weather","input":{"city":"Oslo"}}],"model":"gpt-4o"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":16,"outputTokens":4,"inclusive":true,"cacheReadTokens":6}"#
    );
}

#[test]
fn ai_sdk_stream_error_parts_fail_the_stream() {
    let mut decoder = StreamDecoder::new(Api::AiSdk);
    assert!(decoder.error().is_none());
    for part in [
        r#"{"type":"text-delta","id":"t","delta":"Hi"}"#,
        r#"{"type":"error","error":{"name":"AI_APICallError","message":"overloaded","stack":"at x"}}"#,
        r#"{"type":"error","error":"a second one is not the first"}"#,
    ] {
        decoder.push(&v(part));
    }
    let e = decoder.error().expect("the error part");
    assert_eq!(
        (e.name.as_str(), e.message.as_str()),
        (Some("AI_APICallError"), Some("overloaded"))
    );
    assert_eq!(e.stack.as_ref().and_then(|s| s.as_str()), Some("at x"));
    let mut plain = StreamDecoder::new(Api::AiSdk);
    plain.push(&v(r#"{"type":"error","error":"boom"}"#));
    let e = plain.error().unwrap();
    assert_eq!(
        (e.name.as_str(), e.message.as_str()),
        (Some("Error"), Some("boom"))
    );
    let mut odd = StreamDecoder::new(Api::AiSdk);
    odd.push(&v(r#"{"type":"error","error":{"code":7}}"#));
    assert_eq!(odd.error().unwrap().message.as_str(), Some(r#"{"code":7}"#));
    let mut chat = StreamDecoder::new(Api::OpenAiChat);
    chat.push(&v(r#"{"type":"error","error":"not a part of this api"}"#));
    assert!(chat.error().is_none());
}

#[test]
fn ai_sdk_stream_parts() {
    let (deltas, d) = stream(
        Api::AiSdk,
        &[
            r#"{"type":"stream-start","warnings":[]}"#,
            r#"{"type":"text-delta","id":"t","delta":"Hel"}"#,
            r#"{"type":"reasoning-delta","id":"r","delta":"why"}"#,
            r#"{"type":"text-delta","id":"t","delta":"lo"}"#,
            r#"{"type":"tool-input-delta","id":"c","delta":"{}"}"#,
            r#"{"type":"tool-call","toolCallId":"c","toolName":"now","input":"{}"}"#,
            r#"{"type":"finish","finishReason":{"unified":"tool-calls","raw":"tool_use"},"usage":{"inputTokens":{"total":4},"outputTokens":{"total":2}}}"#,
        ],
    );
    assert_eq!(joined(&deltas, TokenChannel::Text), "Hello");
    assert_eq!(joined(&deltas, TokenChannel::Reasoning), "why");
    assert_eq!(joined(&deltas, TokenChannel::ToolArgs), "{}");
    assert_eq!(
        out(&d),
        r#"{"text":"Hello","chunks":7,"toolCalls":[{"id":"c","name":"now","input":{}}],"finishReason":"tool-calls","rawFinishReason":"tool-calls"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":4,"outputTokens":2,"inclusive":true}"#
    );
}

#[test]
fn an_injected_string_becomes_each_providers_reply() {
    let request = v(r#"{"model":"gpt-test"}"#);
    for api in Api::ALL {
        let reply = injected_reply(api, Value::from("from the debugger"), &request);
        // What the codec reads back from the reply is the injected text.
        let back = decode_response(api, &reply);
        assert_eq!(
            back.output.get("text").and_then(Value::as_str),
            Some("from the debugger"),
            "{api:?}: {}",
            to_string(&reply)
        );
    }
    let chat = to_string(&injected_reply(Api::OpenAiChat, Value::from("x"), &request));
    assert!(
        chat.contains(r#""model":"gpt-test""#) && chat.contains(r#""object":"chat.completion""#),
        "{chat}"
    );
    // `{text}` is made a reply too; something already shaped like one passes through.
    let from_object = injected_reply(Api::Anthropic, v(r#"{"text":"hi"}"#), &request);
    assert_eq!(
        decode_response(Api::Anthropic, &from_object)
            .output
            .get("text")
            .and_then(Value::as_str),
        Some("hi")
    );
    let shaped = v(r#"{"choices":[{"message":{"content":"as is"}}]}"#);
    assert_eq!(
        to_string(&injected_reply(Api::OpenAiChat, shaped.clone(), &request)),
        to_string(&shaped)
    );
    assert_eq!(
        to_string(&injected_reply(Api::OpenAiChat, v("42"), &request)),
        "42"
    );
}

#[test]
fn prompt_keys() {
    let k = prompt_key(
        Api::OpenAiChat,
        &v(r#"{"messages":[{"role":"user","content":"a"},{"role":"assistant"}]}"#),
    );
    assert_eq!(
        (k.first.as_str(), k.length),
        (r#"{"role":"user","content":"a"}"#, 2)
    );
    let k = prompt_key(
        Api::OpenAiResponses,
        &v(r#"{"input":"hello","previous_response_id":"resp_1"}"#),
    );
    assert_eq!(
        (
            k.first.as_str(),
            k.length,
            k.previous_response_id.as_deref()
        ),
        ("\"hello\"", 1, Some("resp_1"))
    );
    // A LangChain chat model's callback: a batch of conversations, the first one keyed.
    let k = prompt_key(
        Api::LangChain,
        &v(r#"{"messages":[[{"type":"human","content":"a"},{"type":"ai","content":"b"}]]}"#),
    );
    assert_eq!(
        (k.first.as_str(), k.length),
        (r#"{"type":"human","content":"a"}"#, 2)
    );
}

#[test]
fn nothing_a_codec_is_handed_makes_it_panic() {
    let odd = [
        "null",
        "1",
        "\"s\"",
        "[]",
        "{}",
        r#"{"choices":7,"output":"x","content":{},"generations":[1,[2]],"usage":[]}"#,
        r#"{"type":"content_block_delta","index":"x","delta":{"type":"input_json_delta","partial_json":5}}"#,
    ];
    for api in Api::ALL {
        for text in odd {
            let value = v(text);
            let _ = decode_response(api, &value);
            let _ = request_input(api, &value);
            let _ = prompt_key(api, &value);
            let _ = injected_reply(api, value.clone(), &value);
            let mut s = StreamDecoder::new(api);
            let _ = s.push(&value);
            let _ = s.finish(Some(&value));
        }
    }
}

#[test]
fn langchain_js_result_serialized_by_json_stringify() {
    // What JSON.stringify makes of a LangChain.js LLMResult: the message as a serialized
    // Serializable, the result's fields in camelCase.
    let d = decode_response(
        Api::LangChain,
        &v(
            r#"{"generations":[[{"text":"","generationInfo":{"finish_reason":"tool_calls"},
            "message":{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessageChunk"],
            "kwargs":{"content":"","tool_calls":[{"id":"c1","name":"search","args":{"q":"x"},"type":"tool_call"}],
            "usage_metadata":{"input_tokens":9,"output_tokens":2,"total_tokens":11}}}}]],"llmOutput":{"model_name":"fake-1"}}"#,
        ),
    );
    assert_eq!(
        out(&d),
        r#"{"text":"","toolCalls":[{"id":"c1","name":"search","input":{"q":"x"}}],"finishReason":"tool-calls","rawFinishReason":"tool_calls","model":"fake-1"}"#
    );
    assert_eq!(
        usage(&d),
        r#"{"inputTokens":9,"outputTokens":2,"inclusive":true}"#
    );
}

#[test]
fn langchain_js_messages_are_recorded_plain() {
    let input = frameworks::request_input(
        Api::LangChain,
        &v(
            r#"{"model":"fake-1","messages":[[{"lc":1,"type":"constructor","id":["langchain_core","messages","HumanMessage"],"kwargs":{"content":"hi"}}]]}"#,
        ),
    );
    assert_eq!(
        to_string(&Value::Object(input)),
        r#"{"provider":"langchain","model":"fake-1","messages":[[{"content":"hi","type":"human"}]]}"#
    );
}

#[test]
fn langchain_js_stream_chunks_text_and_tool_args() {
    // handleLLMNewToken's ChatGenerationChunk as JSON.stringify makes it: text pieces, then
    // the tool call's arguments in `tool_call_chunks` (text empty).
    let (deltas, d) = stream(
        Api::LangChain,
        &[
            r#""Hel""#,
            r#"{"text":"lo","message":{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessageChunk"],"kwargs":{"content":"lo"}}}"#,
            r#"{"text":"","message":{"lc":1,"type":"constructor","id":["langchain_core","messages","AIMessageChunk"],"kwargs":{"content":"","tool_call_chunks":[{"name":"lookup","args":"{\"q\":","id":"c1","index":0}]}}}"#,
            r#"{"text":"","message":{"content":"","tool_call_chunks":[{"args":"\"x\"}","index":0}]}}"#,
        ],
    );
    assert_eq!(joined(&deltas, TokenChannel::Text), "Hello");
    assert_eq!(joined(&deltas, TokenChannel::ToolArgs), r#"{"q":"x"}"#);
    assert_eq!(d.output.get("text").and_then(Value::as_str), Some("Hello"));
}
