//! What every part of the timeline needs (string table, processes), and the process, thread
//! and GPU queue tracks.

use std::collections::HashMap;

use anyhow::Result;
use rusqlite::Connection;

use super::sink::{Sink, GPU_PID_BASE};

pub(super) fn parse_ids(s: Option<String>, base: u64) -> Vec<u64> {
    s.map(|s| s.split(',').filter_map(|x| x.trim().parse::<u64>().ok()).map(|x| x + base).collect()).unwrap_or_default()
}

fn basename(s: &str) -> &str {
    s.rsplit('/').next().unwrap_or(s)
}

/// What every part of the timeline needs: string table, processes, whether correlation-id-only
/// links exist.
pub(crate) struct Prelude {
    names: HashMap<i64, String>,
    /// What rtl_api's values mean per API name id, as the trace records it.
    pub(super) meanings: HashMap<i64, crate::read::meaning::Meaning>,
    pub(super) has_corr_fallback: bool,
    procs: HashMap<i64, (String, Option<String>)>,
    /// The main thread's name per pid: the executable's name as the kernel keeps it (`comm`,
    /// 15 bytes), for traces without `rtl_thread` or a thread missing there.
    comms: HashMap<i64, String>,
    /// Each thread's own name (`rtl_thread`, schema 6+), by (pid, tid).
    threads: HashMap<(i64, i64), String>,
    pub(super) pids: Vec<i64>,
}

/// Where a thread's track sorts within its process: the main thread first, then by tid, each
/// thread's roctx track ([`roctx_rank`]) right after it.
pub(super) fn thread_rank(pid: i64, tid: i64) -> i64 {
    if pid == tid {
        0
    } else {
        2 * tid.clamp(1, 1 << 29)
    }
}

/// The rank of a thread's roctx track: beside its thread.
pub(super) fn roctx_rank(pid: i64, tid: i64) -> i64 {
    thread_rank(pid, tid) + 1
}

impl Prelude {
    pub(super) fn name_of(&self, id: i64) -> &str {
        self.names.get(&id).map(String::as_str).unwrap_or("")
    }
}

pub(crate) fn prelude(conn: &Connection) -> Result<Prelude> {
    let names = crate::read::open::strings(conn)?;
    let has_corr_fallback: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM rocpd_op o WHERE o.gpuId >= 0 AND o.correlation_id != 0
             AND NOT EXISTS (SELECT 1 FROM rocpd_api_ops l WHERE l.op_id = o.id)
             AND EXISTS (SELECT 1 FROM rocpd_api a WHERE a.correlation_id = o.correlation_id))",
        [],
        |r| r.get(0),
    )?;

    // Processes and threads.
    let mut procs: HashMap<i64, (String, Option<String>)> = HashMap::new();
    let mut comms: HashMap<i64, String> = HashMap::new();
    {
        let mut st = conn.prepare("SELECT pid, exe, cmdline FROM rtl_process")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let pid: i64 = r.get(0)?;
            let exe: Option<String> = r.get(1)?;
            let cmd: Option<String> = r.get(2)?;
            let cmd = cmd.map(|c| c.replace('\0', " ").trim().to_string()).filter(|c| !c.is_empty());
            let comm = exe.as_deref().filter(|e| !e.is_empty()).map(basename).map(|b| {
                let mut end = b.len().min(15);
                while !b.is_char_boundary(end) {
                    end -= 1;
                }
                b[..end].to_string()
            });
            let name = exe
                .as_deref()
                .filter(|e| !e.is_empty())
                .map(basename)
                .or_else(|| cmd.as_deref().and_then(|c| c.split(' ').next()).map(basename))
                .map(|n| format!("{n} {pid}"))
                .unwrap_or_else(|| format!("pid {pid}"));
            procs.insert(pid, (name, cmd));
            if let Some(c) = comm {
                comms.insert(pid, c);
            }
        }
    }
    let mut st = conn.prepare("SELECT DISTINCT pid FROM rocpd_api")?;
    let api_pids = st.query_map([], |r| r.get::<_, i64>(0))?.collect::<Result<Vec<_>, _>>()?;
    for pid in api_pids {
        procs.entry(pid).or_insert_with(|| (format!("pid {pid}"), None));
    }
    let mut pids: Vec<_> = procs.keys().copied().collect();
    pids.sort();
    let mut threads = HashMap::new();
    if crate::read::sites::has_table(conn, "rtl_thread")? {
        let mut st = conn.prepare("SELECT pid, tid, comm FROM rtl_thread")?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let comm: String = r.get(2)?;
            if !comm.is_empty() {
                threads.insert((r.get(0)?, r.get(1)?), comm);
            }
        }
    }
    Ok(Prelude { names, meanings: crate::read::meaning::load(conn)?, has_corr_fallback, procs, comms, threads, pids })
}

/// Process, thread and GPU queue tracks.
pub(crate) fn emit_tracks(conn: &Connection, p: &Prelude, sink: &mut dyn Sink) -> Result<()> {
    for pid in &p.pids {
        let (n, c) = &p.procs[pid];
        sink.process(*pid, n, c.as_deref(), *pid)?;
    }
    let mut st = conn.prepare("SELECT DISTINCT pid, tid FROM rocpd_api ORDER BY pid, tid")?;
    let threads = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<Vec<_>, _>>()?;
    for (pid, tid) in &threads {
        // Named as Perfetto names threads, "NAME TID": the thread's own name where the trace has
        // it (rtl_thread), else for the main thread the executable's.
        let n = match (p.threads.get(&(*pid, *tid)), p.comms.get(pid)) {
            (Some(name), _) => format!("{name} {tid}"),
            (None, Some(comm)) if pid == tid => format!("{comm} {tid}"),
            _ if pid == tid => format!("main thread {tid}"),
            _ => format!("thread {tid}"),
        };
        sink.thread(*pid, *tid, &n, thread_rank(*pid, *tid))?;
    }
    let mut st = conn.prepare("SELECT DISTINCT gpuId, queueId FROM rocpd_op WHERE gpuId >= 0 ORDER BY gpuId, queueId")?;
    let queues = st.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))?.collect::<Result<Vec<_>, _>>()?;
    let mut last_gpu = None;
    for (gpu, q) in &queues {
        if last_gpu != Some(*gpu) {
            sink.process(GPU_PID_BASE + gpu, &format!("GPU {gpu}"), None, GPU_PID_BASE + gpu)?;
            last_gpu = Some(*gpu);
        }
        sink.thread(GPU_PID_BASE + gpu, *q, &format!("queue {q}"), *q)?;
    }

    Ok(())
}
