//! `rtl-ebpf`: a thin command-line front end over the `rtl_user` library.

use std::io::Write as _;

use clap::Parser;
use rtl_user::cli::{Cli, Command, TraceOpts};
use rtl_user::error::Fatal;
use rtl_user::session::{self, Mode};
use rtl_user::{error, read, term};

fn main() {
    let cli = Cli::parse();
    let code = match dispatch(cli) {
        Ok(code) => code,
        // stdout closed early (`| head`): the reader wanted no more; end quietly, like ripgrep.
        Err(e) if stdout_closed(&e) => 0,
        Err(e) => {
            // Not eprintln!: with stderr closed it would panic and lose the exit code.
            let _ = writeln!(std::io::stderr(), "rtl-ebpf: error: {}", term::escape(&format!("{e:#}")));
            error::exit_code(&e)
        }
    };
    std::process::exit(code);
}

/// True when the error is a write to a closed pipe.
fn stdout_closed(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>().and_then(|j| j.io_error_kind()) == Some(std::io::ErrorKind::BrokenPipe)
    })
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let trace = |mode: Mode, opts: &TraceOpts| -> anyhow::Result<i32> {
        if opts.agent.is_some() && !matches!(mode, Mode::Run(_)) {
            return Err(anyhow::anyhow!(Fatal::Usage(
                "--agent applies to `run` only (it names the library `run` preloads); for attach / --all, start the application with the agent (docs/tracing.md)".into()
            )));
        }
        if opts.graph_nodes && !matches!(mode, Mode::Run(_)) {
            return Err(anyhow::anyhow!(Fatal::Usage(
                "--graph-nodes applies to `run` only; for attach / --all, start the application with RTL_AGENT_GRAPH_NODES=1 (docs/tracing.md)".into()
            )));
        }
        rtl_user::term::set_quiet(opts.quiet);
        let o = session::run(mode, opts)?;
        if opts.quiet {
            // No table: only what was written, what was lost and where.
            let _ = rtl_user::report::print_session_totals(&o);
        } else {
            let _ = rtl_user::report::print_session_summary(&o);
        }
        Ok(o.child_exit.unwrap_or(0))
    };
    let mut stdout = std::io::BufWriter::new(std::io::stdout());
    let code = match cli.command {
        None if cli.all => trace(Mode::All, &cli.trace)?,
        None => {
            use clap::CommandFactory;
            write!(stdout, "{}", Cli::command().render_help())?;
            2
        }
        Some(Command::Attach { pids, keep_waiting, trace: mut opts }) => {
            opts.keep_waiting = keep_waiting;
            trace(Mode::Pids(pids), &opts)?
        }
        Some(Command::Run { trace: mut opts, as_root, cmd }) => {
            opts.as_root = as_root;
            trace(Mode::Run(cmd), &opts)?
        }
        Some(Command::Summary { traces, json, html, top, linked_only }) => {
            let opts = read::SummaryOptions { json, html, top, linked_only };
            match traces.as_slice() {
                [one] => read::summary(one, &opts, &mut stdout)?,
                [a, b] => read::summary_compare(a, b, &opts, &mut stdout)?,
                _ => unreachable!("clap takes one or two traces"),
            }
            0
        }
        Some(Command::Check { trace, min_occupancy, max_gaps, max_mean, max_p99, thresholds, window, linked_only, json }) => {
            use rtl_trace::read::check::Thresholds;
            let mut t = match &thresholds {
                Some(f) => rtl_trace::read::check::thresholds::from_file(f)?,
                None => Thresholds::default(),
            };
            t.overlay(Thresholds {
                min_occupancy,
                max_gaps,
                max_mean,
                max_p99,
                window: window.as_deref().and_then(read::Window::parse).unwrap_or_default(),
            });
            if window.as_deref() == Some("auto") {
                t.window = read::Window::Auto;
            }
            let r = read::check(&trace, &t, read::CheckOptions { json, linked_only }, &mut stdout)?;
            if r.passed() {
                0
            } else {
                read::EXIT_CHECK_FAILED
            }
        }
        Some(Command::Convert { trace, format, per_process, output }) => {
            let name = output.to_string_lossy();
            if per_process && format != "kineto" {
                return Err(anyhow::anyhow!(Fatal::Usage("--per-process applies to --format kineto only".into())));
            }
            if format == "kineto" {
                let out = read::convert_kineto(&trace, &output, per_process)?;
                for f in &out.files {
                    term::message(&format!("wrote {}", f.display()));
                }
                if out.unattributed_ops > 0 {
                    term::message(&format!(
                        "{} GPU ops linked to no traced process's call are in the last file (its own rank)",
                        out.unattributed_ops
                    ));
                }
                return Ok(0);
            } else if format == "rocpd-sdk" {
                let st = read::convert_rocpd_sdk(&trace, &output)?;
                term::message(&format!(
                    "rocpd (rocprofiler-sdk schema {}): {} regions, {} markers, {} kernel dispatches, {} memory copies",
                    read::SDK_SCHEMA_VERSION,
                    st.regions,
                    st.markers,
                    st.kernel_dispatches,
                    st.memory_copies
                ));
                for (n, what) in [
                    (st.barriers_left_out, "barrier ops left out (the SDK schema has no table for them)"),
                    (st.unattributed_ops_left_out, "GPU ops left out: linked to no traced API call, so to no process"),
                    (st.unattributed_markers_left_out, "roctx ranges left out: on no traced thread"),
                ] {
                    if n > 0 {
                        term::message(&format!("{n} {what}"));
                    }
                }
            } else if name.ends_with(".pftrace") {
                read::convert_perfetto_proto(&trace, &output)?;
            } else {
                read::convert_perfetto_json(&trace, &output)?;
            }
            term::message(&format!("wrote {}", output.display()));
            0
        }
        Some(Command::Merge { output, inputs }) => {
            let stats = read::merge(&inputs, &output, true)?;
            let table = stats.to_string();
            term::message_lines(
                &format!("merged {} traces into {}:", inputs.len(), output.display()),
                &table.trim_end().lines().collect::<Vec<_>>(),
            );
            0
        }
        Some(Command::ListApis { lib, apis, runtime }) => {
            rtl_user::probe::list_apis(lib.as_deref(), &apis, runtime, &mut stdout)?;
            0
        }
    };
    stdout.flush()?;
    Ok(code)
}
