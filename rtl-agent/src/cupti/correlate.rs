//! Correlation: GPU records meet the API record with the same correlation id.

use super::*;

/// The API call an op came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiCall {
    pub start: u64,
    pub end: u64,
    pub tid: u32,
    pub name_id: u32,
    pub domain: u32,
}

/// API records kept for ops still to come (graph replays deliver their nodes later).
const MAX_APIS: usize = 1 << 18;
/// Ops waiting for their API record.
const MAX_WAITING: usize = 1 << 16;

#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorrStats {
    pub api_records: u64,
    pub gpu_records: u64,
    pub linked: u64,
    /// Ops published without an API call (its record never came, or was evicted).
    pub without_api: u64,
    pub short_records: u64,
    pub other_records: u64,
    /// Graph launches CUPTI could not time (start and end 0 in its record): not published.
    pub graphs_untimed: u64,
}

#[derive(Default)]
pub struct Correlator {
    apis: HashMap<u32, ApiCall>,
    max_corr: u32,
    waiting: VecDeque<GpuOp>,
    pub stats: CorrStats,
}

impl Correlator {
    pub fn on_api(&mut self, corr: u32, call: ApiCall) {
        self.stats.api_records += 1;
        // A driver record wins over a runtime one with the same id (the probes see the driver).
        if let Some(old) = self.apis.get(&corr) {
            if old.domain == DOMAIN_DRIVER && call.domain != DOMAIN_DRIVER {
                return;
            }
        }
        self.apis.insert(corr, call);
        self.max_corr = self.max_corr.max(corr);
        if self.apis.len() > MAX_APIS {
            let keep = self.max_corr.saturating_sub((MAX_APIS / 2) as u32);
            self.apis.retain(|&c, _| c >= keep);
        }
    }

    fn fill(op: &mut GpuOp, c: &ApiCall) {
        op.flags |= wire::OP_HAS_CPU_TIMES | wire::OP_TID_KNOWN;
        op.tid = c.tid;
        op.cpu_start_ns = c.start;
        op.cpu_end_ns = c.end;
        op.api_name_id = c.name_id;
    }

    /// A GPU op: emitted at once when its API record is known, else kept until one comes.
    pub fn on_gpu(&mut self, mut op: GpuOp, emit: &mut dyn FnMut(&GpuOp)) {
        self.stats.gpu_records += 1;
        if let Some(c) = self.apis.get(&(op.record_index as u32)) {
            Self::fill(&mut op, c);
            self.stats.linked += 1;
            emit(&op);
            return;
        }
        if self.waiting.len() >= MAX_WAITING {
            if let Some(old) = self.waiting.pop_front() {
                self.stats.without_api += 1;
                emit(&old);
            }
        }
        self.waiting.push_back(op);
    }

    /// After each delivered buffer: ops whose API record has arrived since.
    pub fn retry(&mut self, emit: &mut dyn FnMut(&GpuOp)) {
        let n = self.waiting.len();
        for _ in 0..n {
            let Some(mut op) = self.waiting.pop_front() else { break };
            match self.apis.get(&(op.record_index as u32)) {
                Some(c) => {
                    Self::fill(&mut op, c);
                    self.stats.linked += 1;
                    emit(&op);
                }
                None => self.waiting.push_back(op),
            }
        }
    }

    /// End of the session: whatever still waits goes out without its API call.
    pub fn finish(&mut self, emit: &mut dyn FnMut(&GpuOp)) {
        self.retry(emit);
        while let Some(op) = self.waiting.pop_front() {
            self.stats.without_api += 1;
            emit(&op);
        }
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// One decoded record. `kernel_name`: the kernel's name bytes (the record's `name`),
    /// `intern(kind, bytes)` gives string ids, `api_name(domain, cbid)` the API's name id.
    pub fn on_record(
        &mut self,
        a: &Activity,
        kernel_name: Option<&[u8]>,
        intern: &mut dyn FnMut(u8, &[u8]) -> u32,
        api_name: &mut dyn FnMut(u32, u32) -> u32,
        emit: &mut dyn FnMut(&GpuOp),
    ) {
        match a {
            Activity::Api { domain, rec } => {
                let name_id = api_name(*domain, rec.cbid);
                self.on_api(rec.correlation_id, ApiCall { start: rec.start, end: rec.end, tid: rec.thread_id, name_id, domain: *domain });
            }
            Activity::Graph(g) if g.start == 0 && g.end == 0 => self.stats.graphs_untimed += 1,
            Activity::Kernel(_) | Activity::Memcpy(_) | Activity::Memset(_) | Activity::Graph(_) => {
                let kid = kernel_name.filter(|n| !n.is_empty()).map_or(0, |n| intern(wire::STR_KERNEL, n));
                if let Some(op) = gpu_op(a, kid) {
                    self.on_gpu(op, emit);
                }
            }
            Activity::Short(_) => self.stats.short_records += 1,
            Activity::Other(_) => self.stats.other_records += 1,
        }
    }
}
