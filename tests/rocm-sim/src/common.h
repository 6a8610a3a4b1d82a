// rocm-sim: shared helpers (clocks, env, ground-truth writer, failure switches).
// Header-only; each simulated library gets its own static copy.
#pragma once
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <vector>

namespace sim {

// The one simulator clock: CLOCK_MONOTONIC in ns (same as bpf_ktime_get_ns).
static inline uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
static inline uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
static inline int gettid_() { return int(syscall(SYS_gettid)); }
static inline uint64_t thread_hash() {
  return uint64_t(std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

// Wait until CLOCK_MONOTONIC reaches `deadline` (sleep for the long part, spin the tail).
static inline void wait_until(uint64_t deadline) {
  for (;;) {
    uint64_t now = mono_ns();
    if (now >= deadline) return;
    uint64_t left = deadline - now;
    if (left > 200000) {
      timespec ts;
      uint64_t s = left - 100000;
      ts.tv_sec = s / 1000000000ull;
      ts.tv_nsec = s % 1000000000ull;
      nanosleep(&ts, nullptr);
    } else {
      std::this_thread::yield();
    }
  }
}

static inline const char* env_str(const char* name, const char* dflt = nullptr) {
  const char* v = getenv(name);
  return (v && *v) ? v : dflt;
}
static inline long long env_ll(const char* name, long long dflt) {
  const char* v = getenv(name);
  if (!v || !*v) return dflt;
  char* end = nullptr;
  long long r = strtoll(v, &end, 0);
  return (end && end != v) ? r : dflt;
}

// ---------------------------------------------------------------- JSON line builder
struct Json {
  std::string s;
  bool first = true;
  bool on = true;  // when false every call is a no-op (ground truth disabled)
  Json() { s.push_back('{'); }
  explicit Json(bool enabled) : on(enabled) { if (on) { s.reserve(384); s.push_back('{'); } }
  void key(const char* k) {
    if (!first) s.push_back(',');
    first = false;
    s.push_back('"');
    s += k;
    s += "\":";
  }
  static void esc(std::string& out, const char* v) {
    out.push_back('"');
    for (const unsigned char* p = (const unsigned char*)v; *p; ++p) {
      unsigned char c = *p;
      if (c == '"' || c == '\\') { out.push_back('\\'); out.push_back(char(c)); }
      else if (c < 0x20) { char b[8]; snprintf(b, sizeof b, "\\u%04x", c); out += b; }
      else out.push_back(char(c));
    }
    out.push_back('"');
  }
  Json& str(const char* k, const char* v) {
    if (!on) return *this;
    key(k);
    if (!v) s += "null"; else esc(s, v);
    return *this;
  }
  Json& u64(const char* k, uint64_t v) { if (!on) return *this; key(k); s += std::to_string(v); return *this; }
  Json& i64(const char* k, long long v) { if (!on) return *this; key(k); s += std::to_string(v); return *this; }
  Json& boolean(const char* k, bool v) { if (!on) return *this; key(k); s += v ? "true" : "false"; return *this; }
  Json& ptr(const char* k, const void* v) { return u64(k, uint64_t(uintptr_t(v))); }
  Json& arr3(const char* k, uint32_t a, uint32_t b, uint32_t c) {
    if (!on) return *this;
    key(k);
    s += "[" + std::to_string(a) + "," + std::to_string(b) + "," + std::to_string(c) + "]";
    return *this;
  }
  Json& raw(const char* k, const std::string& v) { if (!on) return *this; key(k); s += v; return *this; }
  std::string done() { s += "}\n"; return s; }
};

// ---------------------------------------------------------------- ground truth
// ROCM_SIM_TRUTH=FILE: one JSON object per line, appended with O_APPEND and one write() each.
// A library may turn on per-thread buffering (`buffer(cap)`): each thread then collects its
// lines and writes them, whole lines only, with one write() once `cap` bytes wait, when the
// thread exits and at `flush_all()` (library exit). Lines of one thread stay in order; lines of
// different threads interleave in larger blocks. A process ended by _exit or a signal loses
// the lines still buffered.
struct TruthBuf {
  std::mutex m;
  std::string s;
};
struct Truth {
  int fd = -1;
  bool on = false;
  size_t cap = 0;  // 0: every line written at once
  std::mutex reg;
  std::vector<TruthBuf*> bufs;
  Truth() {
    const char* p = env_str("ROCM_SIM_TRUTH");
    if (p) {
      fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      on = fd >= 0;
      if (!on) fprintf(stderr, "rocm-sim: cannot open ROCM_SIM_TRUTH=%s: %s\n", p, strerror(errno));
    }
  }
  void write_raw(const char* d, size_t n) {
    // A single write() with O_APPEND is atomic for regular files on Linux.
    ssize_t w = ::write(fd, d, n);
    (void)w;
  }
  void buffer(size_t bytes) { cap = bytes; }
  TruthBuf* mine() {
    struct Owner {
      Truth* t = nullptr;
      TruthBuf* b = nullptr;
      ~Owner() {  // thread exit: write what this thread collected
        if (!b) return;
        std::lock_guard<std::mutex> g(b->m);
        if (!b->s.empty()) t->write_raw(b->s.data(), b->s.size());
        b->s.clear();
      }
    };
    static thread_local Owner o;
    if (!o.b) {
      o.t = this;
      o.b = new TruthBuf();  // kept (in `bufs`) until exit: flush_all may still visit it
      o.b->s.reserve(cap + 512);
      std::lock_guard<std::mutex> g(reg);
      bufs.push_back(o.b);
    }
    return o.b;
  }
  void write_line(const std::string& line) {
    if (!on) return;
    if (!cap) {
      write_raw(line.data(), line.size());
      return;
    }
    TruthBuf* b = mine();
    std::lock_guard<std::mutex> g(b->m);
    b->s += line;
    if (b->s.size() >= cap) {
      write_raw(b->s.data(), b->s.size());
      b->s.clear();
    }
  }
  // Library exit: write every thread's buffered lines.
  void flush_all() {
    if (!on || !cap) return;
    std::lock_guard<std::mutex> g(reg);
    for (TruthBuf* b : bufs) {
      std::lock_guard<std::mutex> gb(b->m);
      if (!b->s.empty()) write_raw(b->s.data(), b->s.size());
      b->s.clear();
    }
  }
  // In a forked child: every buffered line is the parent's (it writes them); locks held by
  // parent threads at the fork are released.
  void forget_in_child() {
    if (!cap) return;
    new (&reg) std::mutex();
    for (TruthBuf* b : bufs) {
      new (&b->m) std::mutex();
      b->s.clear();
    }
  }
};
static inline Truth& truth() {
  static Truth* t = new Truth();  // never destroyed: usable from atexit handlers and threads
  return *t;
}

// ---------------------------------------------------------------- failure switch
// ROCM_SIM_FAIL="hipMalloc:2,hipMemcpy:1@3" : API `name` returns `code`; with @N only its N-th call.
struct FailRule { std::string name; long code; long nth; std::atomic<long> calls{0}; };
struct FailTable {
  std::vector<FailRule*> rules;
  FailTable() {
    const char* v = env_str("ROCM_SIM_FAIL");
    if (!v) return;
    std::string all(v);
    size_t pos = 0;
    while (pos <= all.size()) {
      size_t comma = all.find(',', pos);
      std::string item = all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      size_t colon = item.find(':');
      if (colon != std::string::npos) {
        FailRule* r = new FailRule();
        r->name = item.substr(0, colon);
        std::string rest = item.substr(colon + 1);
        size_t at = rest.find('@');
        r->code = strtol(rest.c_str(), nullptr, 0);
        r->nth = at == std::string::npos ? 0 : strtol(rest.c_str() + at + 1, nullptr, 0);
        rules.push_back(r);
      }
      if (comma == std::string::npos) break;
      pos = comma + 1;
    }
  }
  // Returns 0 when the call should proceed, else the error code to return.
  long check(const char* name) {
    for (FailRule* r : rules) {
      if (r->name == name) {
        long n = ++r->calls;
        if (r->nth == 0 || r->nth == n) return r->code;
      }
    }
    return 0;
  }
};
static inline FailTable& fails() {
  static FailTable* t = new FailTable();
  return *t;
}

}  // namespace sim
