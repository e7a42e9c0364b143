#include <graphmind.h>
#include <string.h>

#define S(s) s, strlen(s)

int main(void) {
    gm_session *s = NULL;
    gm_run *run = NULL;
    gm_options *opts = gm_options_new();
    gm_error_free(gm_options_set_app_name(opts, S("my-agent")));
    gm_error *e = gm_session_new(opts, NULL, GM_FLAVOR_NATIVE, NULL, NULL, &s);
    gm_options_free(opts);
    if (e != NULL) { /* fail open: carry on without GraphMind */
        gm_error_free(e);
        return 0;
    }
    gm_session_ready(s, 2000);
    if ((e = gm_session_start_run(s, S("my-first-run"), NULL, 0, &run)) == NULL) {
        /* your code: each tool call one gm_step (see examples/c/agent.c) */
        gm_error_free(gm_session_finish_run(s, run, GM_OUTCOME_OK, NULL, 0, NULL, 0));
        gm_run_free(run);
    }
    gm_error_free(e);
    gm_session_dispose(s, 2000);
    gm_session_free(s);
    return 0;
}
