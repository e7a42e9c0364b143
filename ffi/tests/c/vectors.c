/*
 * Runs the conformance vectors in tests/vectors/ through the C ABI only:
 *   - loop-guard-fixture.json canonical[] and differential.json canonical /
 *     canonicalLoneSurrogates: gm_canonical_call + gm_fingerprint;
 *   - shrink-fixture.json: the generator expanded here, in C, then gm_serialize_payload
 *     (large results compared by length and SHA-256, computed here);
 *   - ours/environment.json and ours/kill-switch.json: options + env through
 *     gm_options_from_json / gm_env_from_json / gm_config_resolve_json;
 *   - jcs/ (input -> output, es6-numbers-1k.txt): gm_canonicalize_text, gm_format_number;
 *   - jsontestsuite/test_parsing: y_ parse, n_ refused, i_ never crash (gm_json_parse);
 *   - differential.json redaction (+ lone surrogates), redaction-fixture.json: gm_redactor_*;
 *   - edit-input-fixture.json, llm-fixture.json, loop-kinds-fixture.json (errorResult,
 *     truncated, errorText, breakOnEnv): the edit-input, smart and llm pure functions;
 *   - loop-guard-fixture.json and loop-kinds-fixture.json sequences: gm_loop_guard_*.
 * Not run here: ours/server-environment.json (server-side, no app-side C function) and
 * reference/wire-schema.json (envelopes are built inside the session; core/tests/wire.rs).
 * JSON is read with the library's gm_json_doc (the fixtures hold lone surrogates).
 * Usage: vectors <tests/vectors dir>. Exit status 1 on the first failing file.
 */
#define _POSIX_C_SOURCE 200809L /* opendir */
#include "graphmind.h"

#include <dirent.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *g_dir;
static int g_failures;

static void die(const char *what) {
    fprintf(stderr, "vectors: %s\n", what);
    exit(2);
}

static void check_ok(gm_error *e, const char *what) {
    if (e != NULL) {
        gm_str m = gm_error_message(e);
        fprintf(stderr, "vectors: %s: error %d: %.*s\n", what, (int)gm_error_code(e), (int)m.len, m.ptr);
        gm_error_free(e);
        exit(2);
    }
}

/* ---- a growable byte buffer ---- */
typedef struct {
    char *p;
    size_t len, cap;
} buf;

static void buf_put(buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        b->p = (char *)realloc(b->p, cap);
        if (b->p == NULL) die("out of memory");
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void buf_puts(buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static char *read_file(const char *rel, size_t *len) {
    char path[4096];
    FILE *f;
    char *data;
    long n;
    snprintf(path, sizeof path, "%s/%s", g_dir, rel);
    f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "vectors: cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = (char *)malloc((size_t)n + 1);
    if (data == NULL || fread(data, 1, (size_t)n, f) != (size_t)n) die("read failed");
    fclose(f);
    data[n] = '\0';
    *len = (size_t)n;
    return data;
}

static gm_json_doc *load(const char *rel) {
    size_t len;
    char *text = read_file(rel, &len);
    gm_json_doc *doc = NULL;
    check_ok(gm_json_parse(text, len, &doc), rel);
    free(text);
    return doc;
}

/* A JSON pointer built with printf. */
static const char *ptr(const char *fmt, ...) {
    static char p[8][1024];
    static int slot;
    va_list ap;
    char *out = p[slot++ % 8];
    va_start(ap, fmt);
    vsnprintf(out, 1024, fmt, ap);
    va_end(ap);
    return out;
}

static gm_json_type type_at(const gm_json_doc *d, const char *p) { return gm_json_doc_type(d, p, strlen(p)); }
static long len_at(const gm_json_doc *d, const char *p) { return (long)gm_json_doc_len(d, p, strlen(p)); }
static bool json_at(const gm_json_doc *d, const char *p, gm_string *out) { return gm_json_doc_get(d, p, strlen(p), out); }
static bool str_at(const gm_json_doc *d, const char *p, gm_string *out) { return gm_json_doc_get_str(d, p, strlen(p), out); }

static long long num_at(const gm_json_doc *d, const char *p) {
    gm_string s = {NULL, 0};
    long long v;
    if (!json_at(d, p, &s)) die(p);
    v = atoll(s.ptr);
    gm_string_free(&s);
    return v;
}

static void fail(const char *file, const char *name, const char *what, const char *got, const char *want) {
    g_failures++;
    fprintf(stderr, "FAIL %s [%s] %s\n  got:  %.300s\n  want: %.300s\n", file, name, what, got ? got : "(none)",
            want ? want : "(none)");
}

/* ---- canonical / fingerprint ---- */
static int run_canonical(const char *file, const gm_json_doc *d, const char *base, int lone_ok_names) {
    long n = len_at(d, base), i;
    (void)lone_ok_names;
    if (n <= 0) die("no canonical cases");
    for (i = 0; i < n; i++) {
        gm_string id = {NULL, 0}, input = {NULL, 0}, ignore = {NULL, 0}, want = {NULL, 0}, wantfp = {NULL, 0};
        gm_string got = {NULL, 0}, gotfp = {NULL, 0}, name = {NULL, 0};
        bool absent = false;
        gm_string absent_text = {NULL, 0};
        char label[64];
        if (!str_at(d, ptr("%s/%ld/nodeId", base, i), &id)) die("nodeId");
        if (json_at(d, ptr("%s/%ld/inputAbsent", base, i), &absent_text)) absent = strcmp(absent_text.ptr, "true") == 0;
        gm_string_free(&absent_text);
        if (!absent) json_at(d, ptr("%s/%ld/input", base, i), &input); /* missing key: absent */
        json_at(d, ptr("%s/%ld/ignoreKeys", base, i), &ignore);
        str_at(d, ptr("%s/%ld/canonical", base, i), &want);
        str_at(d, ptr("%s/%ld/fingerprint", base, i), &wantfp);
        if (!str_at(d, ptr("%s/%ld/name", base, i), &name)) {
            snprintf(label, sizeof label, "case %ld", i);
        } else {
            snprintf(label, sizeof label, "%.60s", name.ptr);
        }
        check_ok(gm_canonical_call(id.ptr, id.len, input.ptr, input.len, ignore.ptr, ignore.len, &got), "canonical");
        check_ok(gm_fingerprint(id.ptr, id.len, input.ptr, input.len, ignore.ptr, ignore.len, &gotfp), "fingerprint");
        if (want.ptr == NULL || got.len != want.len || memcmp(got.ptr, want.ptr, got.len) != 0)
            fail(file, label, "canonical", got.ptr, want.ptr);
        if (wantfp.ptr == NULL || strcmp(gotfp.ptr, wantfp.ptr) != 0) fail(file, label, "fingerprint", gotfp.ptr, wantfp.ptr);
        gm_string_free(&id);
        gm_string_free(&input);
        gm_string_free(&ignore);
        gm_string_free(&want);
        gm_string_free(&wantfp);
        gm_string_free(&got);
        gm_string_free(&gotfp);
        gm_string_free(&name);
    }
    return (int)n;
}

/* ---- SHA-256 (FIPS 180-4), for the shrink fixture's large results ---- */
static const unsigned int K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01,
    0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc,
    0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08,
    0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))
