//! The `--json` document.

use serde_json::{json, Value};

use super::data::{Stat, Summary};
use crate::read::metadata::meta_value;

impl Summary {
    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        use super::json_sections::add_percentiles;
        let stat = |s: &Stat| json!({"calls": s.count, "total_ns": s.sum, "mean_ns": s.mean(), "min_ns": s.min, "max_ns": s.max});
        let mut doc = json!({
            "trace": self.source,
            "metadata": self.metadata.iter().map(|(k, v)| (k.clone(), meta_value(k, v))).collect::<serde_json::Map<_, _>>(),
            "complete": self.incomplete.is_empty(),
            "incomplete": self.incomplete,
            "span": {"first_ns": self.first_ns, "last_ns": self.last_ns, "duration_ns": self.last_ns - self.first_ns},
            "totals": {
                "api_calls": self.api_calls, "api_names": self.apis_total_names,
                "apis_left_out": self.apis_total_names - self.apis.len(),
                "gpu_ops": self.gpu_ops, "gpu_op_names": self.ops_total_names, "gpu_time_ns": self.gpu_time_ns,
                "kernels_left_out": self.ops_total_names - self.ops.len(),
                "markers": self.markers, "api_op_links": self.links,
            },
            "kernels": self.ops.iter().map(|o| {
                let mut v = stat(&o.stat);
                v["name"] = json!(o.name);
                v["op_type"] = json!(o.op_type);
                v["pct_gpu_time"] = json!(o.pct_gpu_time);
                add_percentiles(&mut v, &o.pct);
                v
            }).collect::<Vec<_>>(),
            "apis": self.apis.iter().map(|a| {
                let mut v = stat(&a.stat);
                v["name"] = json!(a.name);
                v["errors"] = json!(a.errors);
                v["unclosed"] = json!(a.unclosed);
                add_percentiles(&mut v, &a.pct);
                v
            }).collect::<Vec<_>>(),
            "gpu_busy": {
                "first_ns": self.gpu_first_ns, "last_ns": self.gpu_last_ns,
                "devices": self.busy.iter().map(|d| json!({
                    "gpu": d.gpu, "ops": d.ops, "busy_ns": d.busy_ns, "wall_ns": d.wall_ns, "busy_pct": d.busy_pct,
                    "queues": d.queues.iter().map(|q| json!({"queue": q.queue, "ops": q.ops, "busy_ns": q.busy_ns, "busy_pct": q.busy_pct})).collect::<Vec<_>>(),
                    "timeline": d.timeline.iter().map(|x| (x * 1000.0).round() / 1000.0).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            },
            "processes": self.processes.iter().map(|p| json!({
                "pid": p.pid, "exe": p.exe, "cmdline": p.cmdline,
                "api_calls": p.api.count, "api_time_ns": p.api.sum,
                "first_ns": if p.api.count > 0 { json!(p.api.lo) } else { Value::Null },
                "last_ns": if p.api.count > 0 { json!(p.api.hi) } else { Value::Null },
                "gpu_ops": p.gpu_ops, "gpu_time_ns": p.gpu_time_ns,
                "gpus": p.gpus.iter().map(|(g, n, t)| json!({"gpu": g, "gpu_ops": n, "gpu_time_ns": t})).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "launch_latency": self.launch_latency.as_ref().map(|l| json!({
                "count": l.count, "min_ns": l.min, "mean_ns": l.mean, "p50_ns": l.p50, "p90_ns": l.p90, "p99_ns": l.p99, "max_ns": l.max,
                "percentiles_sampled_every": l.sampled_every,
                "histogram": super::json_sections::histogram(&l.histogram),
            })),
            "lost": {
                "dropped": self.dropped.iter().map(|(k, v)| (k.clone(), meta_value(k, v))).collect::<serde_json::Map<_, _>>(),
                "unlinked_gpu_ops": self.unlinked_gpu_ops,
                "unlinked_gpu_ops_by_publisher": self.unlinked_by_publisher.iter()
                    .map(|(pid, n)| json!({ "pid": pid, "ops": n })).collect::<Vec<_>>(),
                "unlinked_gpu_ops_left_out": self.linked_only,
                "unclosed_apis": self.unclosed_apis,
                "unclosed_by_reason": self.unclosed_by_reason,
                "profiler_only_apis": self.profiler_only_apis,
                "gpu_links": self.gpu_links,
                "api_errors": self.api_errors,
                "errors": self.errors.iter().map(|e| json!({
                    "api": e.api, "ret": e.code, "error": e.code_name, "calls": e.count,
                })).collect::<Vec<_>>(),
            },
        });
        // Only traces made with --stacks have launch sites (the key is absent otherwise).
        if !self.launch_sites.is_empty() {
            doc["launch_sites"] = Value::Array(self.launch_sites.iter().map(|l| l.to_json()).collect());
        }
        super::json_sections::add_sections(self, &mut doc);
        doc
    }
}
