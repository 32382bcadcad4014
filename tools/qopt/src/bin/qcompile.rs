//! `qcompile`: compile a function of a quantized `.qir` model to a
//! relocatable x86-64 ELF object with a C header, or to an assembly listing.
//! Everything lives in `qopt_driver::compile` so downstream tools reuse it
//! with their own dialects and lowerings.

fn main() -> std::process::ExitCode {
    qopt_driver::compile::CompileDriver::new("qcompile").main()
}