static void sha256_block(unsigned int h[8], const unsigned char *p) {
    unsigned int w[64], a, b, c, d, e, f, g, hh, t1, t2;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = ((unsigned int)p[4 * i] << 24) | ((unsigned int)p[4 * i + 1] << 16) | ((unsigned int)p[4 * i + 2] << 8) | p[4 * i + 3];
    for (i = 16; i < 64; i++) {
        unsigned int s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        unsigned int s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    a = h[0]; b = h[1]; c = h[2]; d = h[3]; e = h[4]; f = h[5]; g = h[6]; hh = h[7];
    for (i = 0; i < 64; i++) {
        t1 = hh + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}
static void sha256_hex(const char *data, size_t len, char out[65]) {
    unsigned int h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    unsigned char tail[128];
    size_t full = len / 64 * 64, rest = len - full, tl, i;
    unsigned long long bits = (unsigned long long)len * 8;
    for (i = 0; i < full; i += 64) sha256_block(h, (const unsigned char *)data + i);
    memset(tail, 0, sizeof tail);
    memcpy(tail, data + full, rest);
    tail[rest] = 0x80;
    tl = rest + 1 + 8 <= 64 ? 64 : 128;
    for (i = 0; i < 8; i++) tail[tl - 1 - i] = (unsigned char)(bits >> (8 * i));
    sha256_block(h, tail);
    if (tl == 128) sha256_block(h, tail + 64);
    for (i = 0; i < 8; i++) sprintf(out + 8 * i, "%08x", h[i]);
    out[64] = '\0';
}

/* ---- the shrink fixture's generator, expanded in C into JSON text ---- */

/* Appends the WTF-8 string s as a JSON string body (no quotes); lone surrogates -> \uXXXX. */
static void put_escaped(buf *b, const char *s, size_t n) {
    size_t i;
    char tmp[8];
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf_put(b, "\\", 1);
            buf_put(b, (const char *)&s[i], 1);
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            buf_puts(b, tmp);
        } else if (c == 0xED && i + 2 < n && ((unsigned char)s[i + 1] & 0xE0) == 0xA0) {
            unsigned int unit = 0xD000u | (((unsigned char)s[i + 1] & 0x3Fu) << 6) | ((unsigned char)s[i + 2] & 0x3Fu);
            snprintf(tmp, sizeof tmp, "\\u%04x", unit);
            buf_puts(b, tmp);
            i += 2;
        } else {
            buf_put(b, &s[i], 1);
        }
    }
}

static void expand(const gm_json_doc *d, const char *p, buf *out);

/* The body (without quotes) of the string that the node at p expands to. */
static void expand_string_body(const gm_json_doc *d, const char *p, buf *out) {
    buf tmp = {NULL, 0, 0};
    expand(d, p, &tmp);
    if (tmp.len < 2 || tmp.p[0] != '"') die("generator: expected a string");
    buf_put(out, tmp.p + 1, tmp.len - 2);
    free(tmp.p);
}

static void pointer_token(buf *b, const char *key, size_t n) {
    size_t i;
    for (i = 0; i < n; i++) {
        if (key[i] == '~') buf_puts(b, "~0");
        else if (key[i] == '/') buf_puts(b, "~1");
        else buf_put(b, &key[i], 1);
    }
}

static void expand(const gm_json_doc *d, const char *p, buf *out) {
    gm_json_type t = type_at(d, p);
    long n, i;
    char sub[1024];
    if (t == GM_JSON_ARRAY) {
        n = len_at(d, p);
        buf_puts(out, "[");
        for (i = 0; i < n; i++) {
            if (i) buf_puts(out, ",");
            snprintf(sub, sizeof sub, "%s/%ld", p, i);
            expand(d, sub, out);
        }
        buf_puts(out, "]");
        return;
    }
    if (t != GM_JSON_OBJECT) {
        gm_string s = {NULL, 0};
        if (!json_at(d, p, &s)) die("generator: missing value");
        buf_put(out, s.ptr, s.len);
        gm_string_free(&s);
        return;
    }
    n = len_at(d, p);
    if (n == 1) {
        gm_string key = {NULL, 0};
        gm_json_doc_key(d, p, strlen(p), 0, &key);
        if (key.ptr[0] == '$') {
            if (strcmp(key.ptr, "$repeat") == 0) {
                buf unit = {NULL, 0, 0};
                long long count = num_at(d, ptr("%s/$repeat/1", p)), k;
                snprintf(sub, sizeof sub, "%s/$repeat/0", p);
                expand_string_body(d, sub, &unit);
                buf_puts(out, "\"");
                for (k = 0; k < count; k++) buf_put(out, unit.p ? unit.p : "", unit.len);
                buf_puts(out, "\"");
                free(unit.p);
            } else if (strcmp(key.ptr, "$array") == 0) {
                long long count = num_at(d, ptr("%s/$array/1", p)), k;
                snprintf(sub, sizeof sub, "%s/$array/0", p);
                buf_puts(out, "[");
                for (k = 0; k < count; k++) {
                    if (k) buf_puts(out, ",");
                    expand(d, sub, out);
                }
                buf_puts(out, "]");
            } else if (strcmp(key.ptr, "$concat") == 0) {
                long parts = len_at(d, ptr("%s/$concat", p));
                buf_puts(out, "\"");
                for (i = 0; i < parts; i++) {
                    snprintf(sub, sizeof sub, "%s/$concat/%ld", p, i);
                    expand_string_body(d, sub, out);
                }
                buf_puts(out, "\"");
            } else if (strcmp(key.ptr, "$keys") == 0) {
                buf prefix = {NULL, 0, 0};
                long long count = num_at(d, ptr("%s/$keys/1", p)), k;
                char num[32];
                snprintf(sub, sizeof sub, "%s/$keys/0", p);
                expand_string_body(d, sub, &prefix);
                snprintf(sub, sizeof sub, "%s/$keys/2", p);
                buf_puts(out, "{");
                for (k = 0; k < count; k++) {
                    if (k) buf_puts(out, ",");
                    buf_puts(out, "\"");
                    buf_put(out, prefix.p ? prefix.p : "", prefix.len);
                    snprintf(num, sizeof num, "%lld", k);
                    buf_puts(out, num);
                    buf_puts(out, "\":");
                    expand(d, sub, out);
                }
                buf_puts(out, "}");
                free(prefix.p);
            } else if (strcmp(key.ptr, "$merge") == 0) {
                long parts = len_at(d, ptr("%s/$merge", p));
                int first = 1;
                buf_puts(out, "{");
                for (i = 0; i < parts; i++) {
                    buf obj = {NULL, 0, 0};
                    snprintf(sub, sizeof sub, "%s/$merge/%ld", p, i);
                    expand(d, sub, &obj);
                    if (obj.len < 2 || obj.p[0] != '{') die("generator: $merge of a non-object");
                    if (obj.len > 2) {
                        if (!first) buf_puts(out, ",");
                        buf_put(out, obj.p + 1, obj.len - 2);
                        first = 0;
                    }
                    free(obj.p);
                }
                buf_puts(out, "}");
            } else {
                die("generator: unknown $ form");
            }
            gm_string_free(&key);
            return;
        }
        gm_string_free(&key);
    }
    buf_puts(out, "{");
    for (i = 0; i < n; i++) {
        gm_string key = {NULL, 0};
        buf child = {NULL, 0, 0};
        gm_json_doc_key(d, p, strlen(p), (size_t)i, &key);
        if (i) buf_puts(out, ",");
        buf_puts(out, "\"");
        put_escaped(out, key.ptr, key.len);
        buf_puts(out, "\":");
        buf_puts(&child, p);
        buf_puts(&child, "/");
        pointer_token(&child, key.ptr, key.len);
        expand(d, child.p, out);
        free(child.p);
        gm_string_free(&key);
    }
    buf_puts(out, "}");
}

