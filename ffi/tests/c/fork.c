/*
 * The fork hooks through the C ABI: a process attached to a real `graphmind serve`
 * registers its session with gm_atfork_register, records a node, forks, and both sides
 * record a run of their own. The child must not believe itself attached (its parent's
 * link is not its own): it reconnects through a fresh worker. Prints, in this order:
 *   PARENT <run id> / CHILD <run id> attached-after-fork=<0|1> ready=<0|1> / PARENT-AFTER attached=<0|1>
 * Exits non-zero when a call fails or the child fails.
 */
#define _POSIX_C_SOURCE 200809L
#include <graphmind.h>

#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define S(lit) lit, (sizeof(lit) - 1)

static int failed(gm_error *e, const char *what) {
    if (e == NULL) return 0;
    {
        gm_str m = gm_error_message(e);
        fprintf(stderr, "fork: %s: %.*s\n", what, (int)m.len, m.ptr);
    }
    gm_error_free(e);
    return 1;
}

/* One run with one tool node; prints `<label> <run id>` and returns 0 on success. */
static int one_run(gm_session *s, const char *label, const char *name, size_t name_len) {
    gm_run *run = NULL;
    gm_node *tool = NULL;
    gm_str id;
    int bad = 0;
    if (failed(gm_session_start_run(s, name, name_len, NULL, 0, &run), "start run")) return 1;
    id = gm_run_id(run);
    printf("%s %.*s", label, (int)id.len, id.ptr);
    bad |= failed(gm_node_new(S("tool"), S("lookup"), NULL, 0, &tool), "node");
    bad |= failed(gm_session_node_started(s, run, tool, NULL, 0, S("{\"q\":\"fork\"}")), "started");
    bad |= failed(gm_session_node_finished(s, run, tool, S("{\"hits\":1}"), 1.0, false), "finished");
    bad |= failed(gm_session_finish_run(s, run, GM_OUTCOME_OK, NULL, 0, NULL, 0), "finish run");
    gm_node_free(tool);
    gm_run_free(run);
    return bad;
}

int main(void) {
    gm_options *opts = gm_options_new();
    gm_session *s = NULL;
    pid_t child;
    int status = 0;
    alarm(60);
    failed(gm_options_set_app_name(opts, S("c-fork")), "app name");
    if (failed(gm_session_new(opts, NULL, GM_FLAVOR_NATIVE, NULL, NULL, &s), "session")) return 1;
    gm_options_free(opts);
    if (!gm_atfork_register(s)) {
        fprintf(stderr, "fork: gm_atfork_register refused\n");
        return 1;
    }
    if (!gm_session_ready(s, 5000)) {
        fprintf(stderr, "fork: the parent did not attach\n");
        return 1;
    }
    if (one_run(s, "PARENT", S("parent"))) return 1;
    printf("\n");
    fflush(stdout);

    child = fork();
    if (child < 0) {
        perror("fork");
        return 1;
    }
    if (child == 0) {
        int attached_after_fork;
        alarm(60); /* alarms are not inherited */
        attached_after_fork = gm_session_is_attached(s) ? 1 : 0;
        int bad = one_run(s, "CHILD", S("child"));
        int ready = gm_session_ready(s, 5000) ? 1 : 0;
        printf(" attached-after-fork=%d ready=%d\n", attached_after_fork, ready);
        fflush(stdout);
        bad |= !gm_session_flush(s, 5000);
        gm_session_dispose(s, 2000);
        gm_session_free(s);
        return bad;
    }
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "fork: the child failed (status %d)\n", status);
        return 1;
    }
    /* The parent's locks were released after the fork: it records and flushes as before. */
    if (one_run(s, "PARENT-AFTER", S("parent-after"))) return 1;
    printf(" attached=%d\n", gm_session_is_attached(s) ? 1 : 0);
    fflush(stdout);
    if (!gm_session_flush(s, 5000)) {
        fprintf(stderr, "fork: the parent could not flush after the fork\n");
        return 1;
    }
    gm_session_dispose(s, 2000);
    gm_session_free(s);
    return 0;
}
