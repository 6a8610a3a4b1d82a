//! Environment list variables the collector sets for a traced command (`LD_PRELOAD`,
//! `HSA_TOOLS_LIB`): the agent is appended, never replacing what the user set.

/// Appends `add` to a separator-separated list variable (LD_PRELOAD: `':'`, HSA_TOOLS_LIB:
/// `' '`) without ever dropping what the user set. Unchanged if `add` is already an element
/// (elements are split on `sep` and ASCII whitespace, as ld.so does for LD_PRELOAD).
pub fn append(existing: Option<&str>, add: &str, sep: char) -> String {
    let add = add.trim();
    let existing = existing.unwrap_or("");
    if add.is_empty() {
        return existing.to_string();
    }
    let is_sep = |c: char| c == sep || c.is_ascii_whitespace();
    if existing.split(is_sep).any(|e| e == add) {
        return existing.to_string();
    }
    let head = existing.trim_end_matches(is_sep);
    if head.trim_start_matches(is_sep).is_empty() {
        return add.to_string();
    }
    format!("{head}{sep}{add}")
}

#[cfg(test)]
mod tests {
    use super::append as ap;

    #[test]
    fn env_list_appended_never_overwritten() {
        let a = "/opt/rtl/librtl_agent.so";
        assert_eq!(ap(None, a, ':'), a);
        assert_eq!(ap(Some(""), a, ':'), a);
        assert_eq!(ap(Some("  "), a, ':'), a);
        assert_eq!(ap(Some("libjemalloc.so"), a, ':'), format!("libjemalloc.so:{a}"));
        assert_eq!(ap(Some("x.so:y.so"), a, ':'), format!("x.so:y.so:{a}"));
        assert_eq!(ap(Some("x.so y.so"), a, ':'), format!("x.so y.so:{a}"));
        assert_eq!(ap(Some("x.so:"), a, ':'), format!("x.so:{a}"));
        // Already there: unchanged (no duplicates when run nests).
        assert_eq!(ap(Some(&format!("{a}:x.so")), a, ':'), format!("{a}:x.so"));
        assert_eq!(ap(Some(&format!("x.so {a}")), a, ':'), format!("x.so {a}"));
        // A different agent path is a different element.
        assert_eq!(ap(Some("/other/librtl_agent.so"), a, ':'), format!("/other/librtl_agent.so:{a}"));
        // HSA_TOOLS_LIB is space separated.
        assert_eq!(ap(Some("librocprof-tool.so"), a, ' '), format!("librocprof-tool.so {a}"));
        assert_eq!(ap(Some("t.so "), a, ' '), format!("t.so {a}"));
        assert_eq!(ap(Some("x.so"), "", ':'), "x.so");
    }
}
