//! C programs against `qcompile`'s objects: the system C compiler, a
//! program written against a model's header (it reads each input's bytes,
//! runs an entry under a hostile MXCSR and writes each output's bytes), and
//! the host-call library that objects with host calls link.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The system C compiler (`$CC`, else `cc`), if one runs; without one,
/// prints a notice that `test` is skipped.
pub fn c_compiler(test: &str) -> Option<String> {
    let cc = std::env::var("CC").ok().filter(|c| !c.trim().is_empty()).unwrap_or_else(|| "cc".into());
    let works = Command::new(&cc).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !works.is_ok_and(|s| s.success()) {
        println!("notice: {test}: skipped, no C compiler");
        return None;
    }
    Some(cc)
}

/// A C program using the header: `prog MODE inputs... outputs...` reads the
/// inputs' bytes, runs entry MODE (`run`, `workspace`, `quantized`) under
/// FTZ + DAZ + round-down, checks MXCSR and the result, writes the outputs.
pub fn c_program(prefix: &str, n_in: usize, n_out: usize) -> String {
    let m = prefix.to_ascii_uppercase();
    let mut c = String::from(
        "#include \"model.h\"\n#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <xmmintrin.h>\n\n\
static void *load(const char *path, size_t bytes) {\n\
  void *p = malloc(bytes ? bytes : 1);\n\
  FILE *f = fopen(path, \"rb\");\n\
  if (!p || !f || fread(p, 1, bytes, f) != bytes) { fprintf(stderr, \"cannot read %s\\n\", path); exit(10); }\n\
  fclose(f);\n\
  return p;\n\
}\n\
static void *output(size_t bytes) {\n\
  void *p = malloc(bytes ? bytes : 1);\n\
  if (!p) exit(11);\n\
  memset(p, 0xAB, bytes);\n\
  return p;\n\
}\n\
static void save(const char *path, const void *p, size_t bytes) {\n\
  FILE *f = fopen(path, \"wb\");\n\
  if (!f || fwrite(p, 1, bytes, f) != bytes || fclose(f) != 0) { fprintf(stderr, \"cannot write %s\\n\", path); exit(12); }\n\
}\n\
static size_t product(const size_t *dims, size_t rank) {\n\
  size_t n = 1;\n\
  for (size_t k = 0; k < rank; k++) n *= dims[k];\n\
  return n;\n\
}\n\
/* Flush-to-zero, denormals-are-zero, round toward -inf. */\n\
static unsigned int hostile_mxcsr(void) { return (_mm_getcsr() & ~0x6000u) | 0x8000u | 0x0040u | 0x2000u; }\n\
static void check(int rc, unsigned int csr) {\n\
  if (_mm_getcsr() != csr) { fprintf(stderr, \"MXCSR changed: %#x -> %#x\\n\", csr, _mm_getcsr()); exit(3); }\n\
  if (rc != 0) { fprintf(stderr, \"the entry returned %d\\n\", rc); exit(4); }\n\
}\n\n",
    );
    c += &format!("int main(int argc, char **argv) {{\n  unsigned int csr;\n  int rc;\n  if (argc != {}) {{ fprintf(stderr, \"usage: prog MODE inputs outputs\\n\"); return 2; }}\n", 2 + n_in + n_out);
    let io = |what: &str, n: usize| (0..n).map(|i| format!("{what}{i}")).collect::<Vec<_>>();
    let (ins, outs) = (io("in", n_in), io("out", n_out));
    let args = [ins.clone(), outs.clone()].concat().join(", ");
    // The shape macros agree with the element counts and sizes.
    for (what, n) in [("INPUT", n_in), ("OUTPUT", n_out)] {
        for i in 0..n {
            let p = format!("{m}_{what}{i}");
            c += &format!(
                "  {{ static const size_t dims[] = {p}_SHAPE;\n    if (product(dims, {p}_RANK) != {p}_ELEMENTS || {p}_ELEMENTS * sizeof({p}_TYPE) != {p}_BYTES) return 7; }}\n"
            );
        }
    }
    c += "  if (strcmp(argv[1], \"quantized\") == 0) {\n";
    c += &format!("#if {m}_HAS_RUN_QUANTIZED\n");
    for i in 0..n_in {
        c += &format!(
            "    {m}_INPUT{i}_QUANTIZED_TYPE *in{i} = load(argv[{}], {m}_INPUT{i}_QUANTIZED_BYTES);\n",
            2 + i
        );
    }
    for j in 0..n_out {
        c += &format!("    {m}_OUTPUT{j}_QUANTIZED_TYPE *out{j} = output({m}_OUTPUT{j}_QUANTIZED_BYTES);\n");
    }
    c += &format!("    csr = hostile_mxcsr();\n    _mm_setcsr(csr);\n    rc = {prefix}_run_quantized({args});\n    check(rc, csr);\n");
    for j in 0..n_out {
        c += &format!("    save(argv[{}], out{j}, {m}_OUTPUT{j}_QUANTIZED_BYTES);\n", 2 + n_in + j);
    }
    c += "#else\n    return 5;\n#endif\n  } else {\n";
    for i in 0..n_in {
        c += &format!("    {m}_INPUT{i}_TYPE *in{i} = load(argv[{}], {m}_INPUT{i}_BYTES);\n", 2 + i);
    }
    for j in 0..n_out {
        c += &format!("    {m}_OUTPUT{j}_TYPE *out{j} = output({m}_OUTPUT{j}_BYTES);\n");
    }
    c += &format!(
        "    if (strcmp(argv[1], \"run\") == 0) {{\n      csr = hostile_mxcsr();\n      _mm_setcsr(csr);\n      rc = {prefix}_run({args});\n      check(rc, csr);\n    }} else {{\n\
      unsigned char *raw = malloc({m}_WORKSPACE_BYTES + 2 * {m}_WORKSPACE_ALIGNMENT);\n\
      unsigned char *ws;\n\
      if (!raw) return 11;\n\
      ws = raw + ({m}_WORKSPACE_ALIGNMENT - (size_t)raw % {m}_WORKSPACE_ALIGNMENT);\n\
      if ({m}_WORKSPACE_BYTES > 0 && {prefix}_run_with_workspace(ws + 1, {args}) != 1) return 6;\n\
      csr = hostile_mxcsr();\n      _mm_setcsr(csr);\n      rc = {prefix}_run_with_workspace(ws, {args});\n      check(rc, csr);\n      free(raw);\n    }}\n"
    );
    for j in 0..n_out {
        c += &format!("    save(argv[{}], out{j}, {m}_OUTPUT{j}_BYTES);\n", 2 + n_in + j);
    }
    c += "  }\n  return 0;\n}\n";
    c
}

/// The host-call library a C program links beside an object that makes
/// host calls: `libqopt_host_calls.a`, built beside this test (cargo builds
/// the `qopt-host-calls` crate's static library with the crate).
pub fn host_call_library() -> Option<PathBuf> {
    let deps = std::env::current_exe().ok()?.parent()?.to_path_buf();
    let newest = std::fs::read_dir(&deps)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("libqopt_host_calls") && name.ends_with(".a")
        })
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max();
    newest.map(|(_, path)| path)
}

/// What a Rust static library needs from the system when C links it
/// (`rustc --print native-static-libs`).
pub const RUST_STATIC_LIBRARY_LIBS: [&str; 7] =
    ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"];
