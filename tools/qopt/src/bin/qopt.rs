//! `qopt`: parse a `.qir` module, verify it, run a pass pipeline, print it.
//! Everything lives in the `qopt_driver` library so downstream tools reuse it.

fn main() -> std::process::ExitCode {
    qopt_driver::Driver::new("qopt").main()
}