static int run_shrink(void) {
    const char *file = "reference/shrink-fixture.json";
    gm_json_doc *d = load(file);
    long n = len_at(d, "/cases"), i;
    long long max_payload = num_at(d, "/constants/MAX_PAYLOAD_BYTES");
    if ((size_t)max_payload != gm_max_payload_bytes()) fail(file, "constants", "MAX_PAYLOAD_BYTES", NULL, NULL);
    for (i = 0; i < n; i++) {
        buf input = {NULL, 0, 0};
        gm_string name = {NULL, 0}, type = {NULL, 0}, want = {NULL, 0}, trunc = {NULL, 0}, sha = {NULL, 0};
        gm_serialized got;
        size_t max = 0;
        char p[64];
        snprintf(p, sizeof p, "/cases/%ld/input", i);
        expand(d, p, &input);
        str_at(d, ptr("/cases/%ld/name", i), &name);
        str_at(d, ptr("/cases/%ld/type", i), &type);
        if (type_at(d, ptr("/cases/%ld/maxBytes", i)) == GM_JSON_NUMBER) max = (size_t)num_at(d, ptr("/cases/%ld/maxBytes", i));
        check_ok(gm_serialize_payload(input.p, input.len, max, type.ptr, type.len, &got), name.ptr);
        json_at(d, ptr("/cases/%ld/expected/truncated", i), &trunc);
        if (trunc.ptr == NULL || strcmp(trunc.ptr, got.truncated ? "true" : "false") != 0)
            fail(file, name.ptr, "truncated", got.truncated ? "true" : "false", trunc.ptr);
        if (str_at(d, ptr("/cases/%ld/expected/json", i), &want)) {
            if (got.json.len != want.len || memcmp(got.json.ptr, want.ptr, want.len) != 0) fail(file, name.ptr, "json", got.json.ptr, want.ptr);
        } else if (str_at(d, ptr("/cases/%ld/expected/jsonSha256", i), &sha)) {
            char hex[65];
            long long bytes = num_at(d, ptr("/cases/%ld/expected/jsonBytes", i));
            sha256_hex(got.json.ptr, got.json.len, hex);
            if ((long long)got.json.len != bytes) fail(file, name.ptr, "jsonBytes", NULL, NULL);
            if (strcmp(hex, sha.ptr) != 0) fail(file, name.ptr, "jsonSha256", hex, sha.ptr);
        } else {
            fail(file, name.ptr, "no expected json", NULL, NULL);
        }
        free(input.p);
        gm_string_free(&name);
        gm_string_free(&type);
        gm_string_free(&want);
        gm_string_free(&trunc);
        gm_string_free(&sha);
        gm_string_free(&got.json);
    }
    gm_json_doc_free(d);
    return (int)n;
}

/* ---- config / kill switch ---- */
static gm_flavor flavor_of(const char *s) {
    if (strcmp(s, "node") == 0) return GM_FLAVOR_NODE;
    if (strcmp(s, "python") == 0) return GM_FLAVOR_PYTHON;
    if (strcmp(s, "ruby") == 0) return GM_FLAVOR_RUBY;
    if (strcmp(s, "native") == 0) return GM_FLAVOR_NATIVE;
    die("unknown flavor");
    return GM_FLAVOR_NATIVE;
}

static bool same_canonical(const gm_string *a, const gm_string *b) {
    gm_string ca = {NULL, 0}, cb = {NULL, 0};
    bool same;
    check_ok(gm_canonical_json(a->ptr, a->len, &ca), "canonical a");
    check_ok(gm_canonical_json(b->ptr, b->len, &cb), "canonical b");
    same = ca.len == cb.len && memcmp(ca.ptr, cb.ptr, ca.len) == 0;
    gm_string_free(&ca);
    gm_string_free(&cb);
    return same;
}

static int run_config(const char *file) {
    gm_json_doc *d = load(file);
    long n = len_at(d, "/cases"), i, k;
    for (i = 0; i < n; i++) {
        gm_string name = {NULL, 0}, flavor = {NULL, 0}, env_json = {NULL, 0}, opt_json = {NULL, 0}, result = {NULL, 0};
        gm_env *env = NULL;
        gm_options *opts = NULL;
        gm_json_doc *got = NULL;
        long fields;
        str_at(d, ptr("/cases/%ld/name", i), &name);
        if (!str_at(d, ptr("/cases/%ld/flavor", i), &flavor)) die("flavor");
        json_at(d, ptr("/cases/%ld/env", i), &env_json);
        json_at(d, ptr("/cases/%ld/options", i), &opt_json);
        check_ok(gm_env_from_json(env_json.ptr, env_json.len, &env), "env");
        check_ok(gm_options_from_json(opt_json.ptr, opt_json.len, &opts), "options");
        check_ok(gm_config_resolve_json(opts, env, flavor_of(flavor.ptr), &result), "resolve");
        check_ok(gm_json_parse(result.ptr, result.len, &got), "result");
        fields = len_at(d, ptr("/cases/%ld/expected", i));
        for (k = 0; k < fields; k++) {
            gm_string key = {NULL, 0}, want = {NULL, 0}, have = {NULL, 0};
            gm_json_doc_key(d, ptr("/cases/%ld/expected", i), strlen(ptr("/cases/%ld/expected", i)), (size_t)k, &key);
            json_at(d, ptr("/cases/%ld/expected/%s", i, key.ptr), &want);
            if (strcmp(key.ptr, "warnings") == 0) {
                long w = len_at(d, ptr("/cases/%ld/expected/warnings", i)), j;
                if (len_at(got, "/warnings") != w) {
                    json_at(got, "/warnings", &have);
                    fail(file, name.ptr, "warnings count", have.ptr, want.ptr);
                } else {
                    for (j = 0; j < w; j++) {
                        gm_string wn = {NULL, 0}, gw = {NULL, 0};
                        str_at(d, ptr("/cases/%ld/expected/warnings/%ld", i, j), &wn);
                        str_at(got, ptr("/warnings/%ld", j), &gw);
                        if (gw.ptr == NULL || strncmp(gw.ptr, wn.ptr, wn.len) != 0) fail(file, name.ptr, "warning", gw.ptr, wn.ptr);
                        gm_string_free(&wn);
                        gm_string_free(&gw);
                    }
                }
            } else if (!json_at(got, ptr("/%s", key.ptr), &have)) {
                fail(file, name.ptr, key.ptr, NULL, want.ptr);
            } else if (!same_canonical(&have, &want)) {
                fail(file, name.ptr, key.ptr, have.ptr, want.ptr);
            }
            gm_string_free(&key);
            gm_string_free(&want);
            gm_string_free(&have);
        }
        gm_json_doc_free(got);
        gm_string_free(&result);
        gm_options_free(opts);
        gm_env_free(env);
        gm_string_free(&name);
        gm_string_free(&flavor);
        gm_string_free(&env_json);
        gm_string_free(&opt_json);
    }
    gm_json_doc_free(d);
    return (int)n;
}

