//! The HTML report's flame graph of GPU time by launch site (`--stacks` traces): each GPU op's
//! time goes to the stack of its call (for a replayed graph node, of the call that created the
//! node during capture, `rtl_op_site`), frames from the outermost (`main`) in, merged by function.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use super::data::FlameNode;

/// The flame graph's root ("all GPU time with a launch site"), or None when no GPU op's call has
/// a stack.
pub fn flame(c: &Connection, linked_only: bool) -> Result<Option<FlameNode>> {
    if !crate::read::sites::has_table(c, "rtl_api_stack")? {
        return Ok(None);
    }
    let only = if linked_only { " AND o.id NOT IN (SELECT op_id FROM rtl_op WHERE link IN (0, 4, 5))" } else { "" };
    let mut st = c.prepare(&format!(
        "SELECT s.stack_id, count(*), sum(o.end - o.start)
         FROM rocpd_op o JOIN rocpd_api_ops l ON l.op_id = o.id LEFT JOIN rtl_op_site os ON os.op_id = o.id
              JOIN rtl_api_stack s ON s.api_id = coalesce(os.api_id, l.api_id)
         WHERE o.gpuId >= 0{only} GROUP BY s.stack_id"
    ))?;
    let per_stack: HashMap<i64, (i64, i64)> =
        st.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get::<_, Option<i64>>(2)?.unwrap_or(0)))))?.collect::<Result<_, _>>()?;
    if per_stack.is_empty() {
        return Ok(None);
    }
    // Each stack's frames, outermost first.
    let mut frames: HashMap<i64, Vec<(String, String)>> = HashMap::new();
    let mut st = c.prepare(
        "SELECT sf.stack_id, f.symbol, f.module, f.address FROM rtl_stack_frame sf JOIN rtl_frame f ON f.id = sf.frame_id
         ORDER BY sf.stack_id, sf.depth DESC",
    )?;
    let mut rows = st.query([])?;
    while let Some(r) = rows.next()? {
        let stack: i64 = r.get(0)?;
        if !per_stack.contains_key(&stack) {
            continue;
        }
        let (symbol, module, address): (Option<String>, String, i64) = (r.get(1)?, r.get(2)?, r.get(3)?);
        let file = module.rsplit('/').next().unwrap_or("").to_string();
        let name = symbol.unwrap_or_else(|| format!("{file}+{address:#x}"));
        frames.entry(stack).or_default().push((name, file));
    }
    let mut root = FlameNode { name: "all GPU time with a launch site".into(), ..Default::default() };
    let mut ids: Vec<&i64> = per_stack.keys().collect();
    ids.sort();
    for id in ids {
        let (ops, ns) = per_stack[id];
        root.ops += ops;
        root.gpu_ns += ns;
        let mut node = &mut root;
        for (name, module) in frames.get(id).map(Vec::as_slice).unwrap_or(&[]) {
            let i = match node.children.iter().position(|c| c.name == *name && c.module == *module) {
                Some(i) => i,
                None => {
                    node.children.push(FlameNode { name: name.clone(), module: module.clone(), ..Default::default() });
                    node.children.len() - 1
                }
            };
            node = &mut node.children[i];
            node.ops += ops;
            node.gpu_ns += ns;
        }
    }
    sort(&mut root);
    Ok(Some(root))
}

/// Children by GPU time (largest first), then name: the same trace draws the same graph.
fn sort(n: &mut FlameNode) {
    n.children.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(a.name.cmp(&b.name)).then(a.module.cmp(&b.module)));
    for c in &mut n.children {
        sort(c);
    }
}
