//! Names that traced processes hand us, held within bounds.
//!
//! Every string here comes from a process that may be hostile: the agent's string records (any
//! process can publish forged batches) and kernel names from `__hipRegisterFunction` /
//! `hipModuleGetFunction`. So:
//! * one name is at most [`MAX_NAME_BYTES`]; demangling is bounded by `rtl_trace::demangle` (a
//!   458-byte mangled name can expand to 126 MB: back-references double it at every level; the
//!   demangler stops at `MAX_DEMANGLED` bytes of output and the name ends in `...`), counted;
//! * a process holds at most [`PER_PROCESS_NAMES`] names and [`PER_PROCESS_BYTES`] of them,
//!   and all processes together [`TOTAL_BYTES`]; what does not fit is refused and counted
//!   ([`StringCounters`], in the trace's metadata);
//! * a kernel-name table belongs to a program image and is shared, not copied, by the
//!   processes forked from it ([`KernelNames`]): copied on first write, freed with the last
//!   process that uses it.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::probe::demangle;

/// Longest name kept (bytes, before demangling): longer ones are cut at a character boundary.
pub const MAX_NAME_BYTES: usize = 4096;
/// Names one process (one table) may hold.
pub const PER_PROCESS_NAMES: usize = 1 << 18;
/// Bytes of names one process (one table) may hold.
pub const PER_PROCESS_BYTES: usize = 32 << 20;
/// Bytes of names all tables of one kind (agent strings, kernel names) together may hold.
pub const TOTAL_BYTES: u64 = 256 << 20;
/// What one entry costs beyond its text (hash slot, `Arc` header, key): an estimate.
const ENTRY_OVERHEAD: usize = 64;

/// What the bounds did, for the trace's metadata.
#[derive(Debug, Default)]
pub struct StringCounters {
    /// Names refused because their table or all tables were full.
    pub refused: AtomicU64,
    /// Names cut to [`MAX_NAME_BYTES`].
    pub truncated: AtomicU64,
    /// Names whose demangled form was cut at `probe::demangle::MAX_DEMANGLED` bytes.
    pub demangled_cut: AtomicU64,
    /// Bytes held now, all tables together.
    pub bytes: AtomicU64,
    /// Most bytes held at once.
    pub peak_bytes: AtomicU64,
}

/// The trace's metadata: what the bounds on agent strings and kernel names did.
pub fn names_metadata(agent: &StringCounters, kernel: &StringCounters) -> Vec<(&'static str, String)> {
    let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
    vec![
        ("agent_strings_refused", r(&agent.refused).to_string()),
        ("agent_strings_peak_bytes", r(&agent.peak_bytes).to_string()),
        ("kernel_names_refused", r(&kernel.refused).to_string()),
        ("kernel_names_peak_bytes", r(&kernel.peak_bytes).to_string()),
        ("names_demangled_cut", (r(&agent.demangled_cut) + r(&kernel.demangled_cut)).to_string()),
        ("names_truncated", (r(&agent.truncated) + r(&kernel.truncated)).to_string()),
    ]
}

/// Accounting shared by every table of one kind.
#[derive(Clone, Debug, Default)]
pub struct Pool(Arc<StringCounters>);

impl Pool {
    pub fn counters(&self) -> &StringCounters {
        &self.0
    }

    fn take(&self, n: usize) -> bool {
        let c = &self.0;
        let mut cur = c.bytes.load(Ordering::Relaxed);
        loop {
            let next = cur + n as u64;
            if next > TOTAL_BYTES {
                return false;
            }
            match c.bytes.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    c.peak_bytes.fetch_max(next, Ordering::Relaxed);
                    return true;
                }
                Err(v) => cur = v,
            }
        }
    }

    fn give_back(&self, n: usize) {
        self.0.bytes.fetch_sub(n as u64, Ordering::Relaxed);
    }
}

/// The pool of every process's agent string table (`join/gpu/`): one per collector.
pub fn agent_pool() -> &'static Pool {
    static POOL: std::sync::OnceLock<Pool> = std::sync::OnceLock::new();
    POOL.get_or_init(Pool::default)
}

/// A bounded map of names: one process's agent strings, or one image's kernel names.
#[derive(Debug)]
pub struct NameTable<K: Eq + Hash> {
    names: HashMap<K, Arc<str>>,
    bytes: usize,
    pool: Pool,
}

impl<K: Eq + Hash> NameTable<K> {
    pub fn new(pool: &Pool) -> Self {
        Self { names: HashMap::new(), bytes: 0, pool: pool.clone() }
    }

    pub fn counters(&self) -> &StringCounters {
        self.pool.counters()
    }

