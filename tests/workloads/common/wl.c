/* Ground-truth writer: see wl.h and ../README.md. */
#define _GNU_SOURCE
#include "wl.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define WL_MAX_APIS 128

struct wl_cnt {
    const char *api;
    uint64_t n;
};

static int g_fd = -1;
static const char *g_name = "?";
static const char *g_phase;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct wl_cnt g_counts[WL_MAX_APIS];
static int g_ncounts;
static struct wl_cnt g_skipped[WL_MAX_APIS];
static int g_nskipped;
static __thread uint64_t t_seq;
static __thread int t_thr = -1;

static void wl_atfork_child(void)
{
    /* The child starts with empty counts: its summary covers its own calls only. */
    pthread_mutex_init(&g_mu, NULL);
    g_ncounts = 0;
    g_nskipped = 0;
    t_seq = 0;
}

void wl_init(const char *name)
{
    static int done;
    if (done)
        return;
    done = 1;
    g_name = name;
    const char *path = getenv("RTL_WORKLOAD_TRUTH");
    if (path && *path) {
        g_fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (g_fd < 0) {
            fprintf(stderr, "%s: cannot open RTL_WORKLOAD_TRUTH=%s: %s\n", name, path, strerror(errno));
            exit(2);
        }
    }
    pthread_atfork(NULL, NULL, wl_atfork_child);
}

uint64_t wl_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int wl_gettid(void) { return (int)syscall(SYS_gettid); }
void wl_set_thread(int idx) { t_thr = idx; }
int wl_get_thread(void) { return t_thr; }
void wl_set_phase(const char *phase) { __atomic_store_n(&g_phase, phase, __ATOMIC_RELEASE); }

static void put(wl_rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(wl_rec *r, const char *fmt, ...)
{
    if (r->n >= WL_REC_MAX - 8)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->b + r->n, (size_t)(WL_REC_MAX - 8 - r->n), fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    r->n += k;
    if (r->n > WL_REC_MAX - 8)
        r->n = WL_REC_MAX - 8; /* truncated (never happens with our records) */
}

static void put_esc(wl_rec *r, const char *s)
{
    put(r, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            put(r, "\\%c", c);
        else if (c < 0x20)
            put(r, "\\u%04x", c);
        else
            put(r, "%c", c);
    }
    put(r, "\"");
}

static void head(wl_rec *r)
{
    r->n = 0;
    r->api = NULL;
    r->count = 0;
    put(r, "{\"pid\":%d,\"tid\":%d", (int)getpid(), wl_gettid());
    if (t_thr >= 0)
        put(r, ",\"thr\":%d", t_thr);
}

void wl_rec_call(wl_rec *r, const char *api, long long ret, uint64_t t0, uint64_t t1)
{
    head(r);
    put(r, ",\"seq\":%llu,\"api\":\"%s\",\"ret\":%lld,\"start_ns\":%llu,\"end_ns\":%llu",
        (unsigned long long)t_seq++, api, ret, (unsigned long long)t0, (unsigned long long)t1);
    r->api = api;
    r->count = 1;
}

void wl_rec_call_noret(wl_rec *r, const char *api, uint64_t t0, uint64_t t1)
{
    head(r);
    put(r, ",\"seq\":%llu,\"api\":\"%s\",\"ret\":null,\"start_ns\":%llu,\"end_ns\":%llu",
        (unsigned long long)t_seq++, api, (unsigned long long)t0, (unsigned long long)t1);
    r->api = api;
    r->count = 1;
}

void wl_rec_note(wl_rec *r, const char *what)
{
    head(r);
    put(r, ",\"note\":");
    put_esc(r, what);
}

void wl_rec_count(wl_rec *r, const char *api, uint64_t n)
{
    head(r);
    put(r, ",\"api\":\"%s\",\"aggregate\":true,\"calls\":%llu", api, (unsigned long long)n);
    r->api = api;
    r->count = n;
}

void wl_rec_u64(wl_rec *r, const char *k, uint64_t v) { put(r, ",\"%s\":%llu", k, (unsigned long long)v); }
void wl_rec_i64(wl_rec *r, const char *k, long long v) { put(r, ",\"%s\":%lld", k, v); }
void wl_rec_f64(wl_rec *r, const char *k, double v)
{
    if (v != v || v > 1e300 || v < -1e300)
        put(r, ",\"%s\":null", k);
    else
        put(r, ",\"%s\":%.9g", k, v);
}
void wl_rec_ptr(wl_rec *r, const char *k, const void *p) { wl_rec_u64(r, k, (uint64_t)(uintptr_t)p); }
void wl_rec_str(wl_rec *r, const char *k, const char *s)
{
    if (!s) {
        wl_rec_null(r, k);
        return;
    }
    put(r, ",\"%s\":", k);
    put_esc(r, s);
}
void wl_rec_bool(wl_rec *r, const char *k, int v) { put(r, ",\"%s\":%s", k, v ? "true" : "false"); }
void wl_rec_null(wl_rec *r, const char *k) { put(r, ",\"%s\":null", k); }
void wl_rec_dim3(wl_rec *r, const char *k, unsigned x, unsigned y, unsigned z)
{
    put(r, ",\"%s\":[%u,%u,%u]", k, x, y, z);
}
void wl_rec_raw(wl_rec *r, const char *k, const char *json) { put(r, ",\"%s\":%s", k, json); }

static void add(struct wl_cnt *tab, int *n, const char *api, uint64_t k)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(tab[i].api, api) == 0) {
            tab[i].n += k;
            return;
        }
    if (*n < WL_MAX_APIS) {
        tab[*n].api = api;
        tab[*n].n = k;
        (*n)++;
    }
}

