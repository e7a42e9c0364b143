/*
 * The header's promises, tried the way a careless or hostile C caller breaks them, against
 * a real `graphmind serve` (GRAPHMIND_URL; started with its default pause-on-error, so an
 * error gate holds while attached). Built twice by ffi/tests/examples.rs: with
 * -fsanitize=address,undefined (AddressSanitizer, LeakSanitizer, UBSan; any report fails
 * the run) and plain, run under valgrind memcheck.
 *
 * "Nothing recorded" is read from gm_session_stats: `seq` is the next event's sequence
 * number, so a refused call must leave it (and `held_gates`) unchanged. Prints one
 * `ok <name>` line per check and `RUN <id>` for the run the test then reads back from the
 * server; exits non-zero at the first broken promise.
 */
#include <graphmind.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(lit) lit, (sizeof(lit) - 1)

static int failures = 0;

static void check(int ok, const char *name) {
    if (ok) {
        printf("ok %s\n", name);
    } else {
        printf("FAIL %s\n", name);
        failures++;
    }
}

/* The code of `e` (GM_OK for NULL), freeing it. */
static gm_code code(gm_error *e) {
    gm_code c = gm_error_code(e);
    if (e != NULL) {
        gm_str m = gm_error_message(e);
        /* The message is a borrowed, NUL-terminated view too. */
        if (strlen(m.ptr) != m.len) failures++;
        fprintf(stderr, "contract: refused (%d): %s\n", (int)c, m.ptr);
    }
    gm_error_free(e);
    return c;
}

static uint64_t seq_of(const gm_session *s) {
    gm_stats st;
    memset(&st, 0, sizeof st);
    if (gm_session_stats(s, &st) != NULL) return UINT64_MAX;
    return st.seq;
}

static uint64_t held_of(const gm_session *s) {
    gm_stats st;
    memset(&st, 0, sizeof st);
    if (gm_session_stats(s, &st) != NULL) return UINT64_MAX;
    return st.held_gates;
}

/* A borrowed view keeps the header's promise: ptr is NUL-terminated at len. */
static int terminated(gm_str v) {
    return v.ptr != NULL && strlen(v.ptr) == v.len;
}

static gm_decision *take(gm_gate *g) {
    gm_decision *d = NULL;
    if (code(gm_gate_wait(g, 5000, &d)) != GM_OK) return NULL;
    return d;
}

