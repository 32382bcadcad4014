//! Running whole functions: calls, constants, the per-op hook, and the errors a
//! user meets (wrong inputs, missing kernels, declarations).

use qopt_interp::{run_function, run_function_with, DType, Interpreter, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, Context, Module};

fn load(text: &str) -> (Context, Module) {
    let mut ctx = Context::new();
    qopt_dialect_fp::register(&mut ctx).unwrap();
    ctx.set_allow_unregistered(true);
    let module = parse_module(&mut ctx, text.as_bytes(), "t.qir").unwrap_or_else(|d| panic!("{d}"));
    (ctx, module)
}

const TWO_FUNCTIONS: &str = r#"
module {
  func.func @affine(%x: tensor<2xf32>) -> tensor<2xf32> {
    %s = fp.constant() {value = dense<[2.0, -1.0]> : tensor<2xf32>} : () -> tensor<2xf32>
    %y = fp.mul(%x, %s) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> loc("scale")
    func.return %y : tensor<2xf32>
  }
  func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>) {
    %a = func.call @affine(%x) : (tensor<2xf32>) -> tensor<2xf32>
    %r = fp.relu(%a) : (tensor<2xf32>) -> tensor<2xf32> loc("relu")
    func.return %r, %a : tensor<2xf32>, tensor<2xf32>
  }
}
"#;

#[test]
fn calls_constants_and_multiple_results() {
    let (ctx, m) = load(TWO_FUNCTIONS);
    let kernels = KernelRegistry::with_fp();
    let x = Tensor::from_f32(&[2], vec![3.0, 4.0]).unwrap();
    let out = run_function(&ctx, &m, "main", &[x], &kernels).unwrap();
    assert_eq!(out[0].to_f64_vec(), [6.0, 0.0]);
    assert_eq!(out[1].to_f64_vec(), [6.0, -4.0]);
}

#[test]
fn prepared_interpreters_fork_for_other_threads_with_the_same_results() {
    let (ctx, m) = load(TWO_FUNCTIONS);
    let kernels = KernelRegistry::with_fp();
    let mut prepared = Interpreter::new(&ctx, &m, &kernels);
    prepared.prepare("affine").unwrap();
    let x = Tensor::from_f32(&[2], vec![3.0, 4.0]).unwrap();
    let forks: Vec<Interpreter<'_>> = (0..2).map(|_| prepared.fork()).collect();
    let outputs: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let runs: Vec<_> = forks
            .into_iter()
            .map(|mut interp| {
                let x = x.clone();
                scope.spawn(move || interp.run("main", &[x]).unwrap()[0].to_f64_vec())
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert_eq!(outputs, [[6.0, 0.0], [6.0, 0.0]]);
    assert!(prepared.prepare("nowhere").unwrap_err().to_string().contains("no function @nowhere"));
}

#[test]
fn the_hook_sees_every_op_including_called_ones() {
    let (ctx, m) = load(TWO_FUNCTIONS);
    let kernels = KernelRegistry::with_fp();
    let x = Tensor::from_f32(&[2], vec![1.0, 1.0]).unwrap();
    let mut seen = Vec::new();
    run_function_with(&ctx, &m, "@main", &[x], &kernels, &mut |op, results| {
        seen.push((ctx.op_name_str(m.op_name(op)).to_string(), results[0].to_f64_vec()));
    })
    .unwrap();
    let names: Vec<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["fp.constant", "fp.mul", "func.call", "fp.relu"]);
    assert_eq!(seen[1].1, [2.0, -1.0]);
}

#[test]
fn bad_inputs_are_errors_naming_the_argument() {
    let (ctx, m) = load(TWO_FUNCTIONS);
    let kernels = KernelRegistry::with_fp();
    let wrong_shape = Tensor::zeros(DType::F32, &[3]);
    let e = run_function(&ctx, &m, "main", &[wrong_shape], &kernels).unwrap_err();
    assert_eq!(e.to_string(), "error: argument #0 (%arg0) expects tensor<2xf32>, got float32 [3]");
    let wrong_dtype = Tensor::zeros(DType::I32, &[2]);
    assert!(run_function(&ctx, &m, "main", &[wrong_dtype], &kernels).is_err());
    let e = run_function(&ctx, &m, "main", &[], &kernels).unwrap_err();
    assert_eq!(e.to_string(), "error: @main takes 1 argument(s), got 0");
    let e = run_function(&ctx, &m, "nope", &[], &kernels).unwrap_err();
    assert_eq!(e.to_string(), "error: no function @nope in the module");
}

#[test]
fn an_op_without_kernel_is_named_with_its_location() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %y = mystery.op(%x) : (tensor<2xf32>) -> tensor<2xf32> loc("layer7")
    func.return %y : tensor<2xf32>
  }
}
"#,
    );
    let x = Tensor::zeros(DType::F32, &[2]);
    let e = run_function(&ctx, &m, "main", &[x], &KernelRegistry::with_fp()).unwrap_err();
    assert_eq!(e.to_string(), "error at loc(\"layer7\") ('mystery.op'): no kernel for 'mystery.op'");
}

