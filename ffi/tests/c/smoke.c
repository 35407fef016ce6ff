/*
 * C smoke suite for odek's stable C ABI (ffi/include/odek.h).
 *
 * Compiled with -std=c11 -Wall -Wextra -Werror -pedantic against the header
 * and linked to the staticlib (libodek.a); driven by ffi/tests/c/run.sh.
 *
 *   smoke abuse          every export with each pointer parameter NULL in turn,
 *                        invalid UTF-8, invalid / wrong-shaped JSON, fabricated,
 *                        destroyed and wrong-kind handles, a forced panic, error
 *                        classes, out-params untouched on error, version checks.
 *                        Uses the in-memory engine ({"engine":"fake"}): no Docker.
 *   smoke loop <n>       n cycles of client_new -> resolve -> approval request ->
 *                        launch -> info -> describe -> exec -> destroy ->
 *                        client_free plus error paths (invalid JSON / UTF-8,
 *                        NULL, destroyed handles); every 10th cycle also exec
 *                        shell, exec_stream (plain and cancelled), narrow,
 *                        config view and the approve -> launch
 *                        flow; every 100th a caught panic. Frees every string
 *                        and error. Run under valgrind for the leak check.
 *                        Fake engine.
 *   smoke real <workdir> real Docker (client "{}"): resolve against Compose
 *                        project $ODEK_TEST_PROJECT ("odeke2e<ns>", this
 *                        checkout's: tests/ns.sh, as run.sh exports it) with
 *                        the image $ODEK_TEST_IMAGES/base:1 -> launch -> exec redis-cli ping ->
 *                        exec_stream (chunks per stream, a reentrant call
 *                        refused, a cancel from the callback) -> describe ->
 *                        destroy; checks no container is left.
 *
 * Every check prints PASS or FAIL; the exit status is 1 when any check failed,
 * 2 on a usage error.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "odek.h"

/* ------------------------------------------------------------------ */
/* Reporting                                                            */
/* ------------------------------------------------------------------ */

static unsigned long g_pass;
static unsigned long g_fail;
static int g_quiet; /* loop mode: print FAILs only */

static void result(int ok, const char *fmt, ...)
{
    va_list ap;
    if (ok) {
        g_pass++;
        if (g_quiet) {
            return;
        }
    } else {
        g_fail++;
    }
    fputs(ok ? "PASS " : "FAIL ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

/* The class the header promises for a code's hundreds digit. */
static const char *class_for(int32_t code)
{
    switch (code / 100) {
    case 1:
        return "usage";
    case 2:
    case 3:
        return "config";
    case 4:
        return "docker-rejected";
    case 5:
        return "image-unavailable";
    case 6:
        return "daemon-unreachable";
    case 7:
        return "cancelled";
    default:
        return NULL;
    }
}

/*
 * Checks an error object: non-NULL, code is `want1` or `want2` (0 = any code),
 * class matches the code's hundreds digit, message non-empty. Frees it.
 * Returns 1 when the check passed.
 */
static int expect_err2(odek_error_t *e, int32_t want1, int32_t want2, const char *what)
{
    int32_t code;
    const char *cls;
    const char *msg;
    const char *want_cls;
    int ok;

    if (e == NULL) {
        result(0, "%s: expected error %d, got success", what, (int)want1);
        return 0;
    }
    code = odek_error_code(e);
    cls = odek_error_class(e);
    msg = odek_error_message(e);
    want_cls = class_for(code);
    ok = (want1 == 0 || code == want1 || (want2 != 0 && code == want2)) && cls != NULL &&
         want_cls != NULL && strcmp(cls, want_cls) == 0 && msg != NULL && msg[0] != '\0';
    if (want2 != 0) {
        result(ok, "%s -> %d/%s (want %d or %d): %s", what, (int)code, cls ? cls : "(null)",
               (int)want1, (int)want2, msg ? msg : "(null)");
    } else {
        result(ok, "%s -> %d/%s (want %d, class %s): %s", what, (int)code, cls ? cls : "(null)",
               (int)want1, want_cls ? want_cls : "?", msg ? msg : "(null)");
    }
    odek_error_free(e);
    return ok;
}

static int expect_err(odek_error_t *e, int32_t want, const char *what)
{
    return expect_err2(e, want, 0, what);
}

/* Checks success; on failure prints the error and frees it. */
static int expect_ok(odek_error_t *e, const char *what)
{
    if (e == NULL) {
        result(1, "%s", what);
        return 1;
    }
    result(0, "%s -> error %d/%s: %s", what, (int)odek_error_code(e), odek_error_class(e),
           odek_error_message(e));
    odek_error_free(e);
    return 0;
}

/* What an odek_output_fn saw (odek_exec_stream); the callback appends each
 * chunk to its stream's buffer and, when asked, makes calls from inside. */
struct seen {
    char out[4096];
    size_t out_len;
    char err[4096];
    size_t err_len;
    unsigned chunks;
    int bad_stream;
    /* at the first chunk: a blocking call (must be ODEK_E_REENTRANT) */
    odek_sandbox_t *reenter;
    int32_t reenter_code;
    /* at the first chunk: cancel the call */
    odek_cancel_t *cancel;
};

static void on_output(void *user_data, int32_t stream, const uint8_t *bytes, size_t len)
{
    struct seen *s = user_data;
    char *buf = stream == ODEK_STREAM_STDOUT ? s->out : s->err;
    size_t *n = stream == ODEK_STREAM_STDOUT ? &s->out_len : &s->err_len;
    size_t room;

    s->chunks++;
    if (stream != ODEK_STREAM_STDOUT && stream != ODEK_STREAM_STDERR) {
        s->bad_stream = 1;
        return;
    }
    room = sizeof s->out - 1 - *n;
    if (len < room) {
        room = len;
    }
    memcpy(buf + *n, bytes, room);
    *n += room;
    buf[*n] = '\0';
    if (s->reenter != NULL) {
        char *r = NULL;
        odek_error_t *e = odek_exec(s->reenter, "{\"argv\":[\"true\"]}", &r);
        s->reenter_code = e != NULL ? odek_error_code(e) : 0;
        odek_error_free(e);
        odek_string_free(r);
        s->reenter = NULL;
    }
    if (s->cancel != NULL) {
        odek_error_free(odek_cancel(s->cancel));
        s->cancel = NULL;
    }
}

static int contains(const char *hay, const char *needle)
{
    return hay != NULL && strstr(hay, needle) != NULL;
}

/* ------------------------------------------------------------------ */
/* Small helpers                                                        */
/* ------------------------------------------------------------------ */

/* JSON string body escape of `s` into a malloc'd buffer. */
static char *json_escape(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n * 6 + 1);
    char *p = out;
    if (out == NULL) {
        abort();
    }
    for (; *s != '\0'; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            *p++ = '\\';
            *p++ = (char)c;
        } else if (c < 0x20) {
            p += sprintf(p, "\\u%04x", (unsigned)c);
        } else {
            *p++ = (char)c;
        }
    }
    *p = '\0';
    return out;
}

static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *buf;
    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        abort();
    }
    buf = malloc((size_t)n + 1);
    if (buf == NULL) {
        abort();
    }
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return buf;
}

/* A resolve request for `dir`; `project_config` reads ./odek.json. */
static char *resolve_request(const char *dir, const char *compose_project, int project_config)
{
    char *esc = json_escape(dir);
    char *req;
    if (compose_project != NULL) {
        req = xasprintf("{\"workdir\":\"%s\",\"settings\":{\"sandbox_compose_project\":\"%s\","
                        "\"sandbox_image\":\"odek-test/base:1\"},\"read_user_config\":false,"
                        "\"read_project_config\":%s}",
                        esc, compose_project, project_config ? "true" : "false");
    } else {
        req = xasprintf("{\"workdir\":\"%s\",\"settings\":{\"sandbox_image\":\"odek-test/base:1\"},"
                        "\"read_user_config\":false,\"read_project_config\":%s}",
                        esc, project_config ? "true" : "false");
    }
    free(esc);
    return req;
}

