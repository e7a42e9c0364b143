/*
 * What a C program records when it ends right after its last call (no gm_session_ready):
 *   recording short         one run of ten tool calls, gm_session_flush, dispose, free;
 *                           prints `RUN <run id> flushed=<0|1>`
 *   recording warn          three identical tool calls (loop guard in warn mode), then
 *                           dispose and free: the warning must reach stderr, status 0
 *   recording flood <n>     attached first (gm_session_ready), one run of <n> tool calls
 *                           with 1 KB inputs as fast as the ABI takes them; prints `RUN <run id> emitted=<events> lost=<n>
 *                           max_call_us=<slowest call>`
 * GRAPHMIND_URL says where the debugger is. Exits non-zero when a call fails.
 */
#define _POSIX_C_SOURCE 200809L
#include <graphmind.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S(lit) lit, (sizeof(lit) - 1)

static int failed(gm_error *e, const char *what) {
    if (e == NULL) return 0;
    {
        gm_str m = gm_error_message(e);
        fprintf(stderr, "recording: %s: %.*s\n", what, (int)m.len, m.ptr);
    }
    gm_error_free(e);
    return 1;
}

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One tool call: started + finished with `input` and a small output. */
static int tool_call(gm_session *s, gm_run *run, const char *input, size_t len) {
    gm_node *tool = NULL;
    int bad = failed(gm_node_new(S("tool"), S("lookup"), NULL, 0, &tool), "node");
    if (bad) return 1;
    bad |= failed(gm_session_node_started(s, run, tool, NULL, 0, input, len), "started");
    bad |= failed(gm_session_node_finished(s, run, tool, S("{\"hits\":1}"), 0.01, false), "finished");
    gm_node_free(tool);
    return bad;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "short";
    long calls = argc > 2 ? atol(argv[2]) : 10;
    gm_options *opts = gm_options_new();
    gm_env *env = gm_env_from_process();
    gm_session *s = NULL;
    gm_run *run = NULL;
    gm_stats stats;
    gm_str id;
    int bad = 0;
    long i;
    double slowest = 0;
    alarm(120);
    failed(gm_options_set_app_name(opts, S("c-recording")), "app name");
    if (failed(gm_session_new(opts, env, GM_FLAVOR_NATIVE, NULL, NULL, &s), "session")) return 1;
    gm_options_free(opts);
    gm_env_free(env);

    if (strcmp(mode, "warn") == 0) {
        gm_run *implicit = NULL;
        if (failed(gm_session_start_run(s, S("warn"), NULL, 0, &implicit), "start run")) return 1;
        for (i = 0; i < 3; i++) bad |= tool_call(s, implicit, S("{\"q\":\"same\"}"));
        gm_run_free(implicit);
        gm_session_dispose(s, 2000);
        gm_session_free(s);
        return bad;
    }

    if (strcmp(mode, "flood") == 0 && !gm_session_ready(s, 5000)) {
        fprintf(stderr, "recording: not attached\n");
        return 1;
    }
    if (failed(gm_session_start_run(s, S("c-short"), NULL, 0, &run), "start run")) return 1;
    id = gm_run_id(run);
    if (strcmp(mode, "flood") == 0) {
        char input[1100];
        size_t len;
        memset(input, 0, sizeof input);
        strcpy(input, "{\"q\":\"");
        len = strlen(input);
        while (len < 1024) input[len++] = 'x';
        strcpy(input + len, "\"}");
        len += 2;
        for (i = 0; i < calls && !bad; i++) {
            double t0 = now_us();
            bad |= tool_call(s, run, input, len);
            t0 = now_us() - t0;
            if (t0 > slowest) slowest = t0;
        }
    } else {
        for (i = 0; i < calls && !bad; i++) bad |= tool_call(s, run, S("{\"q\":\"short\"}"));
    }
    bad |= failed(gm_session_finish_run(s, run, GM_OUTCOME_OK, NULL, 0, NULL, 0), "finish run");
    if (strcmp(mode, "flood") == 0) {
        bad |= failed(gm_session_stats(s, &stats), "stats");
        printf("RUN %.*s emitted=%llu lost=%llu max_call_us=%.0f\n", (int)id.len, id.ptr,
               (unsigned long long)stats.seq, (unsigned long long)stats.lost, slowest);
    } else {
        int flushed = gm_session_flush(s, 3000) ? 1 : 0;
        printf("RUN %.*s flushed=%d\n", (int)id.len, id.ptr, flushed);
    }
    fflush(stdout);
    gm_run_free(run);
    gm_session_dispose(s, 5000);
    gm_session_free(s);
    return bad;
}