static void write_line(const char *b, size_t len)
{
    if (g_fd < 0)
        return;
    while (len > 0) {
        ssize_t w = write(g_fd, b, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        b += w;
        len -= (size_t)w;
    }
}

void wl_rec_emit(wl_rec *r)
{
    const char *ph = __atomic_load_n(&g_phase, __ATOMIC_ACQUIRE);
    if (ph)
        wl_rec_str(r, "phase", ph);
    r->b[r->n++] = '}';
    r->b[r->n++] = '\n';
    if (r->api) {
        pthread_mutex_lock(&g_mu);
        add(g_counts, &g_ncounts, r->api, r->count);
        pthread_mutex_unlock(&g_mu);
    }
    write_line(r->b, (size_t)r->n);
}

void wl_skip_add(const char *api, uint64_t n)
{
    pthread_mutex_lock(&g_mu);
    add(g_skipped, &g_nskipped, api, n);
    pthread_mutex_unlock(&g_mu);
}

void wl_summary(int exit_code)
{
    wl_rec r;
    r.n = 0;
    r.api = NULL;
    pthread_mutex_lock(&g_mu);
    put(&r, "{\"pid\":%d,\"ppid\":%d,\"wl\":\"%s\",\"exit\":%d,\"summary\":{", (int)getpid(), (int)getppid(),
        g_name, exit_code);
    uint64_t total = 0;
    for (int i = 0; i < g_ncounts; i++) {
        put(&r, "%s\"%s\":%llu", i ? "," : "", g_counts[i].api, (unsigned long long)g_counts[i].n);
        total += g_counts[i].n;
    }
    put(&r, "},\"total\":%llu", (unsigned long long)total);
    if (g_nskipped) {
        put(&r, ",\"skipped\":{");
        for (int i = 0; i < g_nskipped; i++)
            put(&r, "%s\"%s\":%llu", i ? "," : "", g_skipped[i].api, (unsigned long long)g_skipped[i].n);
        put(&r, "}");
    }
    pthread_mutex_unlock(&g_mu);
    put(&r, "}\n");
    write_line(r.b, (size_t)r.n);
}

static int opt_match(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != 0)
        return 0;
    if (*i + 1 >= argc)
        wl_die("option %s needs a value", name);
    *val = argv[++*i];
    return 1;
}

int wl_opt_int(int argc, char **argv, int *i, const char *name, long long *out)
{
    const char *v;
    if (!opt_match(argc, argv, i, name, &v))
        return 0;
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 0);
    if (errno || *end || end == v)
        wl_die("option %s: not an integer: %s", name, v);
    *out = x;
    return 1;
}

int wl_opt_str(int argc, char **argv, int *i, const char *name, const char **out)
{
    return opt_match(argc, argv, i, name, out);
}

int wl_opt_flag(int argc, char **argv, int *i, const char *name)
{
    (void)argc;
    return strcmp(argv[*i], name) == 0;
}

void wl_die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(2);
}
