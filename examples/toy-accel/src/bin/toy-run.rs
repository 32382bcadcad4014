//! `toy-run`: qopt's `qrun` with the toy accelerator's dialect and kernels,
//! so a module lowered by `toy-opt` runs, times and compares like any other.

use qopt_driver::run::RunDriver;
use qopt_driver::Driver;
use qopt_interp::KernelRegistry;

fn main() -> std::process::ExitCode {
    let mut driver = Driver::new("toy-run");
    toy_accel::register(&mut driver);
    let mut kernels = KernelRegistry::standard();
    toy_accel::register_kernels(&mut kernels);
    RunDriver::with_parts(driver, kernels).main()
}
