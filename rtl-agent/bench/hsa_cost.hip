// hsa_cost: what HSA capture adds per async copy and per graph replay (rtl-agent/bench/hsa_cost.sh).
//   hsa_cost copy N BYTES     N hipMemcpyAsync host->device of BYTES (pinned) on one stream, a
//                             hipStreamSynchronize every 100; prints: median and 10th percentile
//                             ns inside hipMemcpyAsync, wall ns per copy, process CPU ns per copy
//   hsa_cost replay N NODES   a graph of NODES kernels replayed N times, each
//                             hipGraphLaunch + hipStreamSynchronize; prints: median and 10th
//                             percentile replay latency ns (launch to synchronize returned), median
//                             ns inside hipGraphLaunch, process CPU ns per replay, and CPU ns of
//                             the agent's own threads per replay (the process CPU also counts the
//                             simulator's device threads, which spin while they wait)
// (10th percentiles: on a loaded machine the median includes the scheduler's delays.)
#include <hip/hip_runtime.h>
#include <algorithm>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <dirent.h>
#include <unistd.h>
#include <sys/resource.h>

__global__ void node_kernel(int *p) { if (p) p[0] = 1; }

static double cpu_ns() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
}
// CPU ns of this process's threads whose name starts with "rtl-agent" (the agent's completion
// and publisher threads): /proc/self/task/*/schedstat, first field (ns on CPU).
static double agent_cpu_ns() {
    double total = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[64], comm[64] = {0};
        snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f) continue;
        if (!fgets(comm, sizeof comm, f)) comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "rtl-agent", 9) != 0) continue;
        snprintf(p, sizeof p, "/proc/self/task/%s/schedstat", e->d_name);
        f = fopen(p, "r");
        if (!f) continue;
        unsigned long long ns = 0;
        if (fscanf(f, "%llu", &ns) == 1) total += (double)ns;
        fclose(f);
    }
    closedir(d);
    return total;
}

static double now_ns() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
static double p10(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 10];
}
#define CHECK(x) do { if ((x) != hipSuccess) { fprintf(stderr, "%s failed\n", #x); return 1; } } while (0)

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: hsa_cost copy N BYTES | replay N NODES | burst N NODES\n"); return 2; }
    long n = atol(argv[2]), m = atol(argv[3]);
    hipStream_t s;
    CHECK(hipStreamCreate(&s));
    if (strcmp(argv[1], "copy") == 0) {
        void *d = nullptr, *h = nullptr;
        CHECK(hipMalloc(&d, (size_t)m));
        CHECK(hipHostMalloc(&h, (size_t)m, 0));
        for (int i = 0; i < 200; i++) CHECK(hipMemcpyAsync(d, h, (size_t)m, hipMemcpyHostToDevice, s));
        CHECK(hipStreamSynchronize(s));
        std::vector<double> call;
        call.reserve(n);
        double t0 = now_ns(), c0 = cpu_ns(), a0 = agent_cpu_ns();
        for (long i = 0; i < n; i++) {
            double a = now_ns();
            CHECK(hipMemcpyAsync(d, h, (size_t)m, hipMemcpyHostToDevice, s));
            call.push_back(now_ns() - a);
            if (i % 100 == 99) CHECK(hipStreamSynchronize(s));
        }
        CHECK(hipStreamSynchronize(s));
        double t1 = now_ns(), c1 = cpu_ns();
        printf("%.1f %.1f %.1f %.1f %.1f\n", median(call), p10(call), (t1 - t0) / n, (c1 - c0) / n, (agent_cpu_ns() - a0) / n);
        return 0;
    }
    if (strcmp(argv[1], "replay") == 0) {
        hipGraph_t g;
        hipGraphExec_t ge;
        CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        for (long i = 0; i < m; i++) hipLaunchKernelGGL(node_kernel, dim3(1), dim3(64), 0, s, (int *)nullptr);
        CHECK(hipStreamEndCapture(s, &g));
        CHECK(hipGraphInstantiate(&ge, g, nullptr, nullptr, 0));
        for (int i = 0; i < 20; i++) { CHECK(hipGraphLaunch(ge, s)); CHECK(hipStreamSynchronize(s)); }
        std::vector<double> lat, call;
        double c0 = cpu_ns(), a0 = agent_cpu_ns();
        for (long i = 0; i < n; i++) {
            double a = now_ns();
            CHECK(hipGraphLaunch(ge, s));
            double b = now_ns();
            CHECK(hipStreamSynchronize(s));
            double c = now_ns();
            lat.push_back(c - a);
            call.push_back(b - a);
        }
        double c1 = cpu_ns();
        printf("%.1f %.1f %.1f %.1f %.1f\n", median(lat), p10(lat), median(call), (c1 - c0) / n, (agent_cpu_ns() - a0) / n);
        return 0;
    }
    if (strcmp(argv[1], "burst") == 0) {
        // The replays back to back (one synchronize at the end): the queue never runs dry, so
        // on the simulator's timing model each replay's period is the GPU time it occupies.
        hipGraph_t g;
        hipGraphExec_t ge;
        CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
        for (long i = 0; i < m; i++) hipLaunchKernelGGL(node_kernel, dim3(1), dim3(64), 0, s, (int *)nullptr);
        CHECK(hipStreamEndCapture(s, &g));
        CHECK(hipGraphInstantiate(&ge, g, nullptr, nullptr, 0));
        for (int i = 0; i < 20; i++) { CHECK(hipGraphLaunch(ge, s)); CHECK(hipStreamSynchronize(s)); }
        std::vector<double> call;
        double t0 = now_ns(), c0 = cpu_ns(), a0 = agent_cpu_ns();
        for (long i = 0; i < n; i++) {
            double a = now_ns();
            CHECK(hipGraphLaunch(ge, s));
            call.push_back(now_ns() - a);
        }
        CHECK(hipStreamSynchronize(s));
        double t1 = now_ns(), c1 = cpu_ns();
        printf("%.1f %.1f %.1f %.1f %.1f\n", median(call), p10(call), (t1 - t0) / n, (c1 - c0) / n, (agent_cpu_ns() - a0) / n);
        return 0;
    }
    fprintf(stderr, "unknown mode %s\n", argv[1]);
    return 2;
}