int main(void) {
    gm_options *opts = gm_options_new();
    gm_session *s = NULL;
    gm_session *unused = (gm_session *)0x1;
    gm_run *run = NULL;
    gm_node *node = NULL;
    gm_step *step = NULL;
    gm_gate *gate = NULL;
    gm_decision *d = NULL;
    gm_next next;
    gm_string text = {NULL, 0};
    gm_options *opt_out = (gm_options *)0x1;
    gm_env *env_out = (gm_env *)0x1;
    gm_json_doc *doc_out = (gm_json_doc *)0x1;
    uint64_t seq;

    /* Enums cross as integers; unknown values are refused, nothing set or created. */
    check(code(gm_options_set_enabled(opts, 7)) == GM_INVALID_ARGUMENT, "enabled-7-refused");
    check(code(gm_options_set_enabled(opts, -1)) == GM_INVALID_ARGUMENT, "enabled-minus1-refused");
    check(code(gm_config_resolve_json(opts, NULL, 4, &text)) == GM_INVALID_ARGUMENT && text.ptr == NULL,
          "flavor-4-refused-by-resolve");
    check(code(gm_session_new(opts, NULL, 9, NULL, NULL, &unused)) == GM_INVALID_ARGUMENT &&
              unused == (gm_session *)0x1,
          "flavor-9-refused-by-session-new");
    check(code(gm_options_set_app_name(opts, S("c-contract"))) == GM_OK, "app-name");

    /* A NULL out pointer: refused before anything happens (LeakSanitizer: nothing leaks). */
    check(code(gm_session_new(opts, NULL, GM_FLAVOR_NATIVE, NULL, NULL, NULL)) == GM_NULL_ARGUMENT,
          "session-new-null-out");
    check(code(gm_options_from_json(S("{\"url\":\"x\"}"), NULL)) == GM_NULL_ARGUMENT, "options-null-out");
    check(code(gm_env_from_json(S("{\"A\":\"1\"}"), NULL)) == GM_NULL_ARGUMENT, "env-null-out");
    check(code(gm_node_new(S("tool"), S("x"), NULL, 0, NULL)) == GM_NULL_ARGUMENT, "node-null-out");
    check(code(gm_json_parse(S("[1,2]"), NULL)) == GM_NULL_ARGUMENT, "json-parse-null-out");
    check(code(gm_loop_guard_new(NULL, 0, NULL)) == GM_NULL_ARGUMENT, "loop-guard-null-out");
    check(code(gm_config_resolve_json(opts, NULL, GM_FLAVOR_NATIVE, NULL)) == GM_NULL_ARGUMENT,
          "resolve-null-out");
    check(code(gm_canonical_json(S("{\"b\":1,\"a\":2}"), NULL)) == GM_NULL_ARGUMENT, "canonical-null-out");
    check(code(gm_fingerprint(S("tool:x"), S("{\"a\":1}"), NULL, 0, NULL)) == GM_NULL_ARGUMENT,
          "fingerprint-null-out");
    check(code(gm_serialize_payload(S("{\"a\":1}"), 0, NULL, 0, NULL)) == GM_NULL_ARGUMENT,
          "serialize-null-out");
    /* Error paths with a valid out pointer leave it alone. */
    check(code(gm_options_from_json(S("[1]"), &opt_out)) == GM_INVALID_ARGUMENT && opt_out == (gm_options *)0x1,
          "options-not-object");
    check(code(gm_env_from_json(S("{"), &env_out)) == GM_INVALID_JSON && env_out == (gm_env *)0x1, "env-bad-json");
    check(code(gm_json_parse(S("[1,"), &doc_out)) == GM_INVALID_JSON && doc_out == (gm_json_doc *)0x1,
          "json-parse-bad");

    /* Integers: exact from -2^63 to 2^63-1, past that a double as JSON.parse reads it
     * (docs/c.md, "Values"). */
    check(code(gm_canonical_json(S("[9007199254740993,9223372036854775807,-9223372036854775808]"), &text)) == GM_OK &&
              strcmp(text.ptr, "[9007199254740993,9223372036854775807,-9223372036854775808]") == 0,
          "integers-in-int64-range-exact");
    gm_string_free(&text);
    check(code(gm_canonical_json(S("[9223372036854775808,18446744073709551617]"), &text)) == GM_OK &&
              strcmp(text.ptr, "[9223372036854776000,18446744073709552000]") == 0,
          "integers-past-int64-range-rounded");
    gm_string_free(&text);

    if (code(gm_session_new(opts, NULL, GM_FLAVOR_NATIVE, NULL, NULL, &s)) != GM_OK) return 1;
    gm_options_free(opts);
    check(gm_session_ready(s, 5000), "attached");

    /* start_run with NULL out: no run.started, no run left `running`. */
    seq = seq_of(s);
    check(code(gm_session_start_run(s, S("ghost"), NULL, 0, NULL)) == GM_NULL_ARGUMENT && seq_of(s) == seq,
          "start-run-null-out-records-nothing");

    if (code(gm_session_start_run(s, S("contract"), NULL, 0, &run)) != GM_OK) return 1;
    check(terminated(gm_run_id(run)), "run-id-terminated");
    printf("RUN %s\n", gm_run_id(run).ptr);
    if (code(gm_node_new(S("tool"), S("probe"), NULL, 0, &node)) != GM_OK) return 1;
    check(terminated(gm_node_id(node)), "node-id-terminated");
    check(terminated(gm_node_instance_id(node)), "node-instance-id-terminated");

    /* Bad enum values on recording calls: refused, nothing recorded. */
    seq = seq_of(s);
    check(code(gm_session_node_token(s, run, node, 3, S("x"))) == GM_INVALID_ARGUMENT && seq_of(s) == seq,
          "channel-3-refused");
    check(code(gm_session_gate(s, run, 3, node, false, NULL, 0, &gate)) == GM_INVALID_ARGUMENT && gate == NULL &&
              seq_of(s) == seq,
          "point-3-refused");
    check(code(gm_session_finish_run(s, run, 3, NULL, 0, NULL, 0)) == GM_INVALID_ARGUMENT && seq_of(s) == seq,
          "outcome-3-refused");

    /* graph.hint must match the wire schema (the server would drop it: a seq hole). */
    check(code(gm_session_emit(s, run, S("graph.hint"), S("[1,2]"))) == GM_INVALID_ARGUMENT && seq_of(s) == seq,
          "graph-hint-array-refused");
    check(code(gm_session_emit(s, run, S("graph.hint"), S("{\"nodes\":7}"))) == GM_INVALID_ARGUMENT &&
              seq_of(s) == seq,
          "graph-hint-bad-nodes-refused");
    check(code(gm_session_emit(s, run, S("exec.paused"), S("{}"))) == GM_INVALID_ARGUMENT && seq_of(s) == seq,
          "emit-gate-event-refused");
    check(code(gm_session_emit(s, run, S("graph.hint"), S("{\"nodes\":[]}"))) == GM_OK && seq_of(s) == seq + 1,
          "graph-hint-valid-accepted");

    /* gate(ERROR) with NULL out while attached: no exec.paused, no gate held. */
    check(code(gm_session_node_error(s, run, node, S("E"), S("boom"), NULL, 0)) == GM_OK, "node-error");
    seq = seq_of(s);
    check(code(gm_session_gate(s, run, GM_POINT_ERROR, node, false, NULL, 0, NULL)) == GM_NULL_ARGUMENT &&
              seq_of(s) == seq && held_of(s) == 0,
          "gate-null-out-holds-nothing");
    /* The same gate with an out pointer holds (pause-on-error): its pause id is terminated. */
    if (code(gm_session_gate(s, run, GM_POINT_ERROR, node, false, NULL, 0, &gate)) == GM_OK) {
        check(gm_gate_is_held(gate) && terminated(gm_gate_pause_id(gate)), "pause-id-terminated");
        gm_gate_free(gate); /* released with continue */
        gate = NULL;
    }
    check(code(gm_session_node_finished(s, run, node, S("null"), 1.0, false)) == GM_OK, "node-finished");

    /* A step driven out of order: GM_INVALID_STATE, nothing recorded. */
    if (code(gm_step_start(s, run, S("tool"), S("stepper"), NULL, 0, S("{\"q\":1}"), true, &step)) != GM_OK) return 1;
    check(terminated(gm_step_instance_id(step)), "step-instance-id-terminated");
    seq = seq_of(s);
    check(code(gm_step_after(step, &gate)) == GM_INVALID_STATE && gate == NULL && seq_of(s) == seq,
          "after-without-before");
    check(code(gm_step_error(step, S("E"), S("m"), NULL, 0, &gate)) == GM_INVALID_STATE && seq_of(s) == seq,
          "error-without-before");
    if (code(gm_step_before(step, &gate)) != GM_OK) return 1;
    check(code(gm_step_before(step, &gate)) == GM_INVALID_STATE, "before-twice");
    d = take(gate);
    gm_gate_free(gate);
    gate = NULL;
    check(code(gm_step_on_before(step, d, &next)) == GM_OK && next.kind == GM_NEXT_RUN, "on-before");
    gm_string_free(&next.value);
    check(code(gm_step_on_before(step, d, &next)) == GM_INVALID_STATE, "on-before-twice");
    check(code(gm_step_on_after(step, d, S("{}"), &next)) == GM_INVALID_STATE, "on-after-without-after");
    if (code(gm_step_after(step, &gate)) != GM_OK) return 1;
    gm_decision_free(d);
    d = take(gate);
    gm_gate_free(gate);
    gate = NULL;
    check(code(gm_step_on_after(step, d, S("{\"r\":1}"), &next)) == GM_OK && next.kind == GM_NEXT_RETURN_RESULT,
          "on-after");
    gm_string_free(&next.value);
    seq = seq_of(s);
    check(code(gm_step_on_after(step, d, S("{\"r\":2}"), &next)) == GM_INVALID_STATE && seq_of(s) == seq,
          "on-after-twice");
    check(code(gm_step_error(step, S("E"), S("late"), NULL, 0, &gate)) == GM_INVALID_STATE && gate == NULL &&
              seq_of(s) == seq && held_of(s) == 0,
          "error-after-finished-records-nothing");
    check(code(gm_step_on_ungated_error(step, false, &next)) == GM_INVALID_STATE, "ungated-after-finished");
    gm_decision_free(d);
    gm_step_free(step);
    step = NULL;
    check(seq_of(s) == seq, "freeing-a-finished-step-records-nothing");

    /* finish_run twice: the first wins; the second and any node event after it refused. */
    check(code(gm_session_finish_run(s, run, GM_OUTCOME_OK, NULL, 0, NULL, 0)) == GM_OK, "finish-run");
    seq = seq_of(s);
    check(code(gm_session_finish_run(s, run, GM_OUTCOME_ERROR, S("E"), S("late"))) == GM_INVALID_STATE &&
              seq_of(s) == seq,
          "finish-run-twice");
    check(code(gm_session_node_started(s, run, node, NULL, 0, NULL, 0)) == GM_INVALID_STATE && seq_of(s) == seq,
          "node-after-run-finished");
    check(gm_session_flush(s, 5000), "flushed");

    /* After dispose: every recording call is GM_INVALID_STATE. */
    gm_session_dispose(s, 2000);
    {
        gm_run *late = NULL;
        check(code(gm_session_start_run(s, S("late"), NULL, 0, &late)) == GM_INVALID_STATE && late == NULL,
              "start-run-after-dispose");
        check(code(gm_session_node_started(s, NULL, node, NULL, 0, NULL, 0)) == GM_INVALID_STATE,
              "node-after-dispose");
        check(code(gm_session_emit(s, NULL, S("graph.hint"), S("{\"nodes\":[]}"))) == GM_INVALID_STATE,
              "emit-after-dispose");
        check(code(gm_step_start(s, NULL, S("tool"), S("late"), NULL, 0, NULL, 0, false, &step)) ==
                      GM_INVALID_STATE &&
                  step == NULL,
              "step-after-dispose");
        check(code(gm_session_gate(s, NULL, GM_POINT_BEFORE, node, false, NULL, 0, &gate)) == GM_INVALID_STATE &&
                  gate == NULL,
              "gate-after-dispose");
    }
    gm_node_free(node);
    gm_run_free(run);
    gm_session_free(s);
    printf("%s %d\n", failures ? "FAILED" : "PASSED", failures);
    return failures ? 1 : 0;
}
