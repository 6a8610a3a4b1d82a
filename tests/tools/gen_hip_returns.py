#!/usr/bin/env python3
"""Generates rtl-user/src/probe/hip_returns.rs: the return kind of every function Debian's HIP
headers declare (libamdhip64-dev: /usr/include/hip), for `--apis all` on functions outside the
curated API table (rtl-user/src/probe/apis/).

    python3 tests/tools/gen_hip_returns.py           # rewrite the file
    python3 tests/tools/gen_hip_returns.py --check   # exit 1 if the file is not current

How: clang parses the headers (`-ast-dump`, text form); every function declared at file scope
(or inside `extern "C"` / `extern "C++"`, never in a namespace or a class, never `static`) in a
file under /usr/include/hip/ is kept, and its return type is resolved through the typedefs
the dump declares, then sorted into a kind:
hipError_t, pointer, bool, void, int<bits>/uint<bits> (C integers and enums), other (float,
struct by value: the return register does not hold the value). A name declared twice with
different kinds is an error: the generator stops instead of guessing.
"""

import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "rtl-user", "src", "probe", "hip_returns.rs")
HEADERS = [
    "hip/hip_runtime_api.h",
    "hip/hip_ext.h",
    "hip/hiprtc.h",
    "hip/amd_detail/hip_runtime_prof.h",
]
HIP_DIR = "/usr/include/hip/"
CLANG_CANDIDATES = ["clang-15", "clang", "clang-16", "clang-14"]

INTEGERS = {
    "char": (8, True), "signed char": (8, True), "unsigned char": (8, False),
    "short": (16, True), "unsigned short": (16, False),
    "int": (32, True), "unsigned int": (32, False), "unsigned": (32, False),
    "long": (64, True), "unsigned long": (64, False),
    "long long": (64, True), "unsigned long long": (64, False),
}
NODE = re.compile(r"^(?P<prefix>[| `]*[|`]-)?(?P<kind>[A-Za-z]+) 0x[0-9a-f]+ (?P<rest>.*)$")
NAME_TYPE = re.compile(r"(?:^|\s)([A-Za-z_]\w*) '([^']*)'(?::'([^']*)')?(.*)$")
PATH = re.compile(r"(/[^:<>,\s']+):\d+:\d+")


def fail(msg):
    print(f"gen_hip_returns: {msg}", file=sys.stderr)
    sys.exit(2)


def clang():
    for c in CLANG_CANDIDATES:
        for d in os.environ.get("PATH", "").split(os.pathsep):
            if os.access(os.path.join(d, c), os.X_OK):
                return c
    fail("no clang found (Debian: apt-get install clang-15; hipcc depends on it)")


def package_version():
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", "libamdhip64-dev"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        fail("libamdhip64-dev is not installed (the HIP headers): apt-get install libamdhip64-dev")


def ast_dump():
    for h in HEADERS:
        if not os.path.isfile(os.path.join("/usr/include", h)):
            fail(f"/usr/include/{h} is missing: apt-get install libamdhip64-dev")
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        for h in HEADERS:
            f.write(f"#include <{h}>\n")
        tu = f.name
    try:
        r = subprocess.run([clang(), "-x", "c++", "-std=c++17", "-D__HIP_PLATFORM_AMD__", "-fsyntax-only",
                            "-fno-color-diagnostics", "-Xclang", "-ast-dump", tu],
                           capture_output=True, text=True)
    finally:
        os.unlink(tu)
    if r.returncode != 0:
        fail("clang could not parse the HIP headers:\n" + r.stderr[-4000:])
    return r.stdout


def split_return(fn_type):
    """'R (params)' -> R: the text before the parameter list (the last top-level paren group)."""
    depth, start = 0, None
    for i in range(len(fn_type) - 1, -1, -1):
        c = fn_type[i]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
            if depth == 0:
                start = i
                break
    if start is None:
        return None
    return fn_type[:start].strip()