/* Makes a scratch workdir; with `project_json`, writes it as ./odek.json. */
static char *make_workdir(const char *project_json)
{
    char tmpl[] = "/tmp/odek-c-smoke-XXXXXX";
    char *dir = mkdtemp(tmpl);
    if (dir == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    dir = xasprintf("%s", dir);
    if (project_json != NULL) {
        char *path = xasprintf("%s/odek.json", dir);
        FILE *f = fopen(path, "w");
        if (f == NULL || fputs(project_json, f) < 0 || fclose(f) != 0) {
            perror(path);
            exit(2);
        }
        free(path);
    }
    return dir;
}

static void remove_workdir(char *dir)
{
    char *path = xasprintf("%s/odek.json", dir);
    unlink(path);
    free(path);
    rmdir(dir);
    free(dir);
}

/* Out-param sentinels: an error must leave out-params untouched. */
static char g_str_sentinel_obj;
#define STR_SENTINEL (&g_str_sentinel_obj)
#define CLIENT_SENTINEL ((odek_client_t *)(uintptr_t)0x5e5e5e50u)
#define SANDBOX_SENTINEL ((odek_sandbox_t *)(uintptr_t)0x5e5e5e60u)

/*
 * After a call that should have failed but succeeded (already reported as a
 * FAIL by expect_err*): frees what it wrote, so the run goes on cleanly.
 */
static void reclaim_str(char **out)
{
    if (*out != STR_SENTINEL) {
        odek_string_free(*out);
        *out = STR_SENTINEL;
    }
}

static void reclaim_client(odek_client_t **out)
{
    if (*out != CLIENT_SENTINEL) {
        odek_error_free(odek_client_free(*out));
        *out = CLIENT_SENTINEL;
    }
}

static void reclaim_sandbox(odek_sandbox_t **out)
{
    if (*out != SANDBOX_SENTINEL) {
        odek_error_free(odek_sandbox_destroy(*out));
        *out = SANDBOX_SENTINEL;
    }
}

/* Handles that were never returned by odek. */
#define FAKE_CLIENT ((odek_client_t *)(uintptr_t)0x1234u)
#define FAKE_SANDBOX ((odek_sandbox_t *)(uintptr_t)0x1234u)
#define FAKE_CLIENT2 ((odek_client_t *)(uintptr_t)0x0dec0008u)
#define FAKE_SANDBOX2 ((odek_sandbox_t *)(uintptr_t)0xdeadbeefu)

#define BAD_UTF8 "\xff\xfe"
#define BAD_UTF8_IN_JSON "{\"workdir\":\"/tmp/\xc3\x28\"}"

static const char *const BAD_JSON[] = {"{", "[1,", "nul", "", "{\"a\":1}}", "\"unterminated"};
#define N_BAD_JSON (sizeof BAD_JSON / sizeof BAD_JSON[0])
/* Parse as JSON but are not the expected object ("null" is valid for approval_json). */
static const char *const WRONG_SHAPE[] = {"[]", "42", "\"str\"", "true", "null", "{\"no_such_member\":1}"};
#define N_WRONG_SHAPE (sizeof WRONG_SHAPE / sizeof WRONG_SHAPE[0])

/* ------------------------------------------------------------------ */
/* abuse                                                                */
/* ------------------------------------------------------------------ */

struct ctx {
    odek_client_t *client;      /* live fake client */
    odek_client_t *dead_client; /* freed */
    char *plan;                 /* a valid plan (no approval needed) */
    char *plan_approval;        /* a valid plan that needs approval */
    odek_sandbox_t *sandbox;    /* live */
    odek_sandbox_t *dead_sandbox;
    const char *req; /* the resolve request of `plan` */
};

/* Handle variants that must be rejected: (value, expected code, label). */
struct bad_client {
    odek_client_t *h;
    int32_t code;
    const char *label;
};
struct bad_sandbox {
    odek_sandbox_t *h;
    int32_t code;
    const char *label;
};

static void abuse_static(void)
{
    const char *v = odek_version();
    odek_error_t *e;

    printf("--- versions, NULL-tolerant accessors, free functions\n");
    result(odek_abi_version() == ODEK_ABI_VERSION, "odek_abi_version() == ODEK_ABI_VERSION (%u == %d)",
           (unsigned)odek_abi_version(), ODEK_ABI_VERSION);
    result(v != NULL && v[0] != '\0', "odek_version() non-empty (\"%s\")", v ? v : "(null)");
    result(odek_version() == v, "odek_version() is a stable static string");
    result(odek_error_code(NULL) == 0, "odek_error_code(NULL) == 0");
    result(odek_error_class(NULL) != NULL && odek_error_class(NULL)[0] == '\0',
           "odek_error_class(NULL) == \"\"");
    result(odek_error_message(NULL) != NULL && odek_error_message(NULL)[0] == '\0',
           "odek_error_message(NULL) == \"\"");
    odek_string_free(NULL);
    result(1, "odek_string_free(NULL) is a no-op");
    odek_error_free(NULL);
    result(1, "odek_error_free(NULL) is a no-op");
    e = odek_sandbox_destroy(NULL);
    result(e == NULL, "odek_sandbox_destroy(NULL) is a no-op (returns NULL)");
    odek_error_free(e);
    e = odek_client_free(NULL);
    result(e == NULL, "odek_client_free(NULL) is a no-op (returns NULL)");
    odek_error_free(e);
}

static void abuse_panic(struct ctx *c)
{
    odek_error_t *e;
    char *plan = NULL;
    char *dir = make_workdir(NULL);
    char *req = resolve_request(dir, "shop", 0);
    int i;

    printf("--- forced panic (a Rust panic message on stderr is expected)\n");
    for (i = 0; i < 3; i++) {
        e = odek_debug_panic();
        expect_err(e, ODEK_E_PANIC, "odek_debug_panic()");
    }
    result(1, "process alive after 3 caught panics");
    /* The library still works after panics: the runtime and handle table are intact. */
    expect_ok(odek_resolve(c->client, req, &plan), "odek_resolve after panic");
    result(contains(plan, "odek.plan/1"), "plan after panic has schema odek.plan/1");
    odek_string_free(plan);
    plan = NULL;
    {
        char *out = NULL;
        expect_ok(odek_exec(c->sandbox, "{\"argv\":[\"true\"]}", &out), "odek_exec after panic");
        odek_string_free(out);
    }
    free(req);
    remove_workdir(dir);
}

static void abuse_client_new(void)
{
    odek_client_t *out = CLIENT_SENTINEL;
    size_t i;
    char what[160];

    printf("--- odek_client_new\n");
    expect_err(odek_client_new(NULL, &out), ODEK_E_NULL_POINTER, "odek_client_new(NULL, &out)");
    result(out == CLIENT_SENTINEL, "odek_client_new: out untouched on error");
    expect_err(odek_client_new("{}", NULL), ODEK_E_NULL_POINTER, "odek_client_new(\"{}\", NULL)");
    expect_err(odek_client_new(NULL, NULL), ODEK_E_NULL_POINTER, "odek_client_new(NULL, NULL)");
    expect_err(odek_client_new(BAD_UTF8, &out), ODEK_E_INVALID_UTF8, "odek_client_new(bad UTF-8)");
    expect_err(odek_client_new("{\"engine\":\"f\xc3\x28ke\"}", &out), ODEK_E_INVALID_UTF8,
               "odek_client_new(bad UTF-8 inside JSON)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_client_new(invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_client_new(BAD_JSON[i], &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_client_new(wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_client_new(WRONG_SHAPE[i], &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_client(&out);
    }
    /* A JSON array where the header documents an object: serde would map it
     * positionally onto the struct's fields (schema, docker_host, engine). */
    expect_err2(odek_client_new("[null,null,\"fake\"]", &out), ODEK_E_INVALID_ARGUMENT, ODEK_E_INVALID_JSON,
                "odek_client_new(positional array '[null,null,\"fake\"]')");
    reclaim_client(&out);
    expect_err(odek_client_new("{\"engine\":\"bogus\"}", &out), ODEK_E_INVALID_ARGUMENT,
               "odek_client_new({\"engine\":\"bogus\"})");
    expect_err(odek_client_new("{\"engine\":7}", &out), ODEK_E_INVALID_ARGUMENT,
               "odek_client_new({\"engine\":7})");
    expect_err(odek_client_new("{\"schema\":\"other/1\"}", &out), ODEK_E_INVALID_ARGUMENT,
               "odek_client_new({\"schema\":\"other/1\"})");
    expect_err(odek_client_new("{\"docker_host\":\"ftp://example\"}", &out), ODEK_E_ENDPOINT,
               "odek_client_new({\"docker_host\":\"ftp://example\"})");
    expect_err(odek_client_new("{\"engine\":\"fake\",\"sandbox_pool\":9}", &out), ODEK_E_INVALID_ARGUMENT,
               "odek_client_new({\"sandbox_pool\":9})");
    expect_err2(odek_client_new("{\"engine\":\"fake\",\"sandbox_pool\":-1}", &out), ODEK_E_INVALID_ARGUMENT,
                ODEK_E_INVALID_JSON, "odek_client_new({\"sandbox_pool\":-1})");
    reclaim_client(&out);
    result(out == CLIENT_SENTINEL, "odek_client_new: out untouched after all errors");
}

static void abuse_client_free(void)
{
    odek_client_t *c = NULL;
    printf("--- odek_client_free\n");
    expect_err(odek_client_free(FAKE_CLIENT), ODEK_E_INVALID_HANDLE, "odek_client_free(0x1234)");
    expect_err(odek_client_free(FAKE_CLIENT2), ODEK_E_INVALID_HANDLE, "odek_client_free(0x0dec0008)");
    if (expect_ok(odek_client_new("{\"engine\":\"fake\"}", &c), "odek_client_new(fake) for free test")) {
        expect_ok(odek_client_free(c), "odek_client_free(live)");
        expect_err(odek_client_free(c), ODEK_E_INVALID_HANDLE, "odek_client_free(already freed)");
    }
}

static void abuse_resolve(struct ctx *c, const char *good_req, const char *dir)
{
    char *out = STR_SENTINEL;
    size_t i;
    char what[200];
    const struct bad_client bad[] = {
        {NULL, ODEK_E_NULL_POINTER, "NULL"},
        {FAKE_CLIENT, ODEK_E_INVALID_HANDLE, "0x1234"},
        {FAKE_CLIENT2, ODEK_E_INVALID_HANDLE, "0x0dec0008"},
        {c->dead_client, ODEK_E_INVALID_HANDLE, "freed client"},
        {(odek_client_t *)(void *)c->sandbox, ODEK_E_INVALID_HANDLE, "sandbox handle as client"},
    };

    printf("--- odek_resolve\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_resolve(client=%s)", bad[i].label);
        expect_err(odek_resolve(bad[i].h, good_req, &out), bad[i].code, what);
    }
    expect_err(odek_resolve(c->client, NULL, &out), ODEK_E_NULL_POINTER, "odek_resolve(request=NULL)");
    expect_err(odek_resolve(c->client, good_req, NULL), ODEK_E_NULL_POINTER, "odek_resolve(out=NULL)");
    expect_err(odek_resolve(NULL, NULL, NULL), ODEK_E_NULL_POINTER, "odek_resolve(NULL, NULL, NULL)");
    expect_err(odek_resolve(c->client, BAD_UTF8, &out), ODEK_E_INVALID_UTF8, "odek_resolve(bad UTF-8)");
    expect_err(odek_resolve(c->client, BAD_UTF8_IN_JSON, &out), ODEK_E_INVALID_UTF8,
               "odek_resolve(bad UTF-8 inside JSON)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_resolve(invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_resolve(c->client, BAD_JSON[i], &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_resolve(wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_resolve(c->client, WRONG_SHAPE[i], &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_str(&out);
    }
    {
        /* fields in declaration order: schema, workdir, settings, read_user_config, read_project_config */
        char *esc = json_escape(dir);
        char *arr = xasprintf("[null,\"%s\",{\"sandbox_compose_project\":\"shop\",\"sandbox_image\":"
                              "\"odek-test/base:1\"},false,false]",
                              esc);
        snprintf(what, sizeof what, "odek_resolve(positional array '%s')", arr);
        expect_err2(odek_resolve(c->client, arr, &out), ODEK_E_INVALID_ARGUMENT, ODEK_E_INVALID_JSON, what);
        reclaim_str(&out);
        free(arr);
        free(esc);
    }
    expect_err(odek_resolve(c->client, "{\"workdir\":\"/tmp\",\"schema\":\"odek.other/1\"}", &out),
               ODEK_E_INVALID_ARGUMENT, "odek_resolve(unknown schema)");
    expect_err2(odek_resolve(c->client, "{\"workdir\":\"/tmp\",\"settings\":{\"sandbox_network\":\"host\"},"
                                        "\"read_user_config\":false,\"read_project_config\":false}",
                             &out),
                ODEK_E_NETWORK_MODE, ODEK_E_CONFIG, "odek_resolve(sandbox_network=host)");
    {
        /* a project directory (not /tmp itself, which is refused as a
           shared directory before the Compose project is looked up) */
        char *esc = json_escape(dir);
        char *req = xasprintf("{\"workdir\":\"%s\",\"settings\":{\"sandbox_compose_project\":\"nope\"},"
                              "\"read_user_config\":false,\"read_project_config\":false}",
                              esc);
        expect_err(odek_resolve(c->client, req, &out), ODEK_E_COMPOSE_NOT_RUNNING,
                   "odek_resolve(compose project not running)");
        free(req);
        free(esc);
    }
    result(out == STR_SENTINEL, "odek_resolve: out untouched after all errors");
}