    pub fn get(&self, k: &K) -> Option<&Arc<str>> {
        self.names.get(k)
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.names.contains_key(k)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Keeps `name` under `k` (replacing what was there), if the bounds allow; false (and
    /// counted) if not.
    pub fn insert(&mut self, k: K, name: Arc<str>) -> bool {
        let cost = name.len() + ENTRY_OVERHEAD;
        let old = self.names.get(&k).map_or(0, |o| o.len() + ENTRY_OVERHEAD);
        let grows = self.names.len() + usize::from(old == 0) > PER_PROCESS_NAMES || self.bytes - old + cost > PER_PROCESS_BYTES;
        if grows || !self.pool.take(cost) {
            self.pool.0.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.pool.give_back(old);
        self.bytes = self.bytes - old + cost;
        self.names.insert(k, name);
        true
    }

    pub fn clear(&mut self) {
        self.pool.give_back(self.bytes);
        self.bytes = 0;
        self.names = HashMap::new();
    }
}

impl<K: Eq + Hash> Default for NameTable<K> {
    /// An agent string table, in [`agent_pool`].
    fn default() -> Self {
        Self::new(agent_pool())
    }
}

impl<K: Eq + Hash + Clone> Clone for NameTable<K> {
    /// A real copy: its bytes count against the pool again (a copy that does not fit is empty).
    fn clone(&self) -> Self {
        if !self.pool.take(self.bytes) {
            self.pool.0.refused.fetch_add(self.names.len() as u64, Ordering::Relaxed);
            return Self::new(&self.pool);
        }
        Self { names: self.names.clone(), bytes: self.bytes, pool: self.pool.clone() }
    }
}

impl<K: Eq + Hash> Drop for NameTable<K> {
    fn drop(&mut self) {
        self.pool.give_back(self.bytes);
    }
}

/// Kernel names by process: (host stub or function handle) -> name, one table per program
/// image, shared by the processes forked from it until one of them registers a kernel of its
/// own (copy on write).
#[derive(Debug, Default)]
pub struct KernelNames {
    by_pid: HashMap<u32, Arc<NameTable<u64>>>,
    pool: Pool,
}

impl KernelNames {
    pub fn counters(&self) -> &StringCounters {
        self.pool.counters()
    }

    pub fn get(&self, pid: u32, handle: u64) -> Option<&Arc<str>> {
        self.by_pid.get(&pid)?.get(&handle)
    }

    /// Records a kernel name (already bounded and demangled: [`name_from_process`]).
    pub fn insert(&mut self, pid: u32, handle: u64, name: Arc<str>) {
        let pool = &self.pool;
        let t = self.by_pid.entry(pid).or_insert_with(|| Arc::new(NameTable::new(pool)));
        Arc::make_mut(t).insert(handle, name);
    }

    /// A forked child starts with its parent's kernels (same addresses): the same table.
    pub fn fork(&mut self, parent: u32, child: u32) {
        if let Some(t) = self.by_pid.get(&parent).cloned() {
            self.by_pid.insert(child, t);
        }
    }

    /// The process exec'd or exited: its table is dropped (freed with its last user).
    pub fn forget(&mut self, pid: u32) {
        self.by_pid.remove(&pid);
    }

    /// Processes that hold a table.
    pub fn processes(&self) -> usize {
        self.by_pid.len()
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
pub fn bounded(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A name from a traced process, ready to keep: cut to [`MAX_NAME_BYTES`], and demangled
/// (bounded) when it is an Itanium C++ name. Counted in `counters`.
pub fn name_from_process(raw: &str, counters: &StringCounters) -> Arc<str> {
    let text = bounded(raw, MAX_NAME_BYTES);
    if text.len() < raw.len() {
        counters.truncated.fetch_add(1, Ordering::Relaxed);
    }
    match demangle::demangle(text) {
        Some(s) => {
            if s.len() > demangle::MAX_DEMANGLED {
                counters.demangled_cut.fetch_add(1, Ordering::Relaxed);
            }
            Arc::from(s.as_str())
        }
        None => Arc::from(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name whose back-references double the output at every level: `f<A, B<A,A>,
    /// B<B<A,A>,B<A,A>>, ...>` (substitutions: #0 f, #1 A, #2 B, #3 B<A,A>, level k #(k+1)).
    fn exploding_name(levels: usize) -> String {
        let sub = |i: usize| if i == 0 { "S_".to_string() } else { format!("S{}_", base36(i - 1)) };
        let mut s = format!("_Z1fI1A1BI{}{}E", sub(1), sub(1));
        for k in 2..=levels {
            s.push_str(&format!("{}I{}{}E", sub(2), sub(k + 1), sub(k + 1)));
        }
        s.push_str("EvT_");
        s
    }

    fn base36(mut n: usize) -> String {
        let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let mut v = Vec::new();
        loop {
            v.push(digits[n % 36]);
            n /= 36;
            if n == 0 {
                break;
            }
        }
        v.reverse();
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn the_exploding_name_really_explodes() {
        // 12 levels: 142 bytes -> 53 200 bytes (as c++filt prints it); each level doubles.
        let name = exploding_name(12);
        let s = cpp_demangle::Symbol::new(name.as_str()).unwrap();
        let full = s.demangle(&cpp_demangle::DemangleOptions::default()).unwrap();
        assert!(full.len() > 50_000, "{}", full.len());
        assert!(full.starts_with("void f<A, B<A, A>, B<B<A, A>, B<A, A> >"), "{}", &full[..80]);
    }

    #[test]
    fn an_exploding_name_is_cut_quickly_and_counted() {
        let name = exploding_name(40);
        assert!(name.len() < 600, "{}", name.len());
        let c = StringCounters::default();
        let t = std::time::Instant::now();
        let kept = name_from_process(&name, &c);
        // Bounded work: well under a millisecond; allow a loaded machine a thousand times that.
        assert!(t.elapsed() < std::time::Duration::from_secs(1), "{:?}", t.elapsed());
        assert!(kept.len() <= demangle::MAX_DEMANGLED + 3 && kept.ends_with("..."), "{}", kept.len());
        assert_eq!(c.demangled_cut.load(Ordering::Relaxed), 1);
        assert_eq!(&*name_from_process("_Z6vecAddPfS_S_i", &c), "vecAdd(float*, float*, float*, int)");
        assert_eq!(&*name_from_process("hipMalloc", &c), "hipMalloc");
        assert_eq!(c.demangled_cut.load(Ordering::Relaxed), 1);
        let long = "x".repeat(MAX_NAME_BYTES + 10);
        assert_eq!(name_from_process(&long, &c).len(), MAX_NAME_BYTES);
        assert_eq!(c.truncated.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn tables_are_bounded_and_give_their_bytes_back() {
        let pool = Pool::default();
        let mut t = NameTable::new(&pool);
        let name: Arc<str> = Arc::from("k".repeat(1000).as_str());
        let mut kept = 0;
        for i in 0..(PER_PROCESS_BYTES / 1000 + 100) as u64 {
            kept += t.insert(i, name.clone()) as usize;
        }
        assert_eq!(kept, PER_PROCESS_BYTES / (1000 + ENTRY_OVERHEAD));
        assert_eq!(pool.counters().refused.load(Ordering::Relaxed) as usize, PER_PROCESS_BYTES / 1000 + 100 - kept);
        assert!(pool.counters().bytes.load(Ordering::Relaxed) as usize <= PER_PROCESS_BYTES);
        // Replacing an entry costs only the difference.
        assert!(t.insert(0, Arc::from("short")));
        drop(t);
        assert_eq!(pool.counters().bytes.load(Ordering::Relaxed), 0);
        // Many tables: the pool's total holds.
        let mut tables: Vec<NameTable<u64>> = Vec::new();
        let big: Arc<str> = Arc::from("x".repeat(1 << 20).as_str());
        for _ in 0..(TOTAL_BYTES >> 20) + 10 {
            let mut t = NameTable::new(&pool);
            t.insert(1, big.clone());
            tables.push(t);
        }
        assert!(pool.counters().bytes.load(Ordering::Relaxed) <= TOTAL_BYTES);
        assert!(tables.iter().filter(|t| t.is_empty()).count() >= 10);
    }

    #[test]
    fn forked_processes_share_one_kernel_table_until_they_write() {
        let mut k = KernelNames::default();
        for i in 0..1000u64 {
            k.insert(1, i, Arc::from(format!("kernel_{i}").as_str()));
        }
        let one = k.counters().bytes.load(Ordering::Relaxed);
        for child in 2..302 {
            k.fork(1, child);
        }
        assert_eq!(k.counters().bytes.load(Ordering::Relaxed), one, "300 forks copied nothing");
        assert_eq!(k.get(250, 7).map(|s| &**s), Some("kernel_7"));
        // A child that registers its own kernel gets its own copy.
        k.insert(7, 5000, Arc::from("mine"));
        assert!(k.counters().bytes.load(Ordering::Relaxed) > 2 * one - 1);
        assert!(k.get(1, 5000).is_none() && k.get(7, 5000).is_some());
        // Every process exits: everything is freed.
        for pid in 1..302 {
            k.forget(pid);
        }
        assert_eq!(k.counters().bytes.load(Ordering::Relaxed), 0);
    }
}
