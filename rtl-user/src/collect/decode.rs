//! Ring-buffer records -> typed events. Every record is length-checked before it is read;
//! a record of unknown kind or wrong size is counted, never trusted.

use rtl_common::{
    AgentBatch, ApiCall, ApiCalls, ApiEnter, ApiEnterShort, ApiExit, ApiExitShort, EventHeader, EventKind, ExecEvent, HeldCall,
    StringEnter, StringLate, TaskEvent, ThreadExitEvent, CALL_BATCH_MAX,
};

/// One decoded ring-buffer record.
#[derive(Debug, Clone)]
pub enum Event {
    Enter(ApiEnter),
    /// An entry with a string argument: the entry and the text (lossily UTF-8).
    StringEnter(ApiEnter, String),
    /// The string argument of the open call `hdr.api_id` on `hdr.pid_tgid`, read at its return.
    StringLate(EventHeader, String),
    Exit(ApiExit),
    /// A whole call in one record ([`EventKind::ApiCall`]): its entry, then its return, as the
    /// `ApiEnterShort` + `ApiExitShort` pair it stands for.
    Call(ApiEnter, ApiExit),
    /// Finished calls of one thread, oldest first ([`EventKind::ApiCalls`]), each as the pair
    /// it stands for.
    Calls(Vec<(ApiEnter, ApiExit)>),
    /// A thread exited, with its name then (`comm`).
    ThreadExit(EventHeader, String),
    /// A thread killed by another thread's exec.
    ExecKill(EventHeader),
    /// An exec, with what the kernel read of the new image.
    Exec(EventHeader, ExecInfo),
    Fork(EventHeader, u32),
    /// Bytes the agent published (only the copied part) and the length it asked for.
    Agent(EventHeader, Vec<u8>, u32),
    /// A user stack at an API's entry: the head and its data (`len` bytes, checked).
    UserStack(rtl_common::UserStackHead, Vec<u8>),
    /// The Python frames at an API's entry (written before its user stack).
    PythonStack(rtl_common::python::PyStackHead, Vec<rtl_common::python::PyFrameRaw>),
    /// A code object's copy, made the first time the probe saw it in its process.
    PythonCode(crate::stacks::python::code_record::CodeRecord),
}

/// What an exec record says about the new image (empty strings where the kernel could not read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecInfo {
    pub ppid: Option<u32>,
    /// The task name (`comm`).
    pub comm: String,
    /// The path given to exec.
    pub filename: String,
    /// The command line, arguments joined by spaces, " ..." when cut.
    pub cmdline: String,
}

#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    TooShort(usize),
    UnknownKind(u32),
    WrongSize {
        kind: u32,
        len: usize,
    },
    /// An `ApiCalls` record that says it holds more calls than it can.
    BadCount(u64),
}

/// A call held in a call slot as the `ApiEnterShort` + `ApiExitShort` pair it stands for.
pub fn held_pair(pid_tgid: u64, c: &HeldCall) -> (ApiEnter, ApiExit) {
    let h = |kind: EventKind, ts_ns| EventHeader { kind: kind as u32, api_id: c.api_id as u32, pid_tgid, ts_ns };
    let mut args = [0; rtl_common::MAX_ARGS];
    args[..6].copy_from_slice(&c.args);
    (
        ApiEnter { hdr: h(EventKind::ApiEnterShort, c.enter_ts), args, fsbase: c.fsbase },
        ApiExit { hdr: h(EventKind::ApiExitShort, c.exit_ts), ret: c.ret, out: 0, has_out: 0, _pad: 0 },
    )
}

fn read<T: Copy>(b: &[u8]) -> Option<T> {
    if b.len() < std::mem::size_of::<T>() {
        return None;
    }
    // SAFETY: length checked; T is a plain #[repr(C)] integer aggregate valid for any bytes.
    Some(unsafe { std::ptr::read_unaligned(b.as_ptr().cast::<T>()) })
}

