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
//! JSON output needs none of this (serde_json escapes U+0000-U+001F) and HTML has its own.

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

/// Like [`escape`], but line breaks are kept (for a message of several lines).
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    let mut o = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c == '\n' {
            o.push(c);
        } else {
            push_escaped(&mut o, c);
        }
    }
    Cow::Owned(o)
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

/// One `rtl-ebpf: ...` message on stderr, escaped (line breaks kept). Never `eprintln!`: it
/// panics when stderr is gone (a closed pipe, a hung-up terminal), and a message must not end a
/// trace.
pub fn message(msg: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stderr(), "rtl-ebpf: {}", escape_lines(msg));
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
        assert_eq!(escape_lines("one\ntwo\x1b[2J"), "one\ntwo\\x1b[2J");
        // no output of escape() contains a control character
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!escape(&all).chars().any(|c| c.is_control()));
    }
}
