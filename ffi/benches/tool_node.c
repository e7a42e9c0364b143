/*
 * One tool node (start + finish through gm_step, 1 KB input and output from
 * bench/sample-1k.json) through the C ABI, in one run of a recording (detached) session.
 * Prints "c_abi_ns_per_node <ns>" for ffi/benches/tool_node.rs to show side by side.
 * Usage: bench_tool_node <sample json> [iterations]
 */
#define _POSIX_C_SOURCE 199309L
#include "graphmind.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define S(lit) lit, (sizeof(lit) - 1)

/* The calling thread's CPU time: the cost to the application thread, not who else the
 * shared machine scheduled (the session's own worker included). */
static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void ok(gm_error *e) {
    if (e != NULL) {
        gm_str m = gm_error_message(e);
        fprintf(stderr, "bench: %.*s\n", (int)m.len, m.ptr);
        exit(1);
    }
}

static void one_node(gm_session *s, gm_run *run, const char *json, size_t len) {
    gm_step *step = NULL;
    gm_gate *gate = NULL;
    gm_decision *d = NULL;
    gm_next next;
    ok(gm_step_start(s, run, S("tool"), S("lookup"), NULL, 0, json, len, true, &step));
    ok(gm_step_before(step, &gate));
    ok(gm_gate_wait(gate, 0, &d));
    gm_gate_free(gate);
    ok(gm_step_on_before(step, d, &next));
    gm_decision_free(d);
    gm_string_free(&next.value);
    ok(gm_step_after(step, &gate));
    ok(gm_gate_wait(gate, 0, &d));
    gm_gate_free(gate);
    ok(gm_step_on_after(step, d, json, len, &next));
    gm_decision_free(d);
    gm_string_free(&next.value);
    gm_step_free(step);
}

int main(int argc, char **argv) {
    FILE *f;
    char *json;
    long len;
    long iters = argc > 2 ? atol(argv[2]) : 10000, i, round;
    gm_options *opts = NULL;
    gm_env *env = gm_env_new();
    gm_session *s = NULL;
    gm_run *run = NULL;
    double best = 1e30;
    if (argc < 2) return 2;
    f = fopen(argv[1], "rb");
    if (f == NULL) return 2;
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    fseek(f, 0, SEEK_SET);
    json = (char *)malloc((size_t)len);
    if (json == NULL || fread(json, 1, (size_t)len, f) != (size_t)len) return 2;
    fclose(f);
    ok(gm_options_from_json(S("{\"url\":\"ws://127.0.0.1:9/ingest\",\"enabled\":true,\"appName\":\"bench\"}"), &opts));
    ok(gm_session_new(opts, env, GM_FLAVOR_NATIVE, NULL, NULL, &s));
    ok(gm_session_start_run(s, S("bench"), NULL, 0, &run));
    for (i = 0; i < 2000; i++) one_node(s, run, json, (size_t)len); /* warm-up */
    gm_session_flush(s, 60000);
    for (round = 0; round < 5; round++) {
        double t0 = now_ns(), per;
        for (i = 0; i < iters; i++) one_node(s, run, json, (size_t)len);
        per = (now_ns() - t0) / (double)iters;
        if (per < best) best = per;
        gm_session_flush(s, 60000); /* drained between rounds: nothing is dropped */
    }
    printf("c_abi_ns_per_node %.0f\n", best);
    ok(gm_session_finish_run(s, run, GM_OUTCOME_OK, NULL, 0, NULL, 0));
    gm_session_dispose(s, 1000);
    gm_run_free(run);
    gm_session_free(s);
    gm_options_free(opts);
    gm_env_free(env);
    free(json);
    return 0;
}