/// A NUL-terminated text field of a record (the whole field when it has no NUL), lossily UTF-8.
fn c_text(v: &[u8]) -> String {
    let n = v.iter().position(|&c| c == 0).unwrap_or(v.len());
    String::from_utf8_lossy(&v[..n]).into_owned()
}

pub fn decode(b: &[u8]) -> Result<Event, DecodeError> {
    let hdr: EventHeader = read(b).ok_or(DecodeError::TooShort(b.len()))?;
    let kind = EventKind::from_u32(hdr.kind).ok_or(DecodeError::UnknownKind(hdr.kind))?;
    let wrong = || DecodeError::WrongSize { kind: hdr.kind, len: b.len() };
    Ok(match kind {
        EventKind::ApiEnter => Event::Enter(read(b).ok_or_else(wrong)?),
        EventKind::ApiEnterShort => {
            let e: ApiEnterShort = read(b).ok_or_else(wrong)?;
            let mut args = [0u64; rtl_common::MAX_ARGS];
            args[..6].copy_from_slice(&e.args);
            Event::Enter(ApiEnter { hdr: e.hdr, args, fsbase: e.fsbase })
        }
        EventKind::StringEnter => {
            let s: StringEnter = read(b).ok_or_else(wrong)?;
            Event::StringEnter(s.enter, c_text(&s.text))
        }
        EventKind::StringLate => {
            let s: StringLate = read(b).ok_or_else(wrong)?;
            Event::StringLate(s.hdr, c_text(&s.text))
        }
        EventKind::ApiExit => Event::Exit(read(b).ok_or_else(wrong)?),
        EventKind::ApiExitShort => {
            let e: ApiExitShort = read(b).ok_or_else(wrong)?;
            Event::Exit(ApiExit { hdr: e.hdr, ret: e.ret, out: 0, has_out: 0, _pad: 0 })
        }
        EventKind::ApiCall => {
            let c: ApiCall = read(b).ok_or_else(wrong)?;
            let held = HeldCall {
                api_id: c.hdr.api_id as u64,
                enter_ts: c.enter_ts,
                exit_ts: c.hdr.ts_ns,
                args: c.args,
                fsbase: c.fsbase,
                ret: c.ret,
            };
            let (e, x) = held_pair(c.hdr.pid_tgid, &held);
            Event::Call(e, x)
        }
        EventKind::ApiCalls => {
            let c: ApiCalls = read(b).ok_or_else(wrong)?;
            if c.count == 0 || c.count > CALL_BATCH_MAX as u64 {
                return Err(DecodeError::BadCount(c.count));
            }
            Event::Calls(c.calls[..c.count as usize].iter().map(|h| held_pair(c.hdr.pid_tgid, h)).collect())
        }
        EventKind::ThreadExit => {
            let e: ThreadExitEvent = read(b).ok_or_else(wrong)?;
            Event::ThreadExit(e.hdr, c_text(&e.comm))
        }
        EventKind::ExecKill => Event::ExecKill(hdr),
        // Only ever in the LOADER_EVENTS buffer (collect/loader_stops.rs), never in EVENTS.
        EventKind::LoaderStop => return Err(DecodeError::UnknownKind(hdr.kind)),
        EventKind::Exec => {
            let e: ExecEvent = read(b).ok_or_else(wrong)?;
            let n = (e.args_len as usize).min(e.args.len());
            Event::Exec(
                hdr,
                ExecInfo {
                    ppid: (e.ppid != 0).then_some(e.ppid),
                    comm: c_text(&e.comm),
                    filename: c_text(&e.filename),
                    cmdline: crate::join::proc_info::join_args(&e.args[..n], e.args_total as usize > n),
                },
            )
        }
        EventKind::Fork => {
            let t: TaskEvent = read(b).ok_or_else(wrong)?;
            Event::Fork(hdr, t.child_tgid)
        }
        EventKind::AgentBatch => {
            let head = std::mem::offset_of!(AgentBatch, data);
            if b.len() < head {
                return Err(wrong());
            }
            let len: u32 = read(&b[std::mem::offset_of!(AgentBatch, len)..]).ok_or_else(wrong)?;
            let copied: u32 = read(&b[std::mem::offset_of!(AgentBatch, copied)..]).ok_or_else(wrong)?;
            let copied = (copied as usize).min(b.len() - head).min(rtl_common::AGENT_BATCH_MAX);
            Event::Agent(hdr, b[head..head + copied].to_vec(), len)
        }
        EventKind::UserStack => {
            let (head, data) = crate::collect::stack_record::decode(b).ok_or_else(wrong)?;
            Event::UserStack(head, data)
        }
        EventKind::PythonStack => {
            let (head, frames) = crate::collect::stack_record::decode_python(b).ok_or_else(wrong)?;
            Event::PythonStack(head, frames)
        }
        EventKind::PythonCode => Event::PythonCode(crate::stacks::python::code_record::decode(b).ok_or_else(wrong)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<T>(v: &T) -> Vec<u8> {
        // SAFETY: reading the bytes of a plain struct.
        unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }.to_vec()
    }

    #[test]
    fn round_trips_and_rejects() {
        let e = ApiEnter {
            hdr: EventHeader { kind: EventKind::ApiEnter as u32, api_id: 3, pid_tgid: (7 << 32) | 9, ts_ns: 11 },
            args: [1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0],
            fsbase: 0x7f00,
        };
        let b = bytes(&e);
        match decode(&b).unwrap() {
            Event::Enter(d) => {
                assert_eq!(d.args[7], 8);
                assert_eq!(d.hdr.pid_tgid, (7 << 32) | 9);
                assert_eq!(d.fsbase, 0x7f00);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&b[..30]), Err(DecodeError::WrongSize { .. })));
        assert!(matches!(decode(&b[..10]), Err(DecodeError::TooShort(10))));
        let mut bad = b.clone();
        bad[0] = 99;
        assert_eq!(decode(&bad).unwrap_err(), DecodeError::UnknownKind(99));
    }

    #[test]
    fn short_enter_reads_as_an_enter_without_stack_words() {
        let e = ApiEnterShort {
            hdr: EventHeader { kind: EventKind::ApiEnterShort as u32, api_id: 4, pid_tgid: (7 << 32) | 9, ts_ns: 12 },
            args: [1, 2, 3, 4, 5, 6],
            fsbase: 0x7f00,
        };
        let b = bytes(&e);
        assert_eq!(b.len(), 80, "the short record is 48 bytes smaller than ApiEnter");
        match decode(&b).unwrap() {
            Event::Enter(d) => {
                assert_eq!(d.hdr.kind, EventKind::ApiEnterShort as u32);
                assert_eq!(&d.args[..6], &[1, 2, 3, 4, 5, 6]);
                assert!(d.args[6..].iter().all(|&a| a == 0));
                assert_eq!(d.fsbase, 0x7f00);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&b[..70]), Err(DecodeError::WrongSize { .. })));
    }

    #[test]
    fn short_exit_reads_as_an_exit_without_output_value() {
        let e = ApiExitShort {
            hdr: EventHeader { kind: EventKind::ApiExitShort as u32, api_id: 4, pid_tgid: (7 << 32) | 9, ts_ns: 12 },
            ret: 0x1_0000_0002,
        };
        let b = bytes(&e);
        assert_eq!(b.len(), 32, "the short record is 16 bytes smaller than ApiExit");
        match decode(&b).unwrap() {
            Event::Exit(d) => {
                assert_eq!(d.hdr.kind, EventKind::ApiExitShort as u32);
                assert_eq!((d.hdr.api_id, d.hdr.pid_tgid, d.hdr.ts_ns), (4, (7 << 32) | 9, 12));
                assert_eq!(d.ret, 0x1_0000_0002);
                assert_eq!((d.out, d.has_out), (0, 0));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&b[..30]), Err(DecodeError::WrongSize { .. })));
    }

    #[test]
    fn a_call_record_reads_as_its_entry_and_return() {
        let c = ApiCall {
            hdr: EventHeader { kind: EventKind::ApiCall as u32, api_id: 5, pid_tgid: (7 << 32) | 9, ts_ns: 30 },
            enter_ts: 20,
            args: [1, 2, 3, 4, 5, 6],
            fsbase: 0x7000,
            ret: 0x1_0000_0003,
        };
        let b = bytes(&c);
        assert_eq!(b.len(), 96);
        match decode(&b).unwrap() {
            Event::Call(e, x) => {
                assert_eq!(
                    (e.hdr.kind, e.hdr.api_id, e.hdr.pid_tgid, e.hdr.ts_ns),
                    (EventKind::ApiEnterShort as u32, 5, (7 << 32) | 9, 20)
                );
                assert_eq!(e.args, [1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0]);
                assert_eq!(e.fsbase, 0x7000);
                assert_eq!((x.hdr.kind, x.hdr.api_id, x.hdr.pid_tgid, x.hdr.ts_ns), (EventKind::ApiExitShort as u32, 5, (7 << 32) | 9, 30));
                assert_eq!((x.ret, x.out, x.has_out), (0x1_0000_0003, 0, 0));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&b[..95]), Err(DecodeError::WrongSize { .. })));
    }

    #[test]
    fn held_calls_read_as_their_calls_in_order_and_a_bad_count_is_rejected() {
        let mut c = ApiCalls {
            hdr: EventHeader { kind: EventKind::ApiCalls as u32, api_id: 0, pid_tgid: (7 << 32) | 9, ts_ns: 61 },
            count: 3,
            calls: [HeldCall::default(); CALL_BATCH_MAX],
        };
        for (i, h) in c.calls.iter_mut().enumerate() {
            let i = i as u64;
            *h = HeldCall { api_id: 40 + i, enter_ts: 10 * i, exit_ts: 10 * i + 1, args: [i, 2, 3, 4, 5, 6], fsbase: 0, ret: 100 + i };
        }
        let b = bytes(&c);
        assert_eq!(b.len(), 32 + 88 * CALL_BATCH_MAX);
        match decode(&b).unwrap() {
            Event::Calls(v) => {
                assert_eq!(v.len(), 3, "only `count` calls, not the rest of the array");
                for (i, (e, x)) in v.iter().enumerate() {
                    let i = i as u64;
                    assert_eq!(
                        (e.hdr.kind, e.hdr.api_id, e.hdr.pid_tgid, e.hdr.ts_ns),
                        (EventKind::ApiEnterShort as u32, 40 + i as u32, (7 << 32) | 9, 10 * i)
                    );
                    assert_eq!(e.args, [i, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0, 0]);
                    assert_eq!(
                        (x.hdr.kind, x.hdr.api_id, x.hdr.ts_ns, x.ret, x.has_out),
                        (EventKind::ApiExitShort as u32, 40 + i as u32, 10 * i + 1, 100 + i, 0)
                    );
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&b[..b.len() - 1]), Err(DecodeError::WrongSize { .. })));
        for bad in [0, CALL_BATCH_MAX as u64 + 1, u64::MAX] {
            c.count = bad;
            assert_eq!(decode(&bytes(&c)).err(), Some(DecodeError::BadCount(bad)));
        }
    }

    #[test]
    fn agent_batch_copied_is_bounded_by_the_record() {
        let mut b = vec![0u8; std::mem::offset_of!(AgentBatch, data) + 10];
        b[0] = EventKind::AgentBatch as u8;
        let off = std::mem::offset_of!(AgentBatch, copied);
        b[off..off + 4].copy_from_slice(&5000u32.to_le_bytes());
        match decode(&b).unwrap() {
            Event::Agent(_, data, _) => assert_eq!(data.len(), 10),
            other => panic!("{other:?}"),
        }
    }
}
