//! Text that reaches a terminal: every string another user can shape (command lines, library
//! and trace paths, kernel and API names, marker texts, metadata, error messages quoting a file)
//! goes through [`escape`] before it is printed, so an ESC / BEL / CSI sequence hidden in it is
//! shown as text instead of moving the cursor, retitling the window or hiding other output.
//!
//! Escaped: the C0 controls (U+0000-U+001F), DEL (U+007F), the C1 controls (U+0080-U+009F, of
//! which U+009B is a one-byte CSI on many terminals) and the bidirectional overrides / isolates
//! (U+202A-U+202E, U+2066-U+2069) that reorder what is shown. They are written as Rust-style
//! escapes: `\n`, `\t`, `\r`, `\\` (only when something else was escaped in the same string is
//! a backslash ambiguous, so it is escaped always), `\x1b`, `\u{9b}`, `\u{202e}`.
//!
//! A message ([`message`]) is one line whatever it quotes: a line break inside a process name
//! or a path is escaped like any other control, so nobody can make the collector seem to print
//! a line it did not. A message of several lines is [`message_lines`], each line escaped.
//!
//! JSON printed (`summary --json`) goes through [`json`]: serde_json escapes U+0000-U+001F
//! only, so DEL, the C1 controls and the bidirectional controls are written as `\u` escapes
//! too (the JSON means the same; a terminal showing it sees no control). HTML has its own.

use std::borrow::Cow;

fn needs_escape(c: char) -> bool {
    c.is_control() || c == '\\' || ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// `s` with every control character escaped (see the module doc); borrowed when clean.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_escaped(&mut o, c);
    }
    Cow::Owned(o)
}

/// Serialized JSON text made safe for a terminal: every character [`escape`] would escape that
/// serde_json writes raw (DEL, U+0080-U+009F, the bidirectional controls) becomes a `\uXXXX`
/// escape. Outside strings serde_json writes ASCII punctuation only, so every such character is
/// inside a string, where the escape means the same character.
pub fn json(text: String) -> String {
    use std::fmt::Write as _;
    if !text.chars().any(|c| c as u32 >= 0x7f && needs_escape(c)) {
        return text;
    }
    let mut o = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c as u32 >= 0x7f && needs_escape(c) {
            let _ = write!(o, "\\u{:04x}", c as u32);
        } else {
            o.push(c);
        }
    }
    o
}

fn push_escaped(o: &mut String, c: char) {
    use std::fmt::Write as _;
    match c {
        '\n' => o.push_str("\\n"),
        '\t' => o.push_str("\\t"),
        '\r' => o.push_str("\\r"),
        '\\' => o.push_str("\\\\"),
        c if (c as u32) < 0x80 && needs_escape(c) => {
            let _ = write!(o, "\\x{:02x}", c as u32);
        }
        c if needs_escape(c) => {
            let _ = write!(o, "\\u{{{:x}}}", c as u32);
        }
        c => o.push(c),
    }
}

/// One `rtl-ebpf: ...` message on stderr: one line, escaped (line breaks too). Never
/// `eprintln!`: it panics when stderr is gone (a closed pipe, a hung-up terminal), and a message
/// must not end a trace.
pub fn message(msg: &str) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(message_text(msg, &[]).as_bytes());
}

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `-q`: from now on [`info`] says nothing (warnings and errors still go through [`message`]).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, std::sync::atomic::Ordering::Relaxed);
}

/// Whether `-q` was given ([`set_quiet`]).
pub fn is_quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// A progress message (what was attached, started, stopped): [`message`], unless `-q`.
pub fn info(msg: &str) {
    if !is_quiet() {
        message(msg);
    }
}

/// A message of several lines: `head`, then each of `lines` indented, each escaped (a line break
/// inside one is escaped, not kept).
pub fn message_lines(head: &str, lines: &[&str]) {
    use std::io::Write as _;
    let _ = std::io::stderr().write_all(message_text(head, lines).as_bytes());
}

/// What [`message`] / [`message_lines`] print.
pub fn message_text(head: &str, lines: &[&str]) -> String {
    let mut o = format!("rtl-ebpf: {}\n", escape(head));
    for l in lines {
        o.push_str("  ");
        o.push_str(&escape(l));
        o.push('\n');
    }
    o
}

/// A path for a terminal: lossy UTF-8, escaped.
pub fn path(p: &std::path::Path) -> String {
    escape(&p.to_string_lossy()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_clean_text_is_borrowed() {
        assert!(matches!(escape("hipLaunchKernel vectorAdd(float*, int)"), Cow::Borrowed(_)));
        assert_eq!(escape("a\x1b]0;pwned\x07b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(escape("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(escape("a\nb\tc\rd\\e\x7f"), "a\\nb\\tc\\rd\\\\e\\x7f");
        assert_eq!(escape("ab\u{202e}cd"), "ab\\u{202e}cd");
        assert_eq!(escape("\0"), "\\x00");
        assert_eq!(escape("ümlaut ✓"), "ümlaut ✓");
        // no output of escape() contains a control character
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!escape(&all).chars().any(|c| c.is_control()));
    }
}

#[cfg(test)]
mod hostile_text {
    use super::*;

    /// A process name or path holding a line break cannot forge a line of output.
    #[test]
    fn a_message_is_one_line_whatever_it_quotes() {
        let name = "app\nrtl-ebpf: 0 events dropped\x1b[2K";
        let t = message_text(&format!("started `{name}` as PID 7"), &[]);
        assert_eq!(t, "rtl-ebpf: started `app\\nrtl-ebpf: 0 events dropped\\x1b[2K` as PID 7\n");
        assert_eq!(t.lines().count(), 1);
        let t = message_text("merged 2 traces into o.db:", &["a.db\nrtl-ebpf: forged", "b.db"]);
        assert_eq!(t, "rtl-ebpf: merged 2 traces into o.db:\n  a.db\\nrtl-ebpf: forged\n  b.db\n");
        assert!(!t.lines().skip(1).any(|l| l.starts_with("rtl-ebpf:")));
    }

    /// serde_json leaves DEL, C1 and bidi controls raw; [`json`] escapes them, and the JSON still
    /// means the same strings.
    #[test]
    fn json_escapes_c1_and_bidi_controls() {
        let hostile = "k\u{9b}31m\u{85}x\u{7f}\u{202e}y\u{1b}ü✓";
        let raw = serde_json::to_string(&serde_json::json!({ "name": hostile })).unwrap();
        assert!(raw.contains('\u{9b}'), "serde_json writes C1 raw: {raw:?}");
        let safe = json(raw);
        assert_eq!(safe, r#"{"name":"k\u009b31m\u0085x\u007f\u202ey\u001bü✓"}"#);
        assert!(!safe.chars().any(|c| c.is_control() || needs_escape(c) && c != '\\'));
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back["name"], hostile);
        let clean = serde_json::to_string(&serde_json::json!({ "a": "plain ✓" })).unwrap();
        assert_eq!(json(clean.clone()), clean);
    }
}
