// A small agent with a tool loop in C++, instrumented through libgraphmind's C ABI.
//
// Same scenario as examples/c/agent.c, in C++ idioms: RAII owners for every handle, and the
// gates' *callback* form (gm_gate_on_decision) bridged to a std::future, the way an event
// loop would get a decision without blocking a thread on the library.
// Prints RUN <id> / TOOL <i> <result JSON> / DONE <status>.
// Build: c++ -std=c++17 -Wall -Wextra -Werror -pedantic agent.cpp $(pkg-config --cflags --libs graphmind)
#include <graphmind.h>

#include <cstdio>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

struct Free {
    void operator()(gm_session *p) const { gm_session_free(p); }
    void operator()(gm_run *p) const { gm_run_free(p); }
    void operator()(gm_node *p) const { gm_node_free(p); }
    void operator()(gm_step *p) const { gm_step_free(p); }
    void operator()(gm_decision *p) const { gm_decision_free(p); }
    void operator()(gm_options *p) const { gm_options_free(p); }
};
template <class T> using Own = std::unique_ptr<T, Free>;

void check(gm_error *e, const char *what) {
    if (e == nullptr) return;
    gm_str m = gm_error_message(e);
    std::string text = std::string(what) + ": " + std::string(m.ptr, m.len);
    gm_error_free(e);
    throw std::runtime_error(text);
}

std::string take(gm_string &s) {
    std::string out = s.ptr ? std::string(s.ptr, s.len) : std::string();
    gm_string_free(&s);
    return out;
}

// Consumes the gate; the promise is fulfilled on whichever thread releases it.
Own<gm_decision> decide(gm_gate *gate) {
    auto promise = new std::promise<gm_decision *>();
    std::future<gm_decision *> future = promise->get_future();
    check(gm_gate_on_decision(
              gate,
              [](void *ud, gm_decision *d) {
                  auto p = static_cast<std::promise<gm_decision *> *>(ud);
                  p->set_value(d);
                  delete p;
              },
              promise),
          "on_decision");
    return Own<gm_decision>(future.get());
}

std::string lookup_tool(const std::string &input) {
    auto start = input.find("\"query\":\"");
    std::string query = "?";
    if (start != std::string::npos) {
        start += 9;
        query = input.substr(start, input.find('"', start) - start);
    }
    return "{\"query\":\"" + query + "\",\"hits\":" + std::to_string(input.size() % 7 + 1) + "}";
}

// One gated tool call; an empty optional-like result ("") means the run was aborted.
std::string call_tool(gm_session *s, gm_run *run, const gm_str &parent, const std::string &input) {
    gm_step *raw = nullptr;
    check(gm_step_start(s, run, "tool", 4, "lookup", 6, parent.ptr, parent.len, input.data(), input.size(), true, &raw), "step");
    Own<gm_step> step(raw);
    gm_gate *gate = nullptr;
    gm_next next;
    check(gm_step_before(step.get(), &gate), "before");
    check(gm_step_on_before(step.get(), decide(gate).get(), &next), "on_before");
    std::string output;
    while (next.kind == GM_NEXT_RUN) {
        std::string edited = take(next.value);
        output = lookup_tool(edited.empty() ? input : edited);
        check(gm_step_after(step.get(), &gate), "after");
        check(gm_step_on_after(step.get(), decide(gate).get(), output.data(), output.size(), &next), "on_after");
    }
    std::string value = take(next.value);
    switch (next.kind) {
    case GM_NEXT_RETURN_RESULT: return output;
    case GM_NEXT_RETURN_INJECTED: return value;
    default: return std::string();
    }
}

} // namespace

int main() {
    if (gm_abi_version() != GM_ABI_VERSION) {
        std::fprintf(stderr, "agent: ABI mismatch\n");
        return 2;
    }
    try {
        Own<gm_options> opts(gm_options_new());
        check(gm_options_set_app_name(opts.get(), "cpp-agent", 9), "app name");
        gm_session *raw_session = nullptr;
        check(gm_session_new(opts.get(), nullptr, GM_FLAVOR_NATIVE, nullptr, nullptr, &raw_session), "session");
        Own<gm_session> s(raw_session);
        if (!gm_session_ready(s.get(), 3000)) std::fprintf(stderr, "agent: no debugger attached, recording anyway\n");

        gm_run *raw_run = nullptr;
        check(gm_session_start_run(s.get(), "cpp-agent", 9, "{\"lang\":\"c++\"}", 14, &raw_run), "run");
        Own<gm_run> run(raw_run);
        gm_str id = gm_run_id(run.get());
        std::printf("RUN %.*s\n", static_cast<int>(id.len), id.ptr);
        std::fflush(stdout);

        gm_node *raw_node = nullptr;
        check(gm_node_new("llm", 3, "planner", 7, nullptr, 0, &raw_node), "node");
        Own<gm_node> planner(raw_node);
        check(gm_session_node_started(s.get(), run.get(), planner.get(), nullptr, 0, "{}", 2), "planner");

        const std::vector<std::string> queries = {"weather in Paris", "population of Lyon"};
        bool aborted = false;
        for (std::size_t i = 0; i < queries.size() && !aborted; i++) {
            std::string result = call_tool(s.get(), run.get(), gm_node_instance_id(planner.get()), "{\"query\":\"" + queries[i] + "\"}");
            aborted = result.empty() || gm_run_is_aborted(run.get());
            if (!aborted) {
                std::printf("TOOL %zu %s\n", i, result.c_str());
                std::fflush(stdout);
            }
        }
        check(gm_session_node_finished(s.get(), run.get(), planner.get(), "\"done\"", 6, 1.5, false), "planner done");
        check(gm_session_finish_run(s.get(), run.get(), aborted ? GM_OUTCOME_ABORTED : GM_OUTCOME_OK, nullptr, 0, nullptr, 0), "finish");
        std::printf("DONE %s\n", aborted ? "aborted" : "ok");
        gm_session_flush(s.get(), 2000);
        gm_session_dispose(s.get(), 2000);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "agent: %s\n", e.what());
        return 1;
    }
    return 0;
}