/* ---- helpers for the pure-function fixtures ---- */

/* The JSON text at a printf-built pointer ({NULL,0} when absent). */
static gm_string J(const gm_json_doc *d, const char *fmt, ...) {
    char p[1024];
    gm_string s = {NULL, 0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof p, fmt, ap);
    va_end(ap);
    gm_json_doc_get(d, p, strlen(p), &s);
    return s;
}

/* The raw (WTF-8) string at a printf-built pointer ({NULL,0} when absent or not a string). */
static gm_string S(const gm_json_doc *d, const char *fmt, ...) {
    char p[1024];
    gm_string s = {NULL, 0};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p, sizeof p, fmt, ap);
    va_end(ap);
    gm_json_doc_get_str(d, p, strlen(p), &s);
    return s;
}

static bool truthy(const gm_json_doc *d, const char *p) {
    gm_string s = {NULL, 0};
    bool on = json_at(d, p, &s) && strcmp(s.ptr, "true") == 0;
    gm_string_free(&s);
    return on;
}

/* Byte equality of two optional texts (both absent: equal). */
static bool same(const gm_string *a, const gm_string *b) {
    if (a->ptr == NULL || b->ptr == NULL) return a->ptr == NULL && b->ptr == NULL;
    return a->len == b->len && memcmp(a->ptr, b->ptr, a->len) == 0;
}

/* got (optional text) against the JSON value at want_ptr taken as text: a JSON string is
 * compared by its raw content, null/absent as "no value". */
static void expect_plain(const char *file, const char *label, const char *what, gm_string *got, const gm_json_doc *d,
                         const char *want_ptr) {
    gm_string want = {NULL, 0};
    gm_json_doc_get_str(d, want_ptr, strlen(want_ptr), &want);
    if (!same(got, &want)) fail(file, label, what, got->ptr, want.ptr);
    gm_string_free(&want);
}

/* got (optional JSON text) against the JSON at want_ptr (null/absent: no value), byte for byte. */
static void expect_json(const char *file, const char *label, const char *what, gm_string *got, const gm_json_doc *d,
                        const char *want_ptr) {
    gm_string want = {NULL, 0};
    if (gm_json_doc_get(d, want_ptr, strlen(want_ptr), &want) && strcmp(want.ptr, "null") == 0) gm_string_free(&want);
    if (!same(got, &want)) fail(file, label, what, got->ptr, want.ptr);
    gm_string_free(&want);
}

static const char *label_of(const gm_json_doc *d, const char *base, long i, gm_string *name, char *buf64) {
    *name = S(d, "%s/%ld/name", base, i);
    if (name->ptr != NULL) return name->ptr;
    snprintf(buf64, 64, "%s #%ld", base, i);
    return buf64;
}

/* ---- JCS (RFC 8785) and the ES6 number spellings ---- */
static int run_jcs(void) {
    char dirpath[4096], rel[1024];
    DIR *dir;
    struct dirent *e;
    int n = 0;
    snprintf(dirpath, sizeof dirpath, "%s/jcs/input", g_dir);
    dir = opendir(dirpath);
    if (dir == NULL) die("cannot open jcs/input");
    while ((e = readdir(dir)) != NULL) {
        size_t l = strlen(e->d_name), in_len, want_len;
        char *in, *want;
        gm_string got = {NULL, 0};
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) continue;
        snprintf(rel, sizeof rel, "jcs/input/%s", e->d_name);
        in = read_file(rel, &in_len);
        snprintf(rel, sizeof rel, "jcs/output/%s", e->d_name);
        want = read_file(rel, &want_len);
        check_ok(gm_canonicalize_text(in, in_len, &got), e->d_name);
        if (got.len != want_len || memcmp(got.ptr, want, want_len) != 0) fail("jcs", e->d_name, "canonical", got.ptr, want);
        gm_string_free(&got);
        free(in);
        free(want);
        n++;
    }
    closedir(dir);
    if (n == 0) die("no jcs cases");
    return n;
}

static int run_es6_numbers(void) {
    size_t len;
    char *text = read_file("jcs/es6-numbers-1k.txt", &len), *line = text, *next;
    int n = 0;
    for (; line < text + len && *line; line = next) {
        char *comma, *nl = strchr(line, '\n');
        unsigned long long bits;
        double v;
        gm_string got = {NULL, 0};
        next = nl ? nl + 1 : text + len;
        if (nl) *nl = '\0';
        if (*line == '\0') continue;
        comma = strchr(line, ',');
        if (comma == NULL) die("es6 numbers: no comma");
        *comma = '\0';
        bits = strtoull(line, NULL, 16);
        memcpy(&v, &bits, sizeof v);
        check_ok(gm_format_number(v, &got), "format_number");
        if (strcmp(got.ptr, comma + 1) != 0) fail("es6-numbers-1k.txt", line, "spelling", got.ptr, comma + 1);
        gm_string_free(&got);
        n++;
    }
    free(text);
    if (n == 0) die("no es6 numbers");
    return n;
}

/* ---- JSONTestSuite: y_ parse, n_ are refused, i_ never crash ---- */
static int run_jsontestsuite(void) {
    char dirpath[4096], rel[1024];
    DIR *dir;
    struct dirent *e;
    int n = 0;
    snprintf(dirpath, sizeof dirpath, "%s/jsontestsuite/test_parsing", g_dir);
    dir = opendir(dirpath);
    if (dir == NULL) die("cannot open jsontestsuite/test_parsing");
    while ((e = readdir(dir)) != NULL) {
        size_t l = strlen(e->d_name), in_len;
        char *in;
        gm_json_doc *doc = NULL;
        gm_error *perr;
        gm_string canon = {NULL, 0};
        gm_error *cerr;
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0) continue;
        snprintf(rel, sizeof rel, "jsontestsuite/test_parsing/%s", e->d_name);
        in = read_file(rel, &in_len);
        perr = gm_json_parse(in, in_len, &doc);
        cerr = gm_canonicalize_text(in, in_len, &canon);
        if ((perr == NULL) != (cerr == NULL)) fail("jsontestsuite", e->d_name, "parse and canonicalize disagree", NULL, NULL);
        if (e->d_name[0] == 'y' && perr != NULL) fail("jsontestsuite", e->d_name, "y_ refused", NULL, NULL);
        if (e->d_name[0] == 'n' && perr == NULL) fail("jsontestsuite", e->d_name, "n_ accepted", NULL, NULL);
        if (perr != NULL && gm_error_code(perr) != GM_INVALID_JSON) fail("jsontestsuite", e->d_name, "error code", NULL, NULL);
        gm_error_free(perr);
        gm_error_free(cerr);
        gm_json_doc_free(doc);
        gm_string_free(&canon);
        free(in);
        n++;
    }
    closedir(dir);
    if (n == 0) die("no jsontestsuite cases");
    return n;
}