static void abuse_approval_request(struct ctx *c)
{
    char *out = STR_SENTINEL;
    char *ok = NULL;
    size_t i;
    char what[200];

    printf("--- odek_plan_approval_request\n");
    expect_err(odek_plan_approval_request(NULL, &out), ODEK_E_NULL_POINTER,
               "odek_plan_approval_request(plan=NULL)");
    expect_err(odek_plan_approval_request(c->plan, NULL), ODEK_E_NULL_POINTER,
               "odek_plan_approval_request(out=NULL)");
    expect_err(odek_plan_approval_request(BAD_UTF8, &out), ODEK_E_INVALID_UTF8,
               "odek_plan_approval_request(bad UTF-8)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_plan_approval_request(invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_plan_approval_request(BAD_JSON[i], &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_plan_approval_request(wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_plan_approval_request(WRONG_SHAPE[i], &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_str(&out);
    }
    result(out == STR_SENTINEL, "odek_plan_approval_request: out untouched after all errors");
    if (expect_ok(odek_plan_approval_request(c->plan, &ok), "odek_plan_approval_request(plan w/o approval)")) {
        result(ok != NULL && strcmp(ok, "null") == 0, "approval request is JSON null (got %s)",
               ok ? ok : "(null)");
        odek_string_free(ok);
        ok = NULL;
    }
    if (expect_ok(odek_plan_approval_request(c->plan_approval, &ok),
                  "odek_plan_approval_request(plan needing approval)")) {
        result(contains(ok, "odek.approval-request/1"), "approval request has its schema");
        odek_string_free(ok);
    }
}

static void abuse_approve(struct ctx *c)
{
    char *out = STR_SENTINEL;
    char *approval = NULL;
    size_t i;
    char what[200];
    const struct bad_client bad[] = {
        {NULL, ODEK_E_NULL_POINTER, "NULL"},
        {FAKE_CLIENT, ODEK_E_INVALID_HANDLE, "0x1234"},
        {c->dead_client, ODEK_E_INVALID_HANDLE, "freed client"},
        {(odek_client_t *)(void *)c->sandbox, ODEK_E_INVALID_HANDLE, "sandbox handle as client"},
    };

    printf("--- odek_approve\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_approve(client=%s)", bad[i].label);
        expect_err(odek_approve(bad[i].h, c->plan_approval, "once", &out), bad[i].code, what);
    }
    expect_err(odek_approve(c->client, NULL, "once", &out), ODEK_E_NULL_POINTER, "odek_approve(plan=NULL)");
    expect_err(odek_approve(c->client, c->plan_approval, NULL, &out), ODEK_E_NULL_POINTER,
               "odek_approve(decision=NULL)");
    expect_err(odek_approve(c->client, c->plan_approval, "once", NULL), ODEK_E_NULL_POINTER,
               "odek_approve(out=NULL)");
    expect_err(odek_approve(c->client, BAD_UTF8, "once", &out), ODEK_E_INVALID_UTF8,
               "odek_approve(plan bad UTF-8)");
    expect_err(odek_approve(c->client, c->plan_approval, BAD_UTF8, &out), ODEK_E_INVALID_UTF8,
               "odek_approve(decision bad UTF-8)");
    expect_err(odek_approve(c->client, c->plan_approval, "onc\xc3", &out), ODEK_E_INVALID_UTF8,
               "odek_approve(decision truncated UTF-8)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_approve(plan invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_approve(c->client, BAD_JSON[i], "once", &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_approve(plan wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_approve(c->client, WRONG_SHAPE[i], "once", &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_str(&out);
    }
    expect_err(odek_approve(c->client, c->plan_approval, "always", &out), ODEK_E_INVALID_ARGUMENT,
               "odek_approve(decision \"always\")");
    expect_err(odek_approve(c->client, c->plan_approval, "", &out), ODEK_E_INVALID_ARGUMENT,
               "odek_approve(decision \"\")");
    /* "Errors when the plan needs no approval." */
    expect_err(odek_approve(c->client, c->plan, "once", &out), 0, "odek_approve(plan needing no approval)");
    result(out == STR_SENTINEL, "odek_approve: out untouched after all errors");
    if (expect_ok(odek_approve(c->client, c->plan_approval, "once", &approval), "odek_approve(once)")) {
        result(contains(approval, "odek.approval/1"), "approval has schema odek.approval/1");
        odek_string_free(approval);
    }
}

