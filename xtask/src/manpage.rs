//! The man page rtl-ebpf(1), made from the binary's own `--help` texts (the top level's and each
//! subcommand's, at 72 columns: with the man page's indent they fit 80), so it says exactly what
//! the installed binary accepts.

use std::path::Path;

use anyhow::{bail, Result};

use crate::util::cmd;

pub fn render(bin: &Path, version: &str) -> Result<String> {
    let top = help(bin, &[])?;
    let subs = subcommands(&top);
    if subs.is_empty() {
        bail!("`{} --help` lists no subcommands (no `Commands:` section)", bin.display());
    }
    let mut s = String::new();
    s.push_str(&format!(".TH RTL\\-EBPF 1 \"\" \"rtl\\-ebpf {}\" \"User Commands\"\n", escape(version)));
    s.push_str(".SH NAME\nrtl\\-ebpf \\- trace the GPU API calls of processes (eBPF uprobes) with GPU times, into a SQLite trace\n");
    s.push_str(".SH SYNOPSIS\n");
    for sub in &subs {
        s.push_str(&format!(".B rtl\\-ebpf {}\n.RI [ options ]\n.br\n", escape(sub)));
    }
    s.push_str(".B rtl\\-ebpf \\-\\-all\n.RI [ options ]\n");
    s.push_str(".SH DESCRIPTION\n");
    s.push_str(&verbatim(&top));
    s.push_str(".SH COMMANDS\n");
    for sub in &subs {
        s.push_str(&format!(".SS \"rtl\\-ebpf {}\"\n", escape(sub)));
        s.push_str(&verbatim(&help(bin, &[sub])?));
    }
    s.push_str(
        ".SH FILES\n\
         .TP\n/usr/lib/rtl\\-ebpf/librtl_agent.so\n\
         The in\\-process agent that \\fBrun\\fR preloads for GPU times. The binary looks for it next to\n\
         itself, then in \\fI../lib/rtl\\-ebpf/\\fR relative to its own directory; \\fB\\-\\-agent\\fR overrides both.\n\
         .SH SEE ALSO\n\
         /usr/share/doc/rtl\\-ebpf/README.md and /usr/share/doc/rtl\\-ebpf/docs/: how to trace (tracing.md),\n\
         the trace's columns (trace\\-format.md), reading traces, benchmarks, reliability.\n",
    );
    Ok(s)
}

fn help(bin: &Path, sub: &[&String]) -> Result<String> {
    cmd(bin.to_str().unwrap()).args(sub).arg("--help").env("COLUMNS", "72").env("NO_COLOR", "1").output()
}

/// The names under `Commands:` (clap's layout: two spaces, the name, spaces, the summary);
/// `help` itself is left out.
fn subcommands(top: &str) -> Vec<String> {
    top.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n != "help")
        .collect()
}

/// Text shown as is (no filling), escaped for roff.
fn verbatim(text: &str) -> String {
    let mut s = String::from(".nf\n");
    for line in text.lines() {
        let e = escape(line);
        if e.starts_with('.') || e.starts_with('\'') {
            s.push_str("\\&");
        }
        s.push_str(&e);
        s.push('\n');
    }
    s.push_str(".fi\n");
    s
}

/// Backslashes print as themselves and `-` stays an ASCII minus (so options copy and paste).
fn escape(t: &str) -> String {
    t.replace('\\', "\\e").replace('-', "\\-")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_come_from_the_commands_section() {
        let top = "About\n\nUsage: x [OPTIONS]\n       x <COMMAND>\n\nCommands:\n  attach     Trace\n             more\n  run        Launch\n  help       Print\n\nOptions:\n  -o, --output <FILE>\n";
        assert_eq!(subcommands(top), vec!["attach", "run"]);
    }

    #[test]
    fn roff_control_characters_are_escaped() {
        assert_eq!(verbatim(".x\n'y\na\\b -c"), ".nf\n\\&.x\n\\&'y\na\\eb \\-c\n.fi\n");
    }
}
