//! Bounded C++ (Itanium ABI) demangling, for the names a library exports and the kernel names a
//! traced process registers: both are input another user shapes. A mangled name longer than
//! [`MAX_MANGLED`] is not demangled at all, and the demangled text stops at [`MAX_DEMANGLED`]
//! bytes (back-references let a short mangled name expand enormously; the demangler is stopped
//! as soon as its output passes the cap, so time is bounded too).

use std::fmt;

/// Longest mangled name we demangle (bytes).
pub const MAX_MANGLED: usize = 4096;
/// Longest demangled text we produce (bytes); a longer one is cut and ends in `...`.
pub const MAX_DEMANGLED: usize = 4096;

/// A `fmt::Write` that refuses to grow past a cap (the demangler stops at the first refusal).
struct Capped {
    out: String,
    cut: bool,
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.out.len() + s.len() > MAX_DEMANGLED {
            let mut end = MAX_DEMANGLED - self.out.len();
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.out.push_str(&s[..end]);
            self.cut = true;
            return Err(fmt::Error);
        }
        self.out.push_str(s);
        Ok(())
    }
}

/// Demangles an Itanium C++ name, at most [`MAX_DEMANGLED`] bytes (a longer result is cut and
/// ends in `...`). None for anything that is not a mangled name we can (and may) demangle.
pub fn demangle(name: &str) -> Option<String> {
    if !name.starts_with("_Z") || name.len() > MAX_MANGLED {
        return None;
    }
    let sym = cpp_demangle::Symbol::new(name.as_bytes()).ok()?;
    let mut w = Capped { out: String::new(), cut: false };
    let r = sym.structured_demangle(&mut w, &cpp_demangle::DemangleOptions::default());
    match (r, w.cut) {
        (Ok(()), _) => Some(w.out),
        (Err(_), true) => Some(w.out + "..."),
        (Err(_), false) => None,
    }
}

/// Demangles when it can; any other name comes back as it is.
pub fn demangle_or_keep(name: &str) -> String {
    demangle(name).unwrap_or_else(|| name.to_string())
}

/// The name of a C++ function in the global namespace, not a template, not a method, without
/// an ABI tag: `_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjj...` ->
/// `hipExtModuleLaunchKernel`. Read from the mangling itself (`_Z <length> <identifier>
/// <parameter types>`) and checked against the demangler's output, which must read
/// `<identifier>(`. None for everything else (`_ZN...` namespaced or nested, `_ZL` internal,
/// operators, templates, data).
pub fn global_function_name(mangled: &str) -> Option<&str> {
    let rest = mangled.strip_prefix("_Z")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 4 || rest.starts_with('0') {
        return None;
    }
    let len: usize = rest[..digits].parse().ok()?;
    let ident = rest.get(digits..digits.checked_add(len)?)?;
    let mut chars = ident.bytes();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == b'_') || !chars.all(|c| c.is_ascii_alphanumeric() || c == b'_') {
        return None;
    }
    let params = &rest[digits + len..];
    // `I`: template arguments follow (a template instance); `B`: an ABI tag; empty: a variable.
    if params.is_empty() || params.starts_with('I') || params.starts_with('B') {
        return None;
    }
    let text = demangle(mangled)?;
    text.strip_prefix(ident)?.starts_with('(').then_some(ident)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_functions_only() {
        let ext = "_Z24hipExtModuleLaunchKernelP18ihipModuleSymbol_tjjjjjjmP12ihipStream_tPPvS4_P11ihipEvent_tS6_j";
        assert_eq!(global_function_name(ext), Some("hipExtModuleLaunchKernel"));
        assert_eq!(global_function_name("_Z22hipCreateSurfaceObjectPP13__hip_surfacePK15hipResourceDesc"), Some("hipCreateSurfaceObject"));
        assert_eq!(global_function_name("_Z3foov"), Some("foo"));
        for not in [
            "_ZN8hip_impl22hipLaunchKernelGGLImplEmRK4dim3S2_jP12ihipStream_tPPv", // namespaced
            "_ZN3Foo3barEv",                                                       // method
            "_ZL3foov",                                                            // internal linkage
            "_Z3fooIiEvT_",                                                        // template instance
            "_Z3fooB5cxx11v",                                                      // ABI tag
            "_Z3foo",                                                              // no parameters: not a function
            "_Zplii",                                                              // operator
            "_Z99foov",                                                            // length past the end
            "_Z03foov",
            "_Z3f-ov",
            "hipMalloc",
            "",
            "_Z",
        ] {
            assert_eq!(global_function_name(not), None, "{not}");
        }
    }

    #[test]
    fn demangling_is_bounded() {
        assert_eq!(demangle("_Z6vecAddPfi").as_deref(), Some("vecAdd(float*, int)"));
        assert_eq!(demangle("hipMalloc"), None);
        assert_eq!(demangle_or_keep("not_mangled"), "not_mangled");
        // Too long to try.
        let long = format!("_Z{}{}v", MAX_MANGLED, "a".repeat(MAX_MANGLED));
        assert_eq!(demangle(&long), None);
        // Back-references: each level is a pointer to a function taking the previous level
        // twice (`PFvS2_S2_E`), so the text doubles per level while the mangled name grows by
        // ~10 bytes: ~100 bytes mangled, far more than the cap demangled. Cut at the cap.
        // Substitution i: `S_` for 0, then `S<i-1 in base 36, upper case>_`.
        let sub = |i: usize| match i {
            0 => "S_".to_string(),
            _ => format!("S{}_", char::from_digit((i - 1) as u32, 36).unwrap().to_ascii_uppercase()),
        };
        let mut name = String::from("_Z1fP1A"); // substitutions: 0 = A, 1 = A*
        let mut ptr = 1;
        for _ in 0..9 {
            name.push_str(&format!("PFv{0}{0}E", sub(ptr)));
            ptr += 2; // the function type, then the pointer to it
        }
        assert!(name.len() < 120, "{name}");
        let t0 = std::time::Instant::now();
        let s = demangle(&name).expect("a valid mangled name");
        assert!(t0.elapsed() < std::time::Duration::from_secs(2), "demangling took {:?}", t0.elapsed());
        assert!(s.starts_with("f(A*, void (*)(A*, A*)"), "{}", &s[..s.len().min(80)]);
        assert!(s.ends_with("...") && s.len() == MAX_DEMANGLED + 3, "{} bytes", s.len());
    }
}