/* ---- redaction: cases[] of {switches, in[], out[]} under base ---- */
static int run_redaction(const char *file, const gm_json_doc *d, const char *base) {
    long n = len_at(d, base), i, k;
    if (n <= 0) die("no redaction cases");
    for (i = 0; i < n; i++) {
        char lb[64];
        gm_string name;
        const char *label = label_of(d, base, i, &name, lb);
        gm_redactor *r = gm_redactor_new(truthy(d, ptr("%s/%ld/switches/hideInputs", base, i)),
                                         truthy(d, ptr("%s/%ld/switches/hideOutputs", base, i)),
                                         truthy(d, ptr("%s/%ld/switches/hideToolArgs", base, i)),
                                         truthy(d, ptr("%s/%ld/switches/hideToolResults", base, i)));
        long events = len_at(d, ptr("%s/%ld/in", base, i));
        if (events != len_at(d, ptr("%s/%ld/out", base, i))) die("redaction: in/out lengths differ");
        for (k = 0; k < events; k++) {
            gm_string type = S(d, "%s/%ld/in/%ld/type", base, i, k), run = S(d, "%s/%ld/in/%ld/runId", base, i, k);
            gm_string kind = S(d, "%s/%ld/in/%ld/nodeKind", base, i, k), payload = J(d, "%s/%ld/in/%ld/payload", base, i, k);
            gm_string got = {NULL, 0};
            gm_redact_outcome outcome;
            const char *pl = payload.ptr ? payload.ptr : "null";
            check_ok(gm_redactor_redact(r, type.ptr, type.len, run.ptr ? run.ptr : "", run.len, kind.ptr, kind.len, pl, strlen(pl),
                                        &outcome, &got),
                     "redact");
            if (truthy(d, ptr("%s/%ld/out/%ld/dropped", base, i, k))) {
                if (outcome != GM_REDACT_DROPPED || got.ptr != NULL) fail(file, label, ptr("#%ld not dropped", k), got.ptr, NULL);
            } else if (outcome == GM_REDACT_DROPPED) {
                fail(file, label, ptr("#%ld dropped", k), NULL, NULL);
            } else {
                gm_string want = J(d, "%s/%ld/out/%ld/payload", base, i, k);
                if (!same(&got, &want)) fail(file, label, ptr("#%ld payload", k), got.ptr, want.ptr);
                gm_string_free(&want);
            }
            gm_string_free(&type);
            gm_string_free(&run);
            gm_string_free(&kind);
            gm_string_free(&payload);
            gm_string_free(&got);
        }
        gm_redactor_free(r);
        gm_string_free(&name);
    }
    return (int)n;
}

/* ---- edit-input-fixture.json ---- */
static int run_edit_input(void) {
    const char *file = "edit-input-fixture.json";
    gm_json_doc *d = load("reference/edit-input-fixture.json");
    long n, i;
    int total = 0;
    char lb[64];
    gm_string name;
    if (num_at(d, "/maxRefusalMessage") != (long long)gm_max_refusal_message()) fail(file, "maxRefusalMessage", "constant", NULL, NULL);

    n = len_at(d, "/proposedValue");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/proposedValue", i, &name, lb);
        gm_string v = J(d, "/proposedValue/%ld/value", i), got = {NULL, 0};
        const char *vt = v.ptr ? v.ptr : "null";
        check_ok(gm_proposed_value_refusal(vt, strlen(vt), &got), "proposed_value_refusal");
        expect_plain(file, label, "refusal", &got, d, ptr("/proposedValue/%ld/refusal", i));
        gm_string_free(&v);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/prototypeKeys");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/prototypeKeys", i, &name, lb);
        gm_string v = J(d, "/prototypeKeys/%ld/value", i), got = {NULL, 0};
        const char *vt = v.ptr ? v.ptr : "null";
        check_ok(gm_prototype_key_refusal(vt, strlen(vt), &got), "prototype_key_refusal");
        if ((got.ptr != NULL) != truthy(d, ptr("/prototypeKeys/%ld/refused", i))) fail(file, label, "refused", got.ptr, NULL);
        gm_string_free(&v);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/normalizeValidation");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/normalizeValidation", i, &name, lb);
        gm_string v = J(d, "/normalizeValidation/%ld/result", i), got = {NULL, 0};
        check_ok(gm_normalize_validation(v.ptr, v.len, &got), "normalize_validation");
        expect_json(file, label, "verdict", &got, d, ptr("/normalizeValidation/%ld/expected", i));
        gm_string_free(&v);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/sanitizeShortText");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/sanitizeShortText", i, &name, lb);
        gm_string v = J(d, "/sanitizeShortText/%ld/input", i), got = {NULL, 0};
        check_ok(gm_sanitize_short_text(v.ptr, v.len, &got), "sanitize_short_text");
        expect_json(file, label, "text", &got, d, ptr("/sanitizeShortText/%ld/expected", i));
        gm_string_free(&v);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/mergeToolInput");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/mergeToolInput", i, &name, lb);
        gm_string live = J(d, "/mergeToolInput/%ld/live", i), prop = J(d, "/mergeToolInput/%ld/proposed", i), got = {NULL, 0};
        check_ok(gm_merge_tool_input(live.ptr, live.len, prop.ptr, prop.len, truthy(d, ptr("/mergeToolInput/%ld/inputHidden", i)),
                                     &got),
                 "merge_tool_input");
        expect_json(file, label, "verdict", &got, d, ptr("/mergeToolInput/%ld/expected", i));
        gm_string_free(&live);
        gm_string_free(&prop);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;
    gm_json_doc_free(d);
    return total;
}

