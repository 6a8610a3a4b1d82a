//! `rtl-ebpf`: a thin command-line front end over the `rtl_user` library.

use std::io::Write as _;

use clap::Parser;
use rtl_user::cli::{Cli, Command};
use rtl_user::session::{self, Mode};
use rtl_user::{error, read};

fn main() {
    let cli = Cli::parse();
    let code = match dispatch(cli) {
        Ok(code) => code,
        Err(e) => {
            // Not eprintln!: with stderr closed it would panic and lose the exit code.
            let _ = writeln!(std::io::stderr(), "rtl-ebpf: error: {e:#}");
            error::exit_code(&e)
        }
    };
    std::process::exit(code);
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    let trace = |mode: Mode, opts: &rtl_user::cli::TraceOpts| -> anyhow::Result<i32> {
        let o = session::run(mode, opts)?;
        session::print_outcome(&o);
        Ok(o.child_exit.unwrap_or(0))
    };
    match cli.command {
        None if cli.all => trace(Mode::All, &cli.trace),
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            Ok(2)
        }
        Some(Command::Attach { pids, trace: opts }) => trace(Mode::Pids(pids), &opts),
        Some(Command::Run { trace: opts, cmd }) => trace(Mode::Run(cmd), &opts),
        Some(Command::Summary { trace, json, html, top }) => {
            let opts = read::SummaryOptions { json, html, top };
            read::summary(&trace, &opts, &mut std::io::stdout().lock())?;
            Ok(0)
        }
        Some(Command::Convert { trace, format, output }) => {
            if format != "perfetto" {
                anyhow::bail!("unknown --format {format}: the supported format is `perfetto`");
            }
            let name = output.to_string_lossy();
            if name.ends_with(".pftrace") {
                read::convert_perfetto_proto(&trace, &output)?;
            } else {
                read::convert_perfetto_json(&trace, &output)?;
            }
            eprintln!("rtl-ebpf: wrote {}", output.display());
            Ok(0)
        }
        Some(Command::Merge { output, inputs }) => {
            let stats = read::merge(&inputs, &output, true)?;
            eprintln!("rtl-ebpf: merged {} traces into {}: {stats:?}", inputs.len(), output.display());
            Ok(0)
        }
        Some(Command::ListApis { lib, apis, runtime }) => {
            rtl_user::probe::list_apis(lib.as_deref(), &apis, runtime)?;
            Ok(0)
        }
    }
}