static void abuse_launch(struct ctx *c)
{
    odek_sandbox_t *out = SANDBOX_SENTINEL;
    odek_sandbox_t *s = NULL;
    char *approval = NULL;
    size_t i;
    char what[200];
    const struct bad_client bad[] = {
        {NULL, ODEK_E_NULL_POINTER, "NULL"},
        {FAKE_CLIENT, ODEK_E_INVALID_HANDLE, "0x1234"},
        {c->dead_client, ODEK_E_INVALID_HANDLE, "freed client"},
        {(odek_client_t *)(void *)c->sandbox, ODEK_E_INVALID_HANDLE, "sandbox handle as client"},
    };
    /* wrong shapes for approval_json ("null" is valid there). */
    static const char *const approval_shapes[] = {"[]", "42", "\"str\"", "true", "{}",
                                                  "{\"no_such_member\":1}"};

    printf("--- odek_launch\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_launch(client=%s)", bad[i].label);
        expect_err(odek_launch(bad[i].h, c->plan, "null", &out), bad[i].code, what);
    }
    expect_err(odek_launch(c->client, NULL, "null", &out), ODEK_E_NULL_POINTER, "odek_launch(plan=NULL)");
    expect_err(odek_launch(c->client, c->plan, NULL, &out), ODEK_E_NULL_POINTER,
               "odek_launch(approval=NULL)");
    expect_err(odek_launch(c->client, c->plan, "null", NULL), ODEK_E_NULL_POINTER, "odek_launch(out=NULL)");
    expect_err(odek_launch(c->client, BAD_UTF8, "null", &out), ODEK_E_INVALID_UTF8,
               "odek_launch(plan bad UTF-8)");
    expect_err(odek_launch(c->client, c->plan, BAD_UTF8, &out), ODEK_E_INVALID_UTF8,
               "odek_launch(approval bad UTF-8)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_launch(plan invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_launch(c->client, BAD_JSON[i], "null", &out), ODEK_E_INVALID_JSON, what);
        snprintf(what, sizeof what, "odek_launch(approval invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_launch(c->client, c->plan, BAD_JSON[i], &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_launch(plan wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_launch(c->client, WRONG_SHAPE[i], "null", &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_sandbox(&out);
    }
    for (i = 0; i < sizeof approval_shapes / sizeof approval_shapes[0]; i++) {
        snprintf(what, sizeof what, "odek_launch(approval wrong shape '%s')", approval_shapes[i]);
        expect_err2(odek_launch(c->client, c->plan, approval_shapes[i], &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_sandbox(&out);
    }
    expect_err(odek_launch(c->client, c->plan_approval, "null", &out), ODEK_E_APPROVAL_REQUIRED,
               "odek_launch(plan needing approval, approval null)");
    result(out == SANDBOX_SENTINEL, "odek_launch: out untouched after all errors");

    /* The approval flow on the fake engine. */
    if (expect_ok(odek_approve(c->client, c->plan_approval, "once", &approval), "odek_approve(once)")) {
        if (expect_ok(odek_launch(c->client, c->plan_approval, approval, &s), "odek_launch(with approval)")) {
            expect_ok(odek_sandbox_destroy(s), "odek_sandbox_destroy(approved sandbox)");
        }
        /* A tampered approval (its key altered) must not launch. */
        {
            char *k = strstr(approval, "\"key\":\"");
            s = SANDBOX_SENTINEL;
            if (k != NULL && k[7] != '"') {
                k[7] = k[7] == 'a' ? 'b' : 'a';
                expect_err(odek_launch(c->client, c->plan_approval, approval, &s), ODEK_E_APPROVAL_MISMATCH,
                           "odek_launch(tampered approval key)");
                reclaim_sandbox(&s);
            } else {
                result(0, "approval JSON has a non-empty \"key\": %s", approval);
            }
        }
        odek_string_free(approval);
    }

    /* "Sandboxes launched from it stay usable" after odek_client_free. */
    {
        odek_client_t *tmp = NULL;
        char *plan = NULL;
        char *r = NULL;
        s = NULL;
        if (expect_ok(odek_client_new("{\"engine\":\"fake\"}", &tmp), "odek_client_new(fake) #2") &&
            expect_ok(odek_resolve(tmp, c->req, &plan), "odek_resolve on client #2") &&
            expect_ok(odek_launch(tmp, plan, "null", &s), "odek_launch on client #2")) {
            expect_ok(odek_client_free(tmp), "odek_client_free(client with a live sandbox)");
            tmp = NULL;
            if (expect_ok(odek_exec(s, "{\"argv\":[\"true\"]}", &r), "odek_exec after its client was freed")) {
                odek_string_free(r);
            }
            expect_ok(odek_sandbox_destroy(s), "odek_sandbox_destroy after its client was freed");
        }
        odek_string_free(plan);
        if (tmp != NULL) {
            expect_ok(odek_client_free(tmp), "odek_client_free(client #2)");
        }
    }
}

/* A client with a warm pool ("sandbox_pool"): every launch hands out
 * another working sandbox; freeing the client removes the ready ones. */
static void client_pool(struct ctx *c)
{
    odek_client_t *pooled = NULL;
    char *plan = NULL;
    char *r = NULL;
    odek_sandbox_t *s = NULL;
    int i;

    printf("--- warm pool (sandbox_pool)\n");
    if (!expect_ok(odek_client_new("{\"engine\":\"fake\",\"sandbox_pool\":2}", &pooled),
                   "odek_client_new(fake, sandbox_pool 2)")) {
        return;
    }
    if (expect_ok(odek_resolve(pooled, c->req, &plan), "odek_resolve on the pooled client")) {
        for (i = 0; i < 3; i++) {
            s = NULL;
            if (expect_ok(odek_launch(pooled, plan, "null", &s), "odek_launch from the pool")) {
                if (expect_ok(odek_exec(s, "{\"argv\":[\"true\"]}", &r), "odek_exec in a pooled sandbox")) {
                    odek_string_free(r);
                }
                expect_ok(odek_sandbox_destroy(s), "odek_sandbox_destroy(pooled sandbox)");
            }
        }
    }
    odek_string_free(plan);
    expect_ok(odek_client_free(pooled), "odek_client_free(pooled client: removes the ready ones)");
}

static void abuse_sandbox_params(struct ctx *c)
{
    size_t i;
    char what[200];
    const struct bad_sandbox bad[] = {
        {NULL, ODEK_E_NULL_POINTER, "NULL"},
        {FAKE_SANDBOX, ODEK_E_INVALID_HANDLE, "0x1234"},
        {FAKE_SANDBOX2, ODEK_E_INVALID_HANDLE, "0xdeadbeef"},
        {c->dead_sandbox, ODEK_E_INVALID_HANDLE, "destroyed sandbox"},
        {(odek_sandbox_t *)(void *)c->client, ODEK_E_INVALID_HANDLE, "client handle as sandbox"},
    };
    char *s1 = STR_SENTINEL, *s2 = STR_SENTINEL, *s3 = STR_SENTINEL;
    const char *exec_ok = "{\"argv\":[\"true\"]}";
    static const char *const exec_shapes[] = {
        "{}", "{\"argv\":[\"a\"],\"shell\":\"b\"}", "{\"argv\":\"ls\"}", "{\"argv\":[1]}",
        "{\"shell\":\"x\",\"timeout_secs\":-1}", "{\"shell\":\"x\",\"timeout_secs\":0}",
        "{\"shell\":\"x\",\"env\":[]}",
        /* positional array (schema, argv): documented as an object */
        "[null,[\"true\"]]"};

    printf("--- odek_sandbox_info\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_sandbox_info(sandbox=%s)", bad[i].label);
        expect_err(odek_sandbox_info(bad[i].h, &s1), bad[i].code, what);
    }
    expect_err(odek_sandbox_info(c->sandbox, NULL), ODEK_E_NULL_POINTER, "odek_sandbox_info(out=NULL)");
    result(s1 == STR_SENTINEL, "odek_sandbox_info: out untouched after all errors");

    printf("--- odek_describe\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_describe(sandbox=%s)", bad[i].label);
        expect_err(odek_describe(bad[i].h, &s1, &s2, &s3), bad[i].code, what);
    }
    expect_err(odek_describe(c->sandbox, NULL, &s2, &s3), ODEK_E_NULL_POINTER,
               "odek_describe(environment_out=NULL)");
    expect_err(odek_describe(c->sandbox, &s1, NULL, &s3), ODEK_E_NULL_POINTER, "odek_describe(prompt_out=NULL)");
    expect_err(odek_describe(c->sandbox, &s1, &s2, NULL), ODEK_E_NULL_POINTER, "odek_describe(tool_out=NULL)");
    expect_err(odek_describe(NULL, NULL, NULL, NULL), ODEK_E_NULL_POINTER, "odek_describe(all NULL)");
    result(s1 == STR_SENTINEL && s2 == STR_SENTINEL && s3 == STR_SENTINEL,
           "odek_describe: outs untouched after all errors");

    printf("--- odek_exec\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_exec(sandbox=%s)", bad[i].label);
        expect_err(odek_exec(bad[i].h, exec_ok, &s1), bad[i].code, what);
    }
    expect_err(odek_exec(c->sandbox, NULL, &s1), ODEK_E_NULL_POINTER, "odek_exec(request=NULL)");
    expect_err(odek_exec(c->sandbox, exec_ok, NULL), ODEK_E_NULL_POINTER, "odek_exec(out=NULL)");
    expect_err(odek_exec(c->sandbox, BAD_UTF8, &s1), ODEK_E_INVALID_UTF8, "odek_exec(bad UTF-8)");
    expect_err(odek_exec(c->sandbox, "{\"shell\":\"echo \xe2\x82\"}", &s1), ODEK_E_INVALID_UTF8,
               "odek_exec(bad UTF-8 inside JSON)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_exec(invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_exec(c->sandbox, BAD_JSON[i], &s1), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_exec(wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_exec(c->sandbox, WRONG_SHAPE[i], &s1), ODEK_E_INVALID_ARGUMENT, ODEK_E_INVALID_JSON,
                    what);
        reclaim_str(&s1);
    }
    for (i = 0; i < sizeof exec_shapes / sizeof exec_shapes[0]; i++) {
        snprintf(what, sizeof what, "odek_exec(bad request '%s')", exec_shapes[i]);
        expect_err(odek_exec(c->sandbox, exec_shapes[i], &s1), ODEK_E_INVALID_ARGUMENT, what);
        reclaim_str(&s1);
    }

    printf("--- odek_read_file, odek_write_file, odek_edit_file, odek_list_directory\n");
    {
        typedef odek_error_t *(*file_fn)(const odek_sandbox_t *, const char *, const odek_cancel_t *, char **);
        static const struct {
            file_fn fn;
            const char *name;
            const char *ok;
        } files[] = {
            {odek_read_file, "odek_read_file", "{\"path\":\"a.txt\"}"},
            {odek_write_file, "odek_write_file", "{\"path\":\"a.txt\",\"content\":\"x\"}"},
            {odek_edit_file, "odek_edit_file", "{\"path\":\"a.txt\",\"edits\":[{\"oldText\":\"x\",\"newText\":\"y\"}]}"},
            {odek_list_directory, "odek_list_directory", "{\"path\":\".\"}"},
        };
        size_t f;
        for (f = 0; f < sizeof files / sizeof files[0]; f++) {
            for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
                snprintf(what, sizeof what, "%s(sandbox=%s)", files[f].name, bad[i].label);
                expect_err(files[f].fn(bad[i].h, files[f].ok, NULL, &s1), bad[i].code, what);
            }
            snprintf(what, sizeof what, "%s(request=NULL)", files[f].name);
            expect_err(files[f].fn(c->sandbox, NULL, NULL, &s1), ODEK_E_NULL_POINTER, what);
            snprintf(what, sizeof what, "%s(out=NULL)", files[f].name);
            expect_err(files[f].fn(c->sandbox, files[f].ok, NULL, NULL), ODEK_E_NULL_POINTER, what);
            snprintf(what, sizeof what, "%s(bad UTF-8)", files[f].name);
            expect_err(files[f].fn(c->sandbox, BAD_UTF8, NULL, &s1), ODEK_E_INVALID_UTF8, what);
            for (i = 0; i < N_BAD_JSON; i++) {
                snprintf(what, sizeof what, "%s(invalid JSON '%s')", files[f].name, BAD_JSON[i]);
                expect_err(files[f].fn(c->sandbox, BAD_JSON[i], NULL, &s1), ODEK_E_INVALID_JSON, what);
            }
            snprintf(what, sizeof what, "%s(unknown member)", files[f].name);
            expect_err(files[f].fn(c->sandbox, "{\"path\":\"a\",\"nope\":1}", NULL, &s1),
                       ODEK_E_INVALID_ARGUMENT, what);
            /* The fake engine's sandbox has no odek supervisor: refused, nothing ran. */
            snprintf(what, sizeof what, "%s(no supervisor)", files[f].name);
            expect_err(files[f].fn(c->sandbox, files[f].ok, NULL, &s1), ODEK_E_FILE, what);
        }
        result(s1 == STR_SENTINEL, "file calls: out untouched after all errors");
    }
    result(s1 == STR_SENTINEL, "odek_exec: out untouched after all errors");

    printf("--- odek_exec_stream\n");
    {
        struct seen seen;
        memset(&seen, 0, sizeof seen);
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            snprintf(what, sizeof what, "odek_exec_stream(sandbox=%s)", bad[i].label);
            expect_err(odek_exec_stream(bad[i].h, exec_ok, NULL, on_output, &seen, &s1), bad[i].code, what);
        }
        expect_err(odek_exec_stream(c->sandbox, NULL, NULL, on_output, &seen, &s1), ODEK_E_NULL_POINTER,
                   "odek_exec_stream(request=NULL)");
        expect_err(odek_exec_stream(c->sandbox, exec_ok, NULL, NULL, &seen, &s1), ODEK_E_NULL_POINTER,
                   "odek_exec_stream(on_output=NULL)");
        expect_err(odek_exec_stream(c->sandbox, exec_ok, NULL, on_output, &seen, NULL), ODEK_E_NULL_POINTER,
                   "odek_exec_stream(out=NULL)");
        expect_err(odek_exec_stream(c->sandbox, BAD_UTF8, NULL, on_output, &seen, &s1), ODEK_E_INVALID_UTF8,
                   "odek_exec_stream(bad UTF-8)");
        expect_err(odek_exec_stream(c->sandbox, "{", NULL, on_output, &seen, &s1), ODEK_E_INVALID_JSON,
                   "odek_exec_stream(invalid JSON)");
        expect_err(odek_exec_stream(c->sandbox, "{\"argv\":[\"a\"],\"shell\":\"b\"}", NULL, on_output, &seen, &s1),
                   ODEK_E_INVALID_ARGUMENT, "odek_exec_stream(argv and shell)");
        expect_err(odek_exec_stream(c->sandbox, exec_ok, (const odek_cancel_t *)(void *)c->client, on_output,
                                    &seen, &s1),
                   ODEK_E_INVALID_HANDLE, "odek_exec_stream(client handle as cancel)");
        result(s1 == STR_SENTINEL, "odek_exec_stream: out untouched after all errors");
        result(seen.chunks == 0, "odek_exec_stream: no callback on a refused call");
        if (expect_ok(odek_exec_stream(c->sandbox, exec_ok, NULL, on_output, &seen, &s1),
                      "odek_exec_stream(fake engine)")) {
            result(contains(s1, "odek.exec-result/1") && contains(s1, "\"exit_code\":0,"),
                   "odek_exec_stream: odek_exec's result");
            odek_string_free(s1);
            s1 = STR_SENTINEL;
        }
    }

    printf("--- odek_stdin_* and odek_exec_stream_stdin\n");
    {
        odek_stdin_t *in = odek_stdin_new();
        result(in != NULL, "odek_stdin_new");
        expect_err(odek_stdin_write(NULL, (const uint8_t *)"x", 1), ODEK_E_NULL_POINTER, "odek_stdin_write(NULL)");
        expect_err(odek_stdin_write(in, NULL, 1), ODEK_E_NULL_POINTER, "odek_stdin_write(bytes=NULL, len=1)");
        expect_ok(odek_stdin_write(in, NULL, 0), "odek_stdin_write(bytes=NULL, len=0)");
        expect_ok(odek_stdin_write(in, (const uint8_t *)"a\0b", 3), "odek_stdin_write(3 bytes)");
        expect_err(odek_stdin_write((const odek_stdin_t *)(void *)c->client, (const uint8_t *)"x", 1),
                   ODEK_E_INVALID_HANDLE, "odek_stdin_write(client handle as stdin)");
        expect_err(odek_exec_stream_stdin(c->sandbox, exec_ok, NULL, NULL, NULL, NULL, &s1), ODEK_E_NULL_POINTER,
                   "odek_exec_stream_stdin(stdin=NULL)");
        expect_err(odek_exec_stream_stdin(c->sandbox, exec_ok, NULL, in, NULL, NULL, NULL), ODEK_E_NULL_POINTER,
                   "odek_exec_stream_stdin(out=NULL)");
        /* The fake engine runs no supervisor: refused before anything runs. */
        expect_err(odek_exec_stream_stdin(c->sandbox, exec_ok, NULL, in, NULL, NULL, &s1), ODEK_E_EXEC,
                   "odek_exec_stream_stdin(no supervisor)");
        expect_err(odek_exec_stream_stdin(c->sandbox, exec_ok, NULL, in, NULL, NULL, &s1), ODEK_E_INVALID_ARGUMENT,
                   "odek_exec_stream_stdin(a handle another call took)");
        result(s1 == STR_SENTINEL, "odek_exec_stream_stdin: out untouched after all errors");
        expect_err(odek_stdin_write(in, (const uint8_t *)"x", 1), ODEK_E_INVALID_ARGUMENT,
                   "odek_stdin_write after the exec ended");
        expect_ok(odek_stdin_close(in), "odek_stdin_close");
        expect_ok(odek_stdin_close(in), "odek_stdin_close again (idempotent)");
        expect_err(odek_stdin_close(NULL), ODEK_E_NULL_POINTER, "odek_stdin_close(NULL)");
        expect_ok(odek_stdin_free(in), "odek_stdin_free");
        expect_err(odek_stdin_free(in), ODEK_E_INVALID_HANDLE, "odek_stdin_free(freed again)");
        expect_ok(odek_stdin_free(NULL), "odek_stdin_free(NULL)");
    }

    printf("--- odek_sandbox_destroy\n");
    expect_err(odek_sandbox_destroy(FAKE_SANDBOX), ODEK_E_INVALID_HANDLE, "odek_sandbox_destroy(0x1234)");
    expect_err(odek_sandbox_destroy(FAKE_SANDBOX2), ODEK_E_INVALID_HANDLE, "odek_sandbox_destroy(0xdeadbeef)");
    expect_err(odek_sandbox_destroy(c->dead_sandbox), ODEK_E_INVALID_HANDLE,
               "odek_sandbox_destroy(destroyed again)");
    expect_err(odek_sandbox_destroy((odek_sandbox_t *)(void *)c->client), ODEK_E_INVALID_HANDLE,
               "odek_sandbox_destroy(client handle as sandbox)");
    expect_err(odek_client_free((odek_client_t *)(void *)c->sandbox), ODEK_E_INVALID_HANDLE,
               "odek_client_free(sandbox handle as client)");
    /* The wrong-kind frees above must not have removed the live handles. */
    {
        char *r = NULL;
        expect_ok(odek_exec(c->sandbox, exec_ok, &r), "live sandbox survives wrong-kind free attempts");
        odek_string_free(r);
    }
}