#[test]
fn downstream_kernels_register_by_name() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %y = mystery.op(%x) : (tensor<2xf32>) -> tensor<2xf32>
    func.return %y : tensor<2xf32>
  }
}
"#,
    );
    let mut kernels = KernelRegistry::with_fp();
    kernels.register("mystery.op", |_, ops| {
        let x = ops[0].as_f32().ok_or("expects f32")?;
        Ok(smallvec::smallvec![Tensor::F32(x.mapv(|v| v + 1.0))])
    });
    let x = Tensor::zeros(DType::F32, &[2]);
    assert_eq!(run_function(&ctx, &m, "main", &[x], &kernels).unwrap()[0].to_f64_vec(), [1.0, 1.0]);
}

#[test]
fn a_kernel_returning_the_wrong_type_is_caught() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %y = mystery.op(%x) : (tensor<2xf32>) -> tensor<2xf32>
    func.return %y : tensor<2xf32>
  }
}
"#,
    );
    let mut kernels = KernelRegistry::new();
    kernels.register("mystery.op", |_, _| Ok(smallvec::smallvec![Tensor::zeros(DType::F32, &[5])]));
    let e = run_function(&ctx, &m, "main", &[Tensor::zeros(DType::F32, &[2])], &kernels).unwrap_err();
    assert!(e.to_string().contains("result #0 expects tensor<2xf32>, got float32 [5] (kernel bug)"), "{e}");
}

#[test]
fn recursion_is_bounded() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
    %y = func.call @main(%x) : (tensor<2xf32>) -> tensor<2xf32>
    func.return %y : tensor<2xf32>
  }
}
"#,
    );
    let e = run_function(&ctx, &m, "main", &[Tensor::zeros(DType::F32, &[2])], &KernelRegistry::with_fp())
        .unwrap_err();
    assert!(e.message.contains("calls nest deeper than 256"), "{e}");
}

#[test]
fn huge_results_are_refused_before_running() {
    let (ctx, m) = load(
        r#"
module {
  func.func @main(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x200002x200002xf32> {
    %w = fp.constant() {value = dense<1.0> : tensor<1x1x1x1xf32>} : () -> tensor<1x1x1x1xf32>
    %y = fp.conv2d(%x, %w) {pad = [100000, 100000, 100000, 100000]} : (tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x200002x200002xf32> loc("blowup")
    func.return %y : tensor<1x1x200002x200002xf32>
  }
}
"#,
    );
    let x = Tensor::zeros(DType::F32, &[1, 1, 2, 2]);
    let e = run_function(&ctx, &m, "main", &[x], &KernelRegistry::with_fp()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "error at loc(\"blowup\") ('fp.conv2d'): result #0 has type tensor<1x1x200002x200002xf32>, more than the \
         interpreter's limit of 2147483648 elements"
    );
}
