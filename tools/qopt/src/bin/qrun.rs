//! `qrun`: run a function of a `.qir` model on `.npy` inputs, time it, or
//! compare two models layer by layer. Everything lives in
//! `qopt_driver::run` so downstream tools reuse it with their own dialects and
//! kernels.

fn main() -> std::process::ExitCode {
    qopt_driver::run::RunDriver::new("qrun").main()
}