static void abuse_narrow(struct ctx *c)
{
    char *out = STR_SENTINEL;
    char *child = NULL;
    size_t i;
    char what[200];

    printf("--- odek_narrow\n");
    expect_err(odek_narrow(NULL, "{}", &out), ODEK_E_NULL_POINTER, "odek_narrow(parent=NULL)");
    expect_err(odek_narrow(c->plan, NULL, &out), ODEK_E_NULL_POINTER, "odek_narrow(request=NULL)");
    expect_err(odek_narrow(c->plan, "{}", NULL), ODEK_E_NULL_POINTER, "odek_narrow(out=NULL)");
    expect_err(odek_narrow(BAD_UTF8, "{}", &out), ODEK_E_INVALID_UTF8, "odek_narrow(parent bad UTF-8)");
    expect_err(odek_narrow(c->plan, BAD_UTF8, &out), ODEK_E_INVALID_UTF8, "odek_narrow(request bad UTF-8)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_narrow(parent invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_narrow(BAD_JSON[i], "{}", &out), ODEK_E_INVALID_JSON, what);
        snprintf(what, sizeof what, "odek_narrow(request invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_narrow(c->plan, BAD_JSON[i], &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_narrow(parent wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_narrow(WRONG_SHAPE[i], "{}", &out), ODEK_E_INVALID_ARGUMENT, ODEK_E_INVALID_JSON, what);
        reclaim_str(&out);
        snprintf(what, sizeof what, "odek_narrow(request wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_narrow(c->plan, WRONG_SHAPE[i], &out), ODEK_E_INVALID_ARGUMENT, ODEK_E_INVALID_JSON,
                    what);
        reclaim_str(&out);
    }
    expect_err2(odek_narrow(c->plan, "[null,null,null,\"none\"]", &out), ODEK_E_INVALID_ARGUMENT,
                ODEK_E_INVALID_JSON, "odek_narrow(positional array '[null,null,null,\"none\"]')");
    reclaim_str(&out);
    expect_err(odek_narrow(c->plan, "{\"pids_limit\":999999}", &out), ODEK_E_NARROW,
               "odek_narrow(widening pids_limit)");
    expect_err(odek_narrow(c->plan, "{\"image\":\"other/image:2\"}", &out), ODEK_E_NARROW,
               "odek_narrow(different image)");
    result(out == STR_SENTINEL, "odek_narrow: out untouched after all errors");
    if (expect_ok(odek_narrow(c->plan, "{\"network_mode\":\"none\"}", &child), "odek_narrow(network_mode none)")) {
        result(contains(child, "odek.plan/1"), "child plan has schema odek.plan/1");
        odek_string_free(child);
    }
}

/* Cancel handles: NULL, cancelled, freed and foreign handles, through every
 * _cancellable entry point; out-params stay untouched on errors. */
static void abuse_cancel(struct ctx *c)
{
    char *out = STR_SENTINEL, *o2 = STR_SENTINEL, *o3 = STR_SENTINEL;
    odek_sandbox_t *s = SANDBOX_SENTINEL;
    odek_cancel_t *k = odek_cancel_new();
    printf("--- cancel\n");
    result(k != NULL, "odek_cancel_new() is not NULL");
    expect_err(odek_cancel(NULL), ODEK_E_NULL_POINTER, "odek_cancel(NULL)");
    result(odek_cancel_free(NULL) == NULL, "odek_cancel_free(NULL) is a no-op");
    if (expect_ok(odek_resolve_cancellable(c->client, c->req, k, &out), "odek_resolve_cancellable(not cancelled)")) {
        odek_string_free(out);
        out = STR_SENTINEL;
    }
    if (expect_ok(odek_resolve_cancellable(c->client, c->req, NULL, &out), "odek_resolve_cancellable(NULL cancel)")) {
        odek_string_free(out);
        out = STR_SENTINEL;
    }
    expect_ok(odek_cancel(k), "odek_cancel(live)");
    expect_ok(odek_cancel(k), "odek_cancel(twice: idempotent)");
    expect_err(odek_resolve_cancellable(c->client, c->req, k, &out), ODEK_E_CANCELLED,
               "odek_resolve_cancellable(cancelled)");
    expect_err(odek_launch_cancellable(c->client, c->plan, "null", k, &s), ODEK_E_CANCELLED,
               "odek_launch_cancellable(cancelled)");
    expect_err(odek_describe_cancellable(c->sandbox, k, &out, &o2, &o3), ODEK_E_CANCELLED,
               "odek_describe_cancellable(cancelled)");
    expect_err(odek_exec_cancellable(c->sandbox, "{\"argv\":[\"true\"]}", k, &out), ODEK_E_CANCELLED,
               "odek_exec_cancellable(cancelled)");
    expect_err(odek_config_view_cancellable(c->client, c->plan, k, &out), ODEK_E_CANCELLED,
               "odek_config_view_cancellable(cancelled)");
    result(out == STR_SENTINEL && o2 == STR_SENTINEL && o3 == STR_SENTINEL && s == SANDBOX_SENTINEL,
           "cancelled calls write no out-param");
    expect_ok(odek_cancel_free(k), "odek_cancel_free(live)");
    expect_err(odek_cancel_free(k), ODEK_E_INVALID_HANDLE, "odek_cancel_free(twice)");
    expect_err(odek_cancel(k), ODEK_E_INVALID_HANDLE, "odek_cancel(after free)");
    expect_err(odek_exec_cancellable(c->sandbox, "{\"argv\":[\"true\"]}", k, &out), ODEK_E_INVALID_HANDLE,
               "odek_exec_cancellable(freed cancel)");
    expect_err(odek_cancel((odek_cancel_t *)c->client), ODEK_E_INVALID_HANDLE, "odek_cancel(a client handle)");
    result(out == STR_SENTINEL, "out untouched after all cancel errors");
}

static void abuse_config_view(struct ctx *c)
{
    char *out = STR_SENTINEL;
    char *view = NULL;
    size_t i;
    char what[200];
    const struct bad_client bad[] = {
        {NULL, ODEK_E_NULL_POINTER, "NULL"},
        {FAKE_CLIENT, ODEK_E_INVALID_HANDLE, "0x1234"},
        {c->dead_client, ODEK_E_INVALID_HANDLE, "freed client"},
        {(odek_client_t *)(void *)c->sandbox, ODEK_E_INVALID_HANDLE, "sandbox handle as client"},
    };

    printf("--- odek_config_view\n");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(what, sizeof what, "odek_config_view(client=%s)", bad[i].label);
        expect_err(odek_config_view(bad[i].h, c->plan, &out), bad[i].code, what);
    }
    expect_err(odek_config_view(c->client, NULL, &out), ODEK_E_NULL_POINTER, "odek_config_view(plan=NULL)");
    expect_err(odek_config_view(c->client, c->plan, NULL), ODEK_E_NULL_POINTER, "odek_config_view(out=NULL)");
    expect_err(odek_config_view(c->client, BAD_UTF8, &out), ODEK_E_INVALID_UTF8, "odek_config_view(bad UTF-8)");
    for (i = 0; i < N_BAD_JSON; i++) {
        snprintf(what, sizeof what, "odek_config_view(invalid JSON '%s')", BAD_JSON[i]);
        expect_err(odek_config_view(c->client, BAD_JSON[i], &out), ODEK_E_INVALID_JSON, what);
    }
    for (i = 0; i < N_WRONG_SHAPE; i++) {
        snprintf(what, sizeof what, "odek_config_view(wrong shape '%s')", WRONG_SHAPE[i]);
        expect_err2(odek_config_view(c->client, WRONG_SHAPE[i], &out), ODEK_E_INVALID_ARGUMENT,
                    ODEK_E_INVALID_JSON, what);
        reclaim_str(&out);
    }
    result(out == STR_SENTINEL, "odek_config_view: out untouched after all errors");
    if (expect_ok(odek_config_view(c->client, c->plan, &view), "odek_config_view(valid)")) {
        result(contains(view, "odek.config-view/1"), "config view has schema odek.config-view/1");
        odek_string_free(view);
    }
}