/* ---- llm-fixture.json ---- */
static int run_llm(void) {
    const char *file = "llm-fixture.json";
    gm_json_doc *d = load("reference/llm-fixture.json");
    long n, i;
    int total = 0;
    char lb[64];
    gm_string name, got = {NULL, 0};

    n = len_at(d, "/finishReasons");
    for (i = 0; i < n; i++) {
        gm_string raw = J(d, "/finishReasons/%ld/0", i);
        snprintf(lb, sizeof lb, "finishReasons #%ld", i);
        check_ok(gm_normalize_finish_reason(raw.ptr, raw.len, truthy(d, ptr("/finishReasons/%ld/1", i)), &got), "finish_reason");
        expect_plain(file, lb, "reason", &got, d, ptr("/finishReasons/%ld/2", i));
        gm_string_free(&raw);
        gm_string_free(&got);
    }
    total += (int)n;

    n = len_at(d, "/toolCalls");
    for (i = 0; i < n; i++) {
        gm_string id = J(d, "/toolCalls/%ld/in/id", i), nm = J(d, "/toolCalls/%ld/in/name", i), args = J(d, "/toolCalls/%ld/in/args", i);
        snprintf(lb, sizeof lb, "toolCalls #%ld", i);
        check_ok(gm_tool_call(id.ptr, id.len, nm.ptr, nm.len, args.ptr, args.len, &got), "tool_call");
        expect_json(file, lb, "call", &got, d, ptr("/toolCalls/%ld/out", i));
        gm_string_free(&id);
        gm_string_free(&nm);
        gm_string_free(&args);
        gm_string_free(&got);
    }
    total += (int)n;

    n = len_at(d, "/schemaHashes");
    for (i = 0; i < n; i++) {
        gm_string in = J(d, "/schemaHashes/%ld/in", i);
        snprintf(lb, sizeof lb, "schemaHashes #%ld", i);
        check_ok(gm_schema_hash(in.ptr, in.len, &got), "schema_hash");
        expect_plain(file, lb, "hash", &got, d, ptr("/schemaHashes/%ld/hash", i));
        gm_string_free(&in);
        gm_string_free(&got);
    }
    total += (int)n;

    n = len_at(d, "/toolDefinitions");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/toolDefinitions", i, &name, lb);
        gm_string in = J(d, "/toolDefinitions/%ld/in", i), hash = {NULL, 0};
        check_ok(gm_sanitize_tool_definition(in.ptr, in.len, &got), "sanitize_tool_definition");
        expect_json(file, label, "definition", &got, d, ptr("/toolDefinitions/%ld/out", i));
        check_ok(gm_schema_hash(got.ptr, got.len, &hash), "schema_hash");
        expect_plain(file, label, "hash", &hash, d, ptr("/toolDefinitions/%ld/hash", i));
        gm_string_free(&in);
        gm_string_free(&hash);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/usage");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/usage", i, &name, lb);
        gm_string prov = S(d, "/usage/%ld/provider", i), raw = J(d, "/usage/%ld/raw", i);
        check_ok(gm_provider_usage(prov.ptr, prov.len, raw.ptr, raw.len, &got), "provider_usage");
        expect_json(file, label, "usage", &got, d, ptr("/usage/%ld/out", i));
        gm_string_free(&prov);
        gm_string_free(&raw);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    check_ok(gm_sampling_param_keys(&got), "sampling_param_keys");
    expect_json(file, "samplingParams", "keys", &got, d, "/samplingParams");
    gm_string_free(&got);
    total += 1;
    gm_json_doc_free(d);
    return total;
}

/* ---- loop-kinds-fixture.json: errorResult, truncated, errorText, breakOnEnv ---- */
static int run_smart(void) {
    const char *file = "loop-kinds-fixture.json";
    gm_json_doc *d = load("reference/loop-kinds-fixture.json");
    long n, i;
    int total = 0;
    char lb[64];
    gm_string name, got = {NULL, 0};

    n = len_at(d, "/errorResult");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/errorResult", i, &name, lb);
        gm_string r = J(d, "/errorResult/%ld/result", i);
        const char *rt = r.ptr ? r.ptr : "null";
        check_ok(gm_error_result_shape(rt, strlen(rt), &got), "error_result_shape");
        expect_plain(file, label, "shape", &got, d, ptr("/errorResult/%ld/shape", i));
        gm_string_free(&r);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/truncated");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/truncated", i, &name, lb);
        gm_string r = J(d, "/truncated/%ld/result", i), want = J(d, "/truncated/%ld/fires", i);
        const char *rt = r.ptr ? r.ptr : "null";
        check_ok(gm_truncated_tool_call(rt, strlen(rt), &got), "truncated_tool_call");
        if (want.ptr == NULL || strcmp(want.ptr, "null") == 0) {
            if (got.ptr != NULL) fail(file, label, "fires", got.ptr, "null");
        } else if (got.ptr == NULL || !same_canonical(&got, &want)) {
            fail(file, label, "fires", got.ptr, want.ptr);
        }
        gm_string_free(&r);
        gm_string_free(&want);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/errorText");
    for (i = 0; i < n; i++) {
        const char *label = label_of(d, "/errorText", i, &name, lb);
        gm_string t = S(d, "/errorText/%ld/text", i);
        if (t.ptr == NULL) die("errorText: text is not a string");
        check_ok(gm_error_text_key(t.ptr, t.len, &got), "error_text_key");
        expect_json(file, label, "key", &got, d, ptr("/errorText/%ld/key", i));
        gm_string_free(&t);
        gm_string_free(&got);
        gm_string_free(&name);
    }
    total += (int)n;

    n = len_at(d, "/breakOnEnv");
    for (i = 0; i < n; i++) {
        gm_string raw = S(d, "/breakOnEnv/%ld/raw", i);
        bool on = gm_parse_break_on(raw.ptr, raw.len);
        if (on != truthy(d, ptr("/breakOnEnv/%ld/on", i))) {
            gm_string rj = J(d, "/breakOnEnv/%ld/raw", i);
            fail(file, "breakOnEnv", rj.ptr, on ? "true" : "false", NULL);
            gm_string_free(&rj);
        }
        gm_string_free(&raw);
    }
    total += (int)n;
    gm_json_doc_free(d);
    return total;
}

/* ---- loop guard sequences ---- */

/* A guard configured from the sequence's threshold / allowNodes / ignoreKeys / kinds. */
/* A guard configured by the members of the sequence at seq; `detect`, when not NULL, names
 * the opt-in detectors in place of the sequence's own `detect` member. */
static gm_loop_guard *guard_with(const gm_json_doc *d, const char *seq, const char *detect) {
    static const char *keys[5] = {"threshold", "allowNodes", "ignoreKeys", "kinds", "detect"};
    buf cfg = {NULL, 0, 0};
    gm_loop_guard *g = NULL;
    int k, first = 1;
    buf_puts(&cfg, "{");
    for (k = 0; k < 5; k++) {
        gm_string v = {NULL, 0};
        if (k == 4 && detect != NULL) {
            if (!first) buf_puts(&cfg, ",");
            buf_puts(&cfg, "\"detect\":");
            buf_puts(&cfg, detect);
            first = 0;
            continue;
        }
        v = J(d, "%s/%s", seq, keys[k]);
        if (v.ptr != NULL) {
            if (!first) buf_puts(&cfg, ",");
            buf_puts(&cfg, "\"");
            buf_puts(&cfg, keys[k]);
            buf_puts(&cfg, "\":");
            buf_put(&cfg, v.ptr, v.len);
            first = 0;
        }
        gm_string_free(&v);
    }
    buf_puts(&cfg, "}");
    check_ok(gm_loop_guard_new(cfg.p, cfg.len, &g), "loop_guard_new");
    free(cfg.p);
    return g;
}

static gm_loop_guard *guard_for(const gm_json_doc *d, const char *seq) {
    return guard_with(d, seq, NULL);
}

/* Starts the node at ev (a call or start event) as seq i; its fingerprint into *fp. */
static void guard_start(gm_loop_guard *g, const gm_json_doc *d, const char *ev, const char *run, long i, gm_string *fp) {
    gm_string id = S(d, "%s/nodeId", ev), kind = S(d, "%s/kind", ev), name = S(d, "%s/name", ev);
    gm_string inst = S(d, "%s/instanceId", ev), input = {NULL, 0};
    bool unreadable = truthy(d, ptr("%s/unreadable", ev)), absent = truthy(d, ptr("%s/inputAbsent", ev));
    if (!unreadable && !absent) input = J(d, "%s/input", ev);
    check_ok(gm_loop_guard_started(g, run, strlen(run), id.ptr, id.len, kind.ptr, kind.len, name.ptr, name.len, inst.ptr, inst.len,
                                   input.ptr, input.len, unreadable, (uint64_t)i, true, fp),
             "loop_guard_started");
    gm_string_free(&id);
    gm_string_free(&kind);
    gm_string_free(&name);
    gm_string_free(&inst);
    gm_string_free(&input);
}

