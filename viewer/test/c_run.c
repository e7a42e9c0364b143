/*
 * A C program on the real C ABI (libgraphmind.so) that records what a C app records: a run
 * with no root node. Three top-level calls in order (tool search, llm draft, tool save),
 * and one tool call (check) inside draft, its parent given as draft's instance id.
 * Prints `RUN <run id>`. GRAPHMIND_URL says where the debugger is.
 */
#define _POSIX_C_SOURCE 200809L
#include <graphmind.h>

#include <stdio.h>
#include <unistd.h>

#define S(lit) lit, (sizeof(lit) - 1)

static int failed(gm_error *e, const char *what) {
    if (e == NULL) return 0;
    {
        gm_str m = gm_error_message(e);
        fprintf(stderr, "c_run: %s: %.*s\n", what, (int)m.len, m.ptr);
    }
    gm_error_free(e);
    return 1;
}

static int call(gm_session *s, gm_run *run, const char *kind, size_t kl, const char *name, size_t nl, const gm_node *parent) {
    gm_node *n = NULL;
    gm_str pid = {0};
    int bad;
    if (failed(gm_node_new(kind, kl, name, nl, NULL, 0, &n), "node")) return 1;
    if (parent != NULL) pid = gm_node_instance_id(parent);
    bad = failed(gm_session_node_started(s, run, n, parent ? pid.ptr : NULL, parent ? pid.len : 0, S("{\"q\":1}")), "started");
    bad |= failed(gm_session_node_finished(s, run, n, S("{\"ok\":true}"), 2.0, false), "finished");
    gm_node_free(n);
    return bad;
}

int main(void) {
    gm_options *opts = gm_options_new();
    gm_env *env = gm_env_from_process();
    gm_session *s = NULL;
    gm_run *run = NULL;
    gm_node *draft = NULL;
    gm_str id, did;
    int bad = 0;
    alarm(60);
    failed(gm_options_set_app_name(opts, S("c-app")), "app name");
    if (failed(gm_session_new(opts, env, GM_FLAVOR_NATIVE, NULL, NULL, &s), "session")) return 1;
    gm_options_free(opts);
    gm_env_free(env);
    if (!gm_session_ready(s, 5000)) {
        fprintf(stderr, "c_run: not attached\n");
        return 1;
    }
    if (failed(gm_session_start_run(s, S("c-app"), NULL, 0, &run), "start run")) return 1;
    id = gm_run_id(run);
    bad |= call(s, run, S("tool"), S("search"), NULL);
    bad |= failed(gm_node_new(S("llm"), S("draft"), NULL, 0, &draft), "draft");
    if (bad) return 1;
    did = gm_node_instance_id(draft);
    (void)did;
    bad |= failed(gm_session_node_started(s, run, draft, NULL, 0, S("{\"prompt\":\"hi\"}")), "draft started");
    bad |= call(s, run, S("tool"), S("check"), draft);
    bad |= failed(gm_session_node_finished(s, run, draft, S("\"text\""), 5.0, false), "draft finished");
    gm_node_free(draft);
    bad |= call(s, run, S("tool"), S("save"), NULL);
    bad |= failed(gm_session_finish_run(s, run, GM_OUTCOME_OK, NULL, 0, NULL, 0), "finish run");
    gm_session_flush(s, 3000);
    printf("RUN %.*s\n", (int)id.len, id.ptr);
    fflush(stdout);
    gm_run_free(run);
    gm_session_dispose(s, 5000);
    gm_session_free(s);
    return bad;
}