static int run_abuse(void)
{
    struct ctx c;
    char *dir = make_workdir(NULL);
    /* A project config that asks for networks: the plan needs approval. */
    char *dir_a = make_workdir("{\"sandbox_compose_project\": \"shop\"}\n");
    char *req = resolve_request(dir, "shop", 0);
    char *req_a = resolve_request(dir_a, NULL, 1);
    char *s = NULL;

    memset(&c, 0, sizeof c);
    c.req = req;
    abuse_static();
    abuse_client_new();
    abuse_client_free();

    printf("--- fixtures (fake engine)\n");
    if (!expect_ok(odek_client_new("{\"engine\":\"fake\"}", &c.client), "odek_client_new(fake)") ||
        !expect_ok(odek_client_new("{\"engine\":\"fake\"}", &c.dead_client), "odek_client_new(fake) to free") ||
        !expect_ok(odek_client_free(c.dead_client), "odek_client_free") ||
        !expect_ok(odek_resolve(c.client, req, &c.plan), "odek_resolve(shop)") ||
        !expect_ok(odek_resolve(c.client, req_a, &c.plan_approval), "odek_resolve(project config)") ||
        !expect_ok(odek_launch(c.client, c.plan, "null", &c.sandbox), "odek_launch") ||
        !expect_ok(odek_launch(c.client, c.plan, "null", &c.dead_sandbox), "odek_launch (to destroy)") ||
        !expect_ok(odek_sandbox_destroy(c.dead_sandbox), "odek_sandbox_destroy")) {
        printf("FAIL fixtures could not be set up; stopping\n");
        return 1;
    }
    result(contains(c.plan, "\"approval\":null"), "plan from operator settings needs no approval");
    result(!contains(c.plan_approval, "\"approval\":null"), "plan from project config needs approval");
    result((uintptr_t)c.client != 0 && (uintptr_t)c.sandbox != (uintptr_t)c.client,
           "handles are distinct non-NULL values");
    if (expect_ok(odek_sandbox_info(c.sandbox, &s), "odek_sandbox_info(live)")) {
        result(contains(s, "odek.sandbox-info/1"), "sandbox info has schema odek.sandbox-info/1");
        odek_string_free(s);
    }

    abuse_resolve(&c, req, dir);
    abuse_approval_request(&c);
    abuse_approve(&c);
    abuse_launch(&c);
    client_pool(&c);
    abuse_sandbox_params(&c);
    abuse_narrow(&c);
    abuse_config_view(&c);
    abuse_cancel(&c);
    abuse_panic(&c);

    printf("--- teardown\n");
    expect_ok(odek_sandbox_destroy(c.sandbox), "odek_sandbox_destroy(live)");
    expect_err(odek_sandbox_destroy(c.sandbox), ODEK_E_INVALID_HANDLE, "odek_sandbox_destroy(twice)");
    {
        char *r = STR_SENTINEL;
        expect_err(odek_exec(c.sandbox, "{\"argv\":[\"true\"]}", &r), ODEK_E_INVALID_HANDLE,
                   "odek_exec(after destroy)");
    }
    expect_ok(odek_client_free(c.client), "odek_client_free(live)");
    expect_err(odek_client_free(c.client), ODEK_E_INVALID_HANDLE, "odek_client_free(twice)");
    {
        char *r = STR_SENTINEL;
        expect_err(odek_resolve(c.client, req, &r), ODEK_E_INVALID_HANDLE, "odek_resolve(after client free)");
    }
    odek_string_free(c.plan);
    odek_string_free(c.plan_approval);
    free(req);
    free(req_a);
    remove_workdir(dir);
    remove_workdir(dir_a);
    return 0;
}