/* The before gate for ev; when held, appends the hold to holds (as the fixture writes it)
 * and checks lastSeq, the fingerprint and that the retry runs on. */
static void guard_consult(gm_loop_guard *g, const gm_json_doc *d, const char *ev, const char *run, long i, const gm_string *fp,
                          bool with_kind, buf *holds, const char *file, const char *label) {
    gm_string id = S(d, "%s/nodeId", ev), kind = S(d, "%s/kind", ev), name = S(d, "%s/name", ev), hold = {NULL, 0};
    check_ok(gm_loop_guard_consult_before(g, run, strlen(run), kind.ptr, kind.len, id.ptr, id.len, name.ptr, name.len, true, &hold),
             "consult_before");
    if (hold.ptr != NULL) {
        gm_json_doc *h = NULL;
        gm_string again = {NULL, 0}, hk = {NULL, 0}, hfp = {NULL, 0};
        char tmp[160];
        check_ok(gm_json_parse(hold.ptr, hold.len, &h), "hold");
        if (num_at(h, "/lastSeq") != i) fail(file, label, "lastSeq", hold.ptr, NULL);
        str_at(h, "/fingerprint", &hfp);
        if (hfp.ptr == NULL || hfp.len != 32 || (fp != NULL && (fp->ptr == NULL || strcmp(hfp.ptr, fp->ptr) != 0)))
            fail(file, label, "hold fingerprint", hfp.ptr, fp ? fp->ptr : NULL);
        str_at(h, "/kind", &hk);
        if (holds->len > 1) buf_puts(holds, ",");
        if (with_kind) {
            snprintf(tmp, sizeof tmp, "{\"at\":%ld,\"kind\":\"%s\",\"repeats\":%lld,\"firstAt\":%lld", i, hk.ptr, num_at(h, "/repeats"),
                     num_at(h, "/firstSeq"));
            buf_puts(holds, tmp);
            if (type_at(h, "/period") == GM_JSON_NUMBER) {
                snprintf(tmp, sizeof tmp, ",\"period\":%lld,\"laps\":%lld", num_at(h, "/period"), num_at(h, "/laps"));
                buf_puts(holds, tmp);
            }
            buf_puts(holds, "}");
        } else {
            if (strcmp(hk.ptr, "repeat") != 0) fail(file, label, "hold kind", hk.ptr, "repeat");
            snprintf(tmp, sizeof tmp, "{\"at\":%ld,\"repeats\":%lld,\"firstAt\":%lld}", i, num_at(h, "/repeats"), num_at(h, "/firstSeq"));
            buf_puts(holds, tmp);
        }
        check_ok(gm_loop_guard_consult_before(g, run, strlen(run), kind.ptr, kind.len, id.ptr, id.len, name.ptr, name.len, true, &again),
                 "consult_before (retry)");
        if (again.ptr != NULL) fail(file, label, ptr("retry at %ld held again", i), again.ptr, NULL);
        gm_string_free(&again);
        gm_string_free(&hk);
        gm_string_free(&hfp);
        gm_json_doc_free(h);
    }
    gm_string_free(&id);
    gm_string_free(&kind);
    gm_string_free(&name);
    gm_string_free(&hold);
}

static void expect_same_json(const char *file, const char *label, const char *what, const char *got_text, const gm_json_doc *d,
                             const char *want_ptr) {
    gm_string got = {NULL, 0}, want = {NULL, 0};
    got.ptr = (char *)got_text;
    got.len = strlen(got_text);
    if (!json_at(d, want_ptr, &want)) { /* absent: null */
        if (strcmp(got_text, "null") != 0) fail(file, label, what, got_text, "null (absent)");
    } else if (!same_canonical(&got, &want)) {
        fail(file, label, what, got_text, want.ptr);
    }
    gm_string_free(&want);
}

static int run_loop_guard_sequences(void) {
    const char *file = "loop-guard-fixture.json";
    gm_json_doc *d = load("reference/loop-guard-fixture.json");
    long n = len_at(d, "/sequences"), i, k;
    if (n <= 0) die("no loop-guard sequences");
    for (i = 0; i < n; i++) {
        char lb[64], seq[64], ev[128];
        gm_string name;
        const char *label = label_of(d, "/sequences", i, &name, lb);
        gm_loop_guard *g;
        buf holds = {NULL, 0, 0};
        long calls = len_at(d, ptr("/sequences/%ld/calls", i));
        gm_json_doc *trips = NULL;
        snprintf(seq, sizeof seq, "/sequences/%ld", i);
        g = guard_for(d, seq);
        buf_puts(&holds, "[");
        for (k = 0; k < calls; k++) {
            gm_string fp = {NULL, 0};
            snprintf(ev, sizeof ev, "/sequences/%ld/calls/%ld", i, k);
            guard_start(g, d, ev, "run-1", k, &fp);
            expect_plain(file, label, ptr("fingerprint %ld", k), &fp, d, ptr("/sequences/%ld/fingerprints/%ld", i, k));
            guard_consult(g, d, ev, "run-1", k, &fp, false, &holds, file, label);
            gm_string_free(&fp);
        }
        buf_puts(&holds, "]");
        expect_same_json(file, label, "trips", holds.p, d, ptr("/sequences/%ld/trips", i));
        check_ok(gm_json_parse(holds.p, holds.len, &trips), "trips");
        {
            gm_string at = {NULL, 0}, reps = {NULL, 0};
            const char *none = "null";
            json_at(trips, "/0/at", &at);
            json_at(trips, "/0/repeats", &reps);
            expect_same_json(file, label, "tripsAt", at.ptr ? at.ptr : none, d, ptr("/sequences/%ld/tripsAt", i));
            expect_same_json(file, label, "repeatsAtTrip", reps.ptr ? reps.ptr : none, d, ptr("/sequences/%ld/repeatsAtTrip", i));
            gm_string_free(&at);
            gm_string_free(&reps);
        }
        gm_json_doc_free(trips);
        free(holds.p);
        gm_loop_guard_free(g);
        gm_string_free(&name);
    }
    gm_json_doc_free(d);
    return (int)n;
}

/* The loop-kinds events of each entry of `list` in `rel` (attached, a retry checked at each
 * hold) against its holds; `detect` as for guard_with. */