def classify(ret, typedefs, enums, depth=0):
    t = re.sub(r"\b(const|volatile)\b", "", ret).strip()
    t = re.sub(r"\s+", " ", t)
    if depth > 16:
        return "other"
    if t.endswith("*") or "(*" in t or t.endswith("&"):
        return "pointer"
    if t in ("hipError_t", "enum hipError_t"):
        return "hipError_t"
    if t in ("void",):
        return "void"
    if t in ("bool", "_Bool"):
        return "bool"
    if t in INTEGERS:
        bits, signed = INTEGERS[t]
        return f"{'' if signed else 'u'}int{bits}"
    bare = re.sub(r"^(enum|struct|union) ", "", t)
    if t.startswith("enum ") or bare in enums:
        return "int32"
    if bare in typedefs:
        return classify(typedefs[bare], typedefs, enums, depth + 1)
    return "other"


def parse(dump):
    typedefs, enums, decls = {}, set(), {}
    stack = []  # (depth, kind)
    current_file = None
    for line in dump.splitlines():
        m = NODE.match(line)
        if not m:
            continue
        depth = len(m.group("prefix") or "") // 2
        kind, rest = m.group("kind"), m.group("rest")
        for p in PATH.findall(rest):
            current_file = p
        while stack and stack[-1][0] >= depth:
            stack.pop()
        file_scope = all(k in ("TranslationUnitDecl", "LinkageSpecDecl") for _, k in stack)
        stack.append((depth, kind))
        if not file_scope:
            continue
        nt = NAME_TYPE.search(rest)
        if kind == "EnumDecl":
            em = re.search(r"(?:^|\s)([A-Za-z_]\w*)$", rest.strip())
            if em:
                enums.add(em.group(1))
        if not nt:
            continue
        name, typ, desugared, tail = nt.groups()
        if kind == "TypedefDecl":
            typedefs[name] = desugared or typ
        elif kind == "FunctionDecl":
            if not (current_file or "").startswith(HIP_DIR):
                continue
            if re.search(r"\bstatic\b", tail):
                continue
            ret = split_return(typ)
            if ret is None:
                fail(f"cannot read the type of {name}: {typ!r}")
            decls.setdefault(name, set()).add(ret)
    kinds = {}
    for name, rets in decls.items():
        ks = {classify(r, typedefs, enums) for r in rets}
        if len(ks) != 1:
            fail(f"{name} is declared with return types of different kinds: {sorted(rets)}")
        kinds[name] = ks.pop()
    return kinds


RUST_KIND = {
    "hipError_t": "RetKind::HipError",
    "pointer": "RetKind::Pointer",
    "bool": "RetKind::Bool",
    "void": "RetKind::Void",
    "other": "RetKind::Other",
}


def rust_kind(k):
    if k in RUST_KIND:
        return RUST_KIND[k]
    m = re.fullmatch(r"(u?)int(\d+)", k)
    return f"RetKind::Int {{ bits: {m.group(2)}, signed: {'false' if m.group(1) else 'true'} }}"


def render(kinds, version):
    lines = [
        "// @generated by tests/tools/gen_hip_returns.py from Debian's HIP headers",
        f"// (libamdhip64-dev {version}: {', '.join('/usr/include/' + h for h in HEADERS)}).",
        "// Do not edit: rerun the generator. `cargo test -p rtl-user --test integration api_facts` checks that it is current.",
        "",
        "//! The return kind of every function the HIP headers declare, by name (sorted, for a binary",
        "//! search). `--apis all` takes the return kind of a function outside the curated table",
        "//! ([`super::apis::APIS`]) from here.",
        "",
        "use super::apis::RetKind;",
        "",
        "pub static HIP_HEADER_RETURNS: &[(&str, RetKind)] = &[",
    ]
    for name in sorted(kinds):
        lines.append(f'    ("{name}", {rust_kind(kinds[name])}),')
    lines.append("];")
    return "\n".join(lines) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    text = render(parse(ast_dump()), package_version())
    if check:
        try:
            with open(OUT) as f:
                old = f.read()
        except FileNotFoundError:
            old = None
        if old != text:
            print(f"{OUT} is not current: run python3 tests/tools/gen_hip_returns.py", file=sys.stderr)
            sys.exit(1)
        print(f"{OUT} is current")
        return
    with open(OUT + ".tmp", "w") as f:
        f.write(text)
    os.replace(OUT + ".tmp", OUT)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