/* ------------------------------------------------------------------ */
/* loop                                                                 */
/* ------------------------------------------------------------------ */

/* Every EXTRA_EVERY-th cycle also runs the approval flow, narrow, config view
 * and a second exec: each of those allocation paths is still exercised 100
 * times in 1,000 cycles (enough for valgrind to see any per-call leak) while
 * the loop stays affordable under valgrind (resolve dominates the cost). */
#define EXTRA_EVERY 10
/* Every PANIC_EVERY-th cycle forces a caught panic. */
#define PANIC_EVERY 100

static void extra_cycle(odek_client_t *client, const char *plan, const char *req_a, odek_sandbox_t *sb)
{
    char *res = NULL, *child = NULL, *view = NULL, *plan_a = NULL, *approval = NULL;
    char *junk = STR_SENTINEL;
    odek_sandbox_t *sb2 = NULL;
    odek_sandbox_t *sb_junk = SANDBOX_SENTINEL;
    odek_cancel_t *k = odek_cancel_new();

    /* A cancel handle: an exec it lets run, then one it cancels. */
    if (sb != NULL && expect_ok(odek_exec_cancellable(sb, "{\"argv\":[\"true\"]}", k, &res),
                                "loop: odek_exec_cancellable")) {
        odek_string_free(res);
        res = NULL;
    }
    expect_ok(odek_cancel(k), "loop: odek_cancel");
    if (sb != NULL) {
        expect_err(odek_exec_cancellable(sb, "{\"argv\":[\"true\"]}", k, &junk), ODEK_E_CANCELLED,
                   "loop: odek_exec_cancellable(cancelled)");
    }
    if (sb != NULL) {
        struct seen seen;
        memset(&seen, 0, sizeof seen);
        expect_err(odek_exec_stream(sb, "{\"argv\":[\"true\"]}", k, on_output, &seen, &junk), ODEK_E_CANCELLED,
                   "loop: odek_exec_stream(cancelled)");
        if (expect_ok(odek_exec_stream(sb, "{\"argv\":[\"true\"]}", NULL, on_output, &seen, &res),
                      "loop: odek_exec_stream")) {
            result(contains(res, "odek.exec-result/1"), "loop: exec_stream result schema");
            odek_string_free(res);
            res = NULL;
        }
    }
    expect_ok(odek_cancel_free(k), "loop: odek_cancel_free");

    if (sb != NULL &&
        expect_ok(odek_exec(sb, "{\"shell\":\"echo $A\",\"env\":{\"A\":\"b\"},\"timeout_secs\":5,"
                                "\"workdir\":\"/workspace\"}",
                            &res),
                  "loop: odek_exec shell")) {
        odek_string_free(res);
    }
    if (expect_ok(odek_narrow(plan, "{\"network_mode\":\"none\",\"readonly\":true}", &child), "loop: odek_narrow")) {
        odek_string_free(child);
    }
    expect_err(odek_narrow(plan, "{\"pids_limit\":999999}", &junk), ODEK_E_NARROW, "loop: narrow widening");
    if (expect_ok(odek_config_view(client, plan, &view), "loop: odek_config_view")) {
        odek_string_free(view);
    }
    /* approval flow: a project config asks for a Compose project */
    if (expect_ok(odek_resolve(client, req_a, &plan_a), "loop: odek_resolve (approval)")) {
        if (expect_ok(odek_approve(client, plan_a, "once", &approval), "loop: odek_approve")) {
            if (expect_ok(odek_launch(client, plan_a, approval, &sb2), "loop: odek_launch (approved)")) {
                expect_ok(odek_sandbox_destroy(sb2), "loop: odek_sandbox_destroy (approved)");
            }
            odek_string_free(approval);
        }
        expect_err(odek_launch(client, plan_a, "null", &sb_junk), ODEK_E_APPROVAL_REQUIRED,
                   "loop: launch without approval");
        odek_string_free(plan_a);
    }
    result(junk == STR_SENTINEL && sb_junk == SANDBOX_SENTINEL, "loop: out-params untouched on error");
}

static void one_cycle(unsigned long i, const char *req, const char *req_a)
{
    odek_client_t *client = NULL;
    odek_sandbox_t *sb = NULL;
    char *plan = NULL, *areq = NULL, *info = NULL, *env = NULL, *prompt = NULL, *tool = NULL, *res = NULL;
    char *junk = STR_SENTINEL;

    if (!expect_ok(odek_client_new("{\"engine\":\"fake\"}", &client), "loop: odek_client_new")) {
        return;
    }
    if (expect_ok(odek_resolve(client, req, &plan), "loop: odek_resolve")) {
        if (expect_ok(odek_plan_approval_request(plan, &areq), "loop: odek_plan_approval_request")) {
            result(strcmp(areq, "null") == 0, "loop: approval request is null");
            odek_string_free(areq);
        }
        if (expect_ok(odek_launch(client, plan, "null", &sb), "loop: odek_launch")) {
            if (expect_ok(odek_sandbox_info(sb, &info), "loop: odek_sandbox_info")) {
                odek_string_free(info);
            }
            if (expect_ok(odek_describe(sb, &env, &prompt, &tool), "loop: odek_describe")) {
                result(contains(env, "odek.environment/1") && prompt[0] != '\0' && tool[0] != '\0',
                       "loop: describe outputs");
                odek_string_free(env);
                odek_string_free(prompt);
                odek_string_free(tool);
            }
            if (expect_ok(odek_exec(sb, "{\"argv\":[\"redis-cli\",\"-h\",\"redis\",\"ping\"]}", &res),
                          "loop: odek_exec")) {
                result(contains(res, "odek.exec-result/1"), "loop: exec result schema");
                odek_string_free(res);
            }
            if (i % EXTRA_EVERY == 0) {
                extra_cycle(client, plan, req_a, sb);
            }
            expect_ok(odek_sandbox_destroy(sb), "loop: odek_sandbox_destroy");
            /* error paths: every error object is freed too */
            expect_err(odek_exec(sb, "{\"argv\":[\"true\"]}", &junk), ODEK_E_INVALID_HANDLE,
                       "loop: exec after destroy");
            expect_err(odek_sandbox_destroy(sb), ODEK_E_INVALID_HANDLE, "loop: destroy twice");
        }
        odek_string_free(plan);
    }
    expect_err(odek_resolve(client, "{", &junk), ODEK_E_INVALID_JSON, "loop: resolve invalid JSON");
    expect_err(odek_resolve(client, BAD_UTF8, &junk), ODEK_E_INVALID_UTF8, "loop: resolve invalid UTF-8");
    expect_err(odek_resolve(NULL, req, &junk), ODEK_E_NULL_POINTER, "loop: resolve NULL client");
    expect_err(odek_resolve(client, "{\"workdir\":\"/tmp\",\"bogus\":1}", &junk), ODEK_E_INVALID_ARGUMENT,
               "loop: resolve unknown member");
    if (i % PANIC_EVERY == 0) {
        expect_err(odek_debug_panic(), ODEK_E_PANIC, "loop: odek_debug_panic");
    }
    expect_ok(odek_client_free(client), "loop: odek_client_free");
    expect_err(odek_client_free(client), ODEK_E_INVALID_HANDLE, "loop: client_free twice");
    result(junk == STR_SENTINEL, "loop: out-params untouched on error");
}

static int run_loop(unsigned long n)
{
    char *dir = make_workdir(NULL);
    char *dir_a = make_workdir("{\"sandbox_compose_project\": \"shop\"}\n");
    char *req = resolve_request(dir, "shop", 0);
    char *req_a = resolve_request(dir_a, NULL, 1);
    unsigned long i;

    g_quiet = 1;
    printf("loop: %lu cycles (fake engine; extras every %d, panic every %d)\n", n, EXTRA_EVERY, PANIC_EVERY);
    fflush(stdout);
    for (i = 0; i < n; i++) {
        one_cycle(i, req, req_a);
        if ((i + 1) % 50 == 0 || i + 1 == n) {
            printf("loop: %lu/%lu cycles, %lu checks passed, %lu failed\n", i + 1, n, g_pass, g_fail);
            fflush(stdout);
        }
    }
    g_quiet = 0;
    result(g_fail == 0, "loop: %lu cycles without a failed check", n);
    free(req);
    free(req_a);
    remove_workdir(dir);
    remove_workdir(dir_a);
    return 0;
}

/* ------------------------------------------------------------------ */
/* real                                                                 */
/* ------------------------------------------------------------------ */