static int run_hold_sequences(const char *file, const char *rel, const char *list, const char *detect) {
    gm_json_doc *d = load(rel);
    long n = len_at(d, list), i, k;
    if (n <= 0) die("no hold sequences");
    for (i = 0; i < n; i++) {
        char lb[64], seq[64], ev[128];
        gm_string name;
        const char *label = label_of(d, list, i, &name, lb);
        gm_loop_guard *g;
        buf holds = {NULL, 0, 0};
        long events = len_at(d, ptr("%s/%ld/events", list, i));
        snprintf(seq, sizeof seq, "%s/%ld", list, i);
        g = guard_with(d, seq, detect);
        buf_puts(&holds, "[");
        for (k = 0; k < events; k++) {
            gm_string event;
            snprintf(ev, sizeof ev, "%s/%ld/events/%ld", list, i, k);
            event = S(d, "%s/event", ev);
            if (event.ptr == NULL) die("loop-kinds: event without a type");
            if (strcmp(event.ptr, "start") == 0) {
                gm_string fp = {NULL, 0};
                guard_start(g, d, ev, "run", k, &fp);
                guard_consult(g, d, ev, "run", k, NULL, true, &holds, file, label);
                gm_string_free(&fp);
            } else if (strcmp(event.ptr, "error") == 0) {
                gm_string id = S(d, "%s/nodeId", ev), inst = S(d, "%s/instanceId", ev);
                gm_string nm = J(d, "%s/name", ev), msg = J(d, "%s/message", ev);
                check_ok(gm_loop_guard_errored(g, "run", 3, id.ptr, id.len, inst.ptr, inst.len, nm.ptr, nm.len, msg.ptr, msg.len), "errored");
                gm_string_free(&id);
                gm_string_free(&inst);
                gm_string_free(&nm);
                gm_string_free(&msg);
            } else if (strcmp(event.ptr, "finish") == 0) {
                gm_string id = S(d, "%s/nodeId", ev), inst = S(d, "%s/instanceId", ev);
                gm_string st = S(d, "%s/status", ev), out = J(d, "%s/output", ev);
                check_ok(gm_loop_guard_finished(g, "run", 3, id.ptr, id.len, inst.ptr, inst.len, st.ptr, st.len, out.ptr, out.len), "finished");
                gm_string_free(&id);
                gm_string_free(&inst);
                gm_string_free(&st);
                gm_string_free(&out);
            } else {
                die("loop-kinds: unknown event");
            }
            gm_string_free(&event);
        }
        buf_puts(&holds, "]");
        expect_same_json(file, label, "holds", holds.p, d, ptr("%s/%ld/holds", list, i));
        free(holds.p);
        gm_loop_guard_free(g);
        gm_string_free(&name);
    }
    gm_json_doc_free(d);
    return (int)n;
}

/* The reference's loop-kinds fixture runs with the opt-in detectors on. */
static int run_loop_kinds_sequences(void) {
    return run_hold_sequences("loop-kinds-fixture.json", "reference/loop-kinds-fixture.json", "/sequences",
                              "[\"cycle\",\"error-repeat\"]");
}

/* Our loop-hold defaults and opt-ins: each case's own `detect`. */
static int run_loop_detect_cases(void) {
    gm_loop_guard *g = NULL;
    gm_error *e = gm_loop_guard_new("{\"detect\":[\"loops\"]}", 20, &g);
    if (e == NULL) die("loop-detect: an unknown detector is refused");
    gm_error_free(e);
    return run_hold_sequences("loop-detect.json", "ours/loop-detect.json", "/cases", NULL);
}

/* Runs one file's cases and prints its count. */
static int report(const char *what, int count, int before) {
    printf("%s: %d cases%s\n", what, count, g_failures > before ? " (FAILED)" : "");
    return count;
}

int main(int argc, char **argv) {
    gm_json_doc *lg, *diff, *lone_doc;
    gm_string lone = {NULL, 0};
    int count, total = 0, before;
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2) die("usage: vectors <tests/vectors dir>");
    g_dir = argv[1];
    if (gm_abi_version() != GM_ABI_VERSION) die("ABI version mismatch");

    lg = load("reference/loop-guard-fixture.json");
    count = run_canonical("loop-guard-fixture.json", lg, "/canonical", 0);
    printf("loop-guard-fixture.json canonical: %d cases\n", count);
    total += count;
    gm_json_doc_free(lg);

    diff = load("reference/differential.json");
    count = run_canonical("differential.json", diff, "/canonical", 0);
    printf("differential.json canonical: %d cases\n", count);
    total += count;
    if (!str_at(diff, "/canonicalLoneSurrogates", &lone)) die("canonicalLoneSurrogates");
    check_ok(gm_json_parse(lone.ptr, lone.len, &lone_doc), "canonicalLoneSurrogates");
    count = run_canonical("differential.json", lone_doc, "", 0);
    printf("differential.json canonicalLoneSurrogates: %d cases\n", count);
    total += count;
    gm_json_doc_free(lone_doc);
    gm_string_free(&lone);
    gm_json_doc_free(diff);

    before = g_failures;
    count = run_shrink();
    printf("shrink-fixture.json: %d cases%s\n", count, g_failures > before ? " (FAILED)" : "");
    total += count;

    count = run_config("ours/environment.json");
    printf("environment.json: %d cases\n", count);
    total += count;
    count = run_config("ours/kill-switch.json");
    printf("kill-switch.json: %d cases\n", count);
    total += count;

    before = g_failures;
    total += report("jcs input/output", run_jcs(), before);
    before = g_failures;
    total += report("jcs es6-numbers-1k.txt", run_es6_numbers(), before);
    before = g_failures;
    total += report("jsontestsuite test_parsing", run_jsontestsuite(), before);

    diff = load("reference/differential.json");
    before = g_failures;
    total += report("differential.json redaction", run_redaction("differential.json", diff, "/redaction"), before);
    if (!str_at(diff, "/redactionLoneSurrogates", &lone)) die("redactionLoneSurrogates");
    check_ok(gm_json_parse(lone.ptr, lone.len, &lone_doc), "redactionLoneSurrogates");
    before = g_failures;
    total += report("differential.json redactionLoneSurrogates", run_redaction("differential.json lone", lone_doc, ""), before);
    gm_json_doc_free(lone_doc);
    gm_string_free(&lone);
    gm_json_doc_free(diff);

    {
        gm_json_doc *red = load("reference/redaction-fixture.json");
        gm_string placeholder = {NULL, 0};
        gm_str ours = gm_redacted_placeholder();
        str_at(red, "/placeholder", &placeholder);
        if (placeholder.ptr == NULL || placeholder.len != ours.len || memcmp(placeholder.ptr, ours.ptr, ours.len) != 0)
            fail("redaction-fixture.json", "placeholder", "REDACTED", NULL, placeholder.ptr);
        before = g_failures;
        total += report("redaction-fixture.json", run_redaction("redaction-fixture.json", red, "/cases"), before);
        gm_string_free(&placeholder);
        gm_json_doc_free(red);
    }

    before = g_failures;
    total += report("edit-input-fixture.json", run_edit_input(), before);
    before = g_failures;
    total += report("llm-fixture.json", run_llm(), before);
    before = g_failures;
    total += report("loop-kinds-fixture.json errorResult/truncated/errorText/breakOnEnv", run_smart(), before);
    before = g_failures;
    total += report("loop-guard-fixture.json sequences", run_loop_guard_sequences(), before);
    before = g_failures;
    total += report("loop-kinds-fixture.json sequences", run_loop_kinds_sequences(), before);
    before = g_failures;
    total += report("ours/loop-detect.json", run_loop_detect_cases(), before);

    printf("%d cases, %d failures\n", total, g_failures);
    return g_failures ? 1 : 0;
}
