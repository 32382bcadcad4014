//! `toy-opt`: qopt's opt driver with the toy accelerator's dialect and pass,
//! built the way a vendor builds `myopt` (see the crate's README.md).

use qopt_driver::Driver;

fn main() -> std::process::ExitCode {
    let mut driver = Driver::new("toy-opt");
    toy_accel::register(&mut driver);
    driver.main()
}