/* Number of containers labelled as odek sandboxes of `dir` (docker ps -aq), -1 on error. */
static int count_sandbox_containers(const char *dir)
{
    char *cmd;
    FILE *p;
    char line[256];
    int n = 0;

    if (strchr(dir, '\'') != NULL) {
        return -1;
    }
    cmd = xasprintf("docker ps -aq --filter label=dev.odek.sandbox=true --filter 'label=dev.odek.workdir=%s'",
                    dir);
    p = popen(cmd, "r");
    free(cmd);
    if (p == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, p) != NULL) {
        if (line[0] != '\n') {
            n++;
        }
    }
    if (pclose(p) != 0) {
        return -1;
    }
    return n;
}

static int run_real(const char *dir)
{
    odek_client_t *client = NULL;
    odek_sandbox_t *sb = NULL;
    char *req = NULL, *plan = NULL, *info = NULL, *res = NULL;
    char *env = NULL, *prompt = NULL, *tool = NULL;
    char *esc = json_escape(dir);
    /* This checkout's names (tests/ns.sh; run.sh exports them). */
    const char *project = getenv("ODEK_TEST_PROJECT");
    const char *images = getenv("ODEK_TEST_IMAGES");
    int n;

    if (project == NULL || images == NULL) {
        fprintf(stderr, "real: ODEK_TEST_PROJECT and ODEK_TEST_IMAGES must be set (tests/ns.sh; run.sh sets them)\n");
        free(esc);
        return 1;
    }
    printf("real: workdir %s\n", dir);
    req = xasprintf("{\"workdir\":\"%s\",\"settings\":{\"sandbox_compose_project\":\"%s\","
                    "\"sandbox_image\":\"%s/base:1\"},\"read_user_config\":false}",
                    esc, project, images);
    free(esc);
    printf("real: step 1 client_new(\"{}\")\n");
    if (!expect_ok(odek_client_new("{}", &client), "real: odek_client_new({})")) {
        goto out;
    }
    printf("real: step 2 resolve %s\n", req);
    if (!expect_ok(odek_resolve(client, req, &plan), "real: odek_resolve")) {
        goto out;
    }
    result(contains(plan, "\"approval\":null"), "real: plan needs no approval");
    result(contains(plan, project), "real: plan names the fixture project/networks");
    printf("real: step 3 launch (approval null)\n");
    if (!expect_ok(odek_launch(client, plan, "null", &sb), "real: odek_launch")) {
        goto out;
    }
    if (expect_ok(odek_sandbox_info(sb, &info), "real: odek_sandbox_info")) {
        printf("real: info %.400s...\n", info);
        /* serialized as {"kind":"container"} (the header lists the values only) */
        result(contains(info, "\"isolation\":{\"kind\":\"container\"") ||
                   contains(info, "\"isolation\":\"container\""),
               "real: isolation is container");
        result(!contains(info, "\"container_id\":null"), "real: container_id is set");
        odek_string_free(info);
    }
    n = count_sandbox_containers(dir);
    result(n == 1, "real: docker ps finds the sandbox container by label (%d)", n);

    printf("real: step 4 exec redis-cli -h redis ping\n");
    if (expect_ok(odek_exec(sb, "{\"argv\":[\"redis-cli\",\"-h\",\"redis\",\"ping\"]}", &res), "real: odek_exec")) {
        printf("real: exec result %s\n", res);
        result(contains(res, "PONG"), "real: stdout contains PONG");
        result(contains(res, "\"exit_code\":0,"), "real: exit_code 0");
        result(contains(res, "\"timed_out\":false"), "real: not timed out");
        odek_string_free(res);
        res = NULL;
    }
    if (expect_ok(odek_exec(sb, "{\"shell\":\"exit 3\"}", &res), "real: odek_exec exit 3")) {
        result(contains(res, "\"exit_code\":3,"), "real: non-zero exit is a result, not an error");
        odek_string_free(res);
        res = NULL;
    }

    /* Informational: which path the commands take (ODEK_SUPERVISOR on or off). */
    if (expect_ok(odek_exec(sb, "{\"shell\":\"test -e /.odek/odek-supervisor && echo supervisor || echo exec API\"}",
                            &res),
                  "real: odek_exec (which path)")) {
        printf("real: commands run through: %s\n", res);
        odek_string_free(res);
        res = NULL;
    }
    printf("real: step 4b exec_stream\n");
    {
        struct seen seen;
        memset(&seen, 0, sizeof seen);
        seen.reenter = sb;
        if (expect_ok(odek_exec_stream(sb, "{\"shell\":\"echo a; echo b >&2; echo c; exit 4\"}", NULL, on_output,
                                       &seen, &res),
                      "real: odek_exec_stream")) {
            printf("real: exec_stream result %s\n", res);
            result(strcmp(seen.out, "a\nc\n") == 0, "real: stream stdout is a, c (%s)", seen.out);
            result(strcmp(seen.err, "b\n") == 0, "real: stream stderr is b (%s)", seen.err);
            result(!seen.bad_stream, "real: every chunk names stdout or stderr");
            result(seen.reenter_code == ODEK_E_REENTRANT, "real: odek_exec from the callback is ODEK_E_REENTRANT (%d)",
                   (int)seen.reenter_code);
            result(contains(res, "\"exit_code\":4,") && contains(res, "\"stdout\":\"a\\nc\\n\"") &&
                       contains(res, "\"stderr\":\"b\\n\""),
                   "real: exec_stream result is odek_exec's");
            odek_string_free(res);
            res = NULL;
        }
        memset(&seen, 0, sizeof seen);
        seen.cancel = odek_cancel_new();
        {
            odek_cancel_t *k = seen.cancel;
            char *junk = STR_SENTINEL;
            expect_err(odek_exec_stream(sb, "{\"shell\":\"echo a; sleep 60; echo late\"}", k, on_output, &seen, &junk),
                       ODEK_E_CANCELLED, "real: odek_cancel from the callback stops the command");
            result(strcmp(seen.out, "a\n") == 0 && junk == STR_SENTINEL, "real: nothing after the cancel (%s)",
                   seen.out);
            expect_ok(odek_cancel_free(k), "real: odek_cancel_free");
        }
    }

    printf("real: step 4c exec_stream_stdin\n");
    {
        int supervised = 0;
        odek_stdin_t *in = odek_stdin_new();
        char *junk = STR_SENTINEL;
        if (expect_ok(odek_exec(sb, "{\"shell\":\"test -e /.odek/odek-supervisor && echo yes || echo no\"}", &res),
                      "real: odek_exec (supervisor?)")) {
            supervised = contains(res, "\"stdout\":\"yes\\n\"");
            odek_string_free(res);
            res = NULL;
        }
        expect_ok(odek_stdin_write(in, (const uint8_t *)"he\0llo", 6), "real: odek_stdin_write");
        expect_ok(odek_stdin_close(in), "real: odek_stdin_close");
        if (supervised) {
            if (expect_ok(odek_exec_stream_stdin(sb, "{\"argv\":[\"od\",\"-c\"]}", NULL, in, NULL, NULL, &res),
                          "real: odek_exec_stream_stdin (od -c)")) {
                result(contains(res, "h   e  \\\\0   l   l   o") && contains(res, "\"exit_code\":0,"),
                       "real: stdin bytes (a NUL among them) reached the command (%s)", res);
                odek_string_free(res);
                res = NULL;
            }
        } else {
            expect_err(odek_exec_stream_stdin(sb, "{\"argv\":[\"cat\"]}", NULL, in, NULL, NULL, &junk), ODEK_E_EXEC,
                       "real: odek_exec_stream_stdin without the supervisor is refused");
            result(junk == STR_SENTINEL, "real: no result after the refusal");
        }
        expect_ok(odek_stdin_free(in), "real: odek_stdin_free");
    }

    printf("real: step 5 describe\n");
    if (expect_ok(odek_describe(sb, &env, &prompt, &tool), "real: odek_describe")) {
        printf("real: prompt:\n%s\nreal: tool: %s\n", prompt, tool);
        result(contains(env, "odek.environment/1"), "real: environment schema");
        result(contains(prompt, "redis"), "real: prompt mentions redis");
        result(tool[0] != '\0', "real: tool description non-empty");
        odek_string_free(env);
        odek_string_free(prompt);
        odek_string_free(tool);
    }

    printf("real: step 6 destroy\n");
    expect_ok(odek_sandbox_destroy(sb), "real: odek_sandbox_destroy");
    expect_err(odek_sandbox_destroy(sb), ODEK_E_INVALID_HANDLE, "real: destroy twice");
    sb = NULL;
    n = count_sandbox_containers(dir);
    result(n == 0, "real: no sandbox container left for the workdir (%d)", n);

out:
    if (sb != NULL) {
        odek_error_free(odek_sandbox_destroy(sb));
    }
    odek_string_free(plan);
    if (client != NULL) {
        expect_ok(odek_client_free(client), "real: odek_client_free");
    }
    free(req);
    return 0;
}

/* ------------------------------------------------------------------ */

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s abuse | loop <n> | real <workdir>\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage(argv[0]);
    }
    if (strcmp(argv[1], "abuse") == 0 && argc == 2) {
        run_abuse();
    } else if (strcmp(argv[1], "loop") == 0 && argc == 3) {
        char *end = NULL;
        unsigned long n = strtoul(argv[2], &end, 10);
        if (end == argv[2] || *end != '\0' || n == 0) {
            return usage(argv[0]);
        }
        run_loop(n);
    } else if (strcmp(argv[1], "real") == 0 && argc == 3) {
        run_real(argv[2]);
    } else {
        return usage(argv[0]);
    }
    printf("SUMMARY %s: %lu passed, %lu failed\n", argv[1], g_pass, g_fail);
    return g_fail == 0 ? 0 : 1;
}
