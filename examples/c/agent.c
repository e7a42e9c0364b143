/*
 * A small agent with a tool loop, instrumented through libgraphmind's C ABI.
 *
 * A fake "planner" (an llm node that streams its thought) asks for the tool `lookup` a few
 * times; every tool call is one gm_step: node.started, the `before` gate, the C function,
 * the `after` gate, node.finished. A debugger (graphmind serve's /ws/ui) can hold each call
 * and continue, retry, inject an output or abort. Prints one line per step to stdout:
 *   RUN <run id> / TOOL <i> <result JSON> / DONE <status>
 * Configure with the environment (GRAPHMIND_URL=ws://127.0.0.1:4747/ingest, GRAPHMIND_DISABLED=1, ...).
 * Build: cc -std=c99 -Wall -Wextra -Werror -pedantic agent.c $(pkg-config --cflags --libs graphmind)
 */
#include <graphmind.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(lit) lit, (sizeof(lit) - 1)

static int report(gm_error *e, const char *what) {
    if (e == NULL) return 0;
    {
        gm_str m = gm_error_message(e);
        fprintf(stderr, "agent: %s: %.*s\n", what, (int)m.len, m.ptr);
    }
    gm_error_free(e);
    return 1;
}

/* The tool itself: plain C. Writes its JSON result into out. */
static void lookup_tool(const char *input_json, char *out, size_t cap) {
    const char *q = strstr(input_json, "\"query\":\"");
    int hits = (int)strlen(input_json) % 7 + 1;
    char query[64] = "?";
    if (q != NULL) {
        size_t n = 0;
        q += 9;
        while (q[n] != '\0' && q[n] != '"' && n + 1 < sizeof query) {
            query[n] = q[n];
            n++;
        }
        query[n] = '\0';
    }
    snprintf(out, cap, "{\"query\":\"%s\",\"hits\":%d}", query, hits);
}

/* Waits for a gate's decision in 100 ms slices (an app could check for shutdown here). */
static gm_decision *wait_decision(gm_gate *gate) {
    gm_decision *d = NULL;
    while (d == NULL) {
        if (report(gm_gate_wait(gate, 100, &d), "gate wait")) return NULL;
    }
    return d;
}

/* One gated tool call; returns the value the agent goes on with (caller frees), or NULL
 * when the run was aborted. */
static char *call_tool(gm_session *s, gm_run *run, const char *parent, size_t parent_len, const char *input) {
    gm_step *step = NULL;
    gm_gate *gate = NULL;
    gm_decision *d;
    gm_next next;
    char output[256];
    char *result = NULL;
    const char *live = input;
    if (report(gm_step_start(s, run, S("tool"), S("lookup"), parent, parent_len, input, strlen(input), true, &step), "step"))
        return NULL;
    report(gm_step_before(step, &gate), "before");
    d = wait_decision(gate);
    gm_gate_free(gate);
    report(gm_step_on_before(step, d, &next), "on_before");
    gm_decision_free(d);
    while (next.kind == GM_NEXT_RUN) {
        if (next.value.ptr != NULL) live = next.value.ptr; /* an edited input */
        lookup_tool(live, output, sizeof output);
        report(gm_step_after(step, &gate), "after");
        d = wait_decision(gate);
        gm_gate_free(gate);
        gm_string_free(&next.value);
        live = input;
        report(gm_step_on_after(step, d, output, strlen(output), &next), "on_after");
        gm_decision_free(d);
    }
    if (next.kind == GM_NEXT_RETURN_RESULT) {
        result = (char *)malloc(strlen(output) + 1);
        if (result != NULL) strcpy(result, output);
    } else if (next.kind == GM_NEXT_RETURN_INJECTED) {
        result = (char *)malloc(next.value.len + 1);
        if (result != NULL) memcpy(result, next.value.ptr, next.value.len + 1);
    }
    gm_string_free(&next.value);
    gm_step_free(step);
    return result; /* NULL: GM_NEXT_ABORT */
}

int main(void) {
    const char *queries[] = {"weather in Paris", "population of Lyon"};
    gm_options *opts;
    gm_session *s = NULL;
    gm_run *run = NULL;
    gm_node *planner = NULL;
    gm_str run_id, planner_id;
    size_t i;
    int aborted = 0;

    if (gm_abi_version() != GM_ABI_VERSION) {
        fprintf(stderr, "agent: libgraphmind ABI %u, header %u\n", gm_abi_version(), (unsigned)GM_ABI_VERSION);
        return 2;
    }
    opts = gm_options_new();
    report(gm_options_set_app_name(opts, S("c-agent")), "app name");
    if (report(gm_session_new(opts, NULL, GM_FLAVOR_NATIVE, NULL, NULL, &s), "session")) return 1;
    gm_options_free(opts);
    gm_atfork_register(s);
    if (gm_session_is_enabled(s) && !gm_session_ready(s, 3000)) fprintf(stderr, "agent: no debugger attached, recording anyway\n");

    report(gm_session_start_run(s, S("c-agent"), S("{\"lang\":\"c\"}"), &run), "run");
    run_id = gm_run_id(run);
    printf("RUN %.*s\n", (int)run_id.len, run_id.ptr);
    fflush(stdout);

    report(gm_node_new(S("llm"), S("planner"), NULL, 0, &planner), "node");
    planner_id = gm_node_instance_id(planner);
    report(gm_session_node_started(s, run, planner, NULL, 0, S("{\"goal\":\"answer two questions\"}")), "planner");
    report(gm_session_node_token(s, run, planner, GM_CHANNEL_TEXT, S("I will look things up.")), "token");

    for (i = 0; i < sizeof queries / sizeof queries[0] && !aborted; i++) {
        char input[128];
        char *result;
        snprintf(input, sizeof input, "{\"query\":\"%s\"}", queries[i]);
        result = call_tool(s, run, planner_id.ptr, planner_id.len, input);
        if (result == NULL || gm_run_is_aborted(run)) {
            aborted = 1;
        } else {
            printf("TOOL %u %s\n", (unsigned)i, result);
            fflush(stdout);
        }
        free(result);
    }
    report(gm_session_node_finished(s, run, planner, S("\"done\""), 1.5, false), "planner done");
    report(gm_session_finish_run(s, run, aborted ? GM_OUTCOME_ABORTED : GM_OUTCOME_OK, NULL, 0, NULL, 0), "finish");
    printf("DONE %s\n", aborted ? "aborted" : "ok");
    gm_session_flush(s, 2000);
    gm_session_dispose(s, 2000);
    gm_node_free(planner);
    gm_run_free(run);
    gm_session_free(s);
    return 0;
}
