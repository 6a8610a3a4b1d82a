//! Call sites in the readers (`--stacks` traces): `summary`'s "top launch sites by GPU time"
//! (the innermost user frame of the call behind each GPU op; for a replayed graph node, of the
//! call that created the node during capture) and the stacks Perfetto slices carry.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;
use serde_json::{json, Value};

/// One launch site: a function in a file, with the GPU work of the calls made from it.
#[derive(Debug, Clone, Default)]
pub struct LaunchSite {
    /// The demangled function, or `module+0xADDR` when no symbol covers it.
    pub site: String,
    pub module: String,
    pub ops: i64,
    pub gpu_ns: i64,
    /// Of those ops, replayed graph nodes (attributed to their capture-time call).
    pub replayed: i64,
}

impl LaunchSite {
    pub fn to_json(&self) -> Value {
        json!({"site": self.site, "module": self.module, "gpu_ops": self.ops, "gpu_time_ns": self.gpu_ns, "replayed_nodes": self.replayed})
    }
}

pub(crate) fn has_table(c: &Connection, t: &str) -> Result<bool> {
    Ok(c.query_row("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", [t], |r| r.get::<_, i64>(0))? > 0)
}

/// The `top` sites by GPU time (0: all), and how many sites there are.
pub fn top_launch_sites(c: &Connection, top: usize) -> Result<(Vec<LaunchSite>, usize)> {
    if !has_table(c, "rtl_api_stack")? {
        return Ok((Vec::new(), 0));
    }
    let mut st = c.prepare(
        "SELECT f.module, f.symbol, f.address, count(*), sum(o.end - o.start), count(os.op_id) \
         FROM rocpd_op o JOIN rocpd_api_ops l ON l.op_id = o.id LEFT JOIN rtl_op_site os ON os.op_id = o.id \
         JOIN rtl_api_stack s ON s.api_id = coalesce(os.api_id, l.api_id) JOIN rtl_stack st ON st.id = s.stack_id \
         JOIN rtl_frame f ON f.id = st.site_frame_id WHERE o.gpuId >= 0 \
         GROUP BY f.module, coalesce(f.symbol, f.address)",
    )?;
    let mut sites: Vec<LaunchSite> = st
        .query_map([], |r| {
            let (module, symbol, address): (String, Option<String>, i64) = (r.get(0)?, r.get(1)?, r.get(2)?);
            let site = symbol.unwrap_or_else(|| format!("{}+{:#x}", module.rsplit('/').next().unwrap_or(""), address));
            Ok(LaunchSite { site, module, ops: r.get(3)?, gpu_ns: r.get::<_, Option<i64>>(4)?.unwrap_or(0), replayed: r.get(5)? })
        })?
        .collect::<Result<_, _>>()?;
    sites.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(a.site.cmp(&b.site)));
    let total = sites.len();
    if top > 0 {
        sites.truncate(top);
    }
    Ok((sites, total))
}

/// The calls' stacks: what Perfetto slices carry in their args.
#[derive(Default)]
pub struct CallStacks {
    /// Stack id -> its frames as text lines ("function (file)"), innermost first.
    text: HashMap<i64, String>,
    /// Call id -> stack id.
    by_call: HashMap<i64, i64>,
}

impl CallStacks {
    pub fn of(&self, call: i64) -> Option<&str> {
        self.by_call.get(&call).and_then(|s| self.text.get(s)).map(String::as_str)
    }
}

/// Every call's stack, for the calls that have one.
pub fn stacks_by_call(c: &Connection) -> Result<CallStacks> {
    if !has_table(c, "rtl_api_stack")? {
        return Ok(CallStacks::default());
    }
    let mut text: HashMap<i64, String> = HashMap::new();
    let mut st = c.prepare(
        "SELECT sf.stack_id, f.symbol, f.module, f.address FROM rtl_stack_frame sf JOIN rtl_frame f ON f.id = sf.frame_id \
         ORDER BY sf.stack_id, sf.depth",
    )?;
    let rows =
        st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, Option<String>>(1)?, r.get::<_, String>(2)?, r.get::<_, i64>(3)?)))?;
    for row in rows {
        let (stack, symbol, module, address) = row?;
        let file = module.rsplit('/').next().unwrap_or("").to_string();
        let line = match symbol {
            Some(s) => format!("{s} ({file})"),
            None => format!("{file}+{address:#x}"),
        };
        let t = text.entry(stack).or_default();
        if !t.is_empty() {
            t.push('\n');
        }
        t.push_str(&line);
    }
    let mut st = c.prepare("SELECT api_id, stack_id FROM rtl_api_stack")?;
    let by_call = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<_, _>>()?;
    Ok(CallStacks { text, by_call })
}
