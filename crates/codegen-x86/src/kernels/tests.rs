//! The conv2d and dense kernels against the interpreter, bit for bit, one op
//! at a time: each case writes a one-op `.qir` function (weights and bias as
//! constants), runs the interpreter, then plans and emits the op with the
//! lowering, maps every kernel, runs it over its work range split into
//! random pieces (as threads would), and compares every output byte. The
//! output buffer is surrounded by guard bytes that must stay untouched.
//!
//! Properties cover random shapes, strides, pads, dilations, groups
//! (depthwise included), per-tensor and per-channel weights with zero
//! points, i8/u8/narrowed/4-bit activations and outputs, biases (absent, small,
//! near the i32 limits so sums wrap), every rounding mode and relu form, and
//! both AVX2 schemes: each case runs with the default options (which take
//! `vpmaddubsw` when the weights allow it) and with the exact path forced.
//! The VNNI code is assembled on every machine and run only where the CPU
//! has it.

use super::testing::avx2_here;
use super::{ConvGemmChoice, DepthwiseTaps, KernelOptions};
use crate::abi::{call_kernel, Place, BUFFER_ALIGN};
use crate::lower::{Conv2dLowering, DenseLowering};
use crate::lower::{Emit, LowerOp, OpLowering, Plan, Rodata};
use crate::runtime::executable::ExecutableCode;
use crate::runtime::guard::{GuardSide, GuardedRegion};
use crate::target::{CpuFeatures, Target, TargetCpu};
use ndarray::{ArrayD, IxDyn};
use proptest::prelude::*;
use qopt_interp::{run_function, run_function_with, KernelRegistry, Tensor};
use qopt_ir_core::{parse_module, Context, Module, OpId, SplitMix64 as Random};

/// Checks the scheme `chosen` for a layer whose weights `byte_safe` allow
/// `vpmaddubsw`: `vpdpbusd` where this CPU has VNNI (the best scheme for
/// weights that fit s8), else `vpmaddubsw` exactly when the weights allow it.
fn assert_scheme(chosen: &str, byte_safe: bool) {
    if chosen.starts_with("vpdpbusd") {
        let host = CpuFeatures::host();
        assert!(host.avxvnni || (host.avx512vnni && host.avx512vl), "{chosen} on a CPU without VNNI: {host}");
        return;
    }
    assert_eq!(chosen.starts_with("vpmaddubsw"), byte_safe, "{chosen}");
}

use qopt_dialect_qnn::context;

/// A quantized element type with per-tensor parameters.
fn quant(storage: &str, scale: f64, zero_point: i64) -> String {
    format!("!qnn.uniform<{storage}:f32, {scale:?}:{zero_point}>")
}

/// Storage types of activations and results, with their ranges.
const STORAGES: [(&str, i64, i64); 6] = [
    ("i8", -128, 127),
    ("u8", 0, 255),
    ("i8<-127:127>", -127, 127),
    ("u8<0:200>", 0, 200),
    ("i4", -8, 7),
    ("u4", 0, 15),
];

const ROUNDINGS: [&str; 3] = ["half_away_from_zero", "half_to_even", "half_up"];

/// One conv2d or dense problem, everything explicit.
#[derive(Clone, Debug)]
struct Case {
    /// `qnn.conv2d`, `qnn.conv2d_relu`, `qnn.dense`, `qnn.dense_relu`.
    op: &'static str,
    /// The attribute dictionary, `{...}`.
    attrs: String,
    x_shape: Vec<usize>,
    x_storage: (&'static str, i64, i64),
    x_scale: f64,
    x_zp: i64,
    x: Vec<i64>,
    w_shape: Vec<usize>,
    /// Signed (i8) or unsigned (u8) weight storage.
    w_unsigned: bool,
    /// One entry (per tensor) or one per output channel.
    w_params: Vec<(f64, i64)>,
    w: Vec<i64>,
    bias: Option<Vec<i32>>,
    out_shape: Vec<usize>,
    out_storage: (&'static str, i64, i64),
    out_scale: f64,
    out_zp: i64,
}

fn dims(shape: &[usize]) -> String {
    shape.iter().map(usize::to_string).collect::<Vec<_>>().join("x")
}

fn hex(bytes: &[u8]) -> String {
    let digits: String = bytes.iter().map(|b| format!("{b:02X}")).collect();
    format!("\"0x{digits}\"")
}

impl Case {
    fn w_type(&self) -> String {
        let storage = if self.w_unsigned { "u8" } else { "i8" };
        let elem = if self.w_params.len() == 1 {
            quant(storage, self.w_params[0].0, self.w_params[0].1)
        } else {
            let entries: Vec<String> = self.w_params.iter().map(|(s, z)| format!("{s:?}:{z}")).collect();
            format!("!qnn.uniform<{storage}:f32:0, {{{}}}>", entries.join(", "))
        };
        format!("tensor<{}x{elem}>", dims(&self.w_shape))
    }

    fn text(&self) -> String {
        let tx =
            format!("tensor<{}x{}>", dims(&self.x_shape), quant(self.x_storage.0, self.x_scale, self.x_zp));
        let ty = format!(
            "tensor<{}x{}>",
            dims(&self.out_shape),
            quant(self.out_storage.0, self.out_scale, self.out_zp)
        );
        let tw = self.w_type();
        let w_bytes: Vec<u8> = self.w.iter().map(|&v| v as u8).collect();
        let mut body =
            format!("    %w = fp.constant() {{value = dense<{}> : {tw}}} : () -> {tw}\n", hex(&w_bytes));
        let mut operands = "%x, %w".to_string();
        let mut types = format!("{tx}, {tw}");
        if let Some(b) = &self.bias {
            let tb = format!("tensor<{}xi32>", b.len());
            let bytes: Vec<u8> = b.iter().flat_map(|v| v.to_le_bytes()).collect();
            body +=
                &format!("    %b = fp.constant() {{value = dense<{}> : {tb}}} : () -> {tb}\n", hex(&bytes));
            operands += ", %b";
            types += &format!(", {tb}");
        }
        body += &format!("    %y = {}({operands}) {} : ({types}) -> {ty}\n", self.op, self.attrs);
        format!("module {{\n  func.func @f(%x: {tx}) -> {ty} {{\n{body}    func.return %y : {ty}\n  }}\n}}\n")
    }

    fn input(&self) -> Tensor {
        let shape = IxDyn(&self.x_shape);
        if self.x_storage.0.starts_with('u') {
            Tensor::U8(ArrayD::from_shape_vec(shape, self.x.iter().map(|&v| v as u8).collect()).unwrap())
        } else {
            Tensor::I8(ArrayD::from_shape_vec(shape, self.x.iter().map(|&v| v as i8).collect()).unwrap())
        }
    }

    fn input_bytes(&self) -> Vec<u8> {
        self.x.iter().map(|&v| v as u8).collect()
    }
}

/// The interpreter's output bytes.
fn interpret(ctx: &Context, module: &Module, case: &Case) -> Vec<u8> {
    let out = run_function(ctx, module, "f", &[case.input()], &KernelRegistry::standard())
        .unwrap_or_else(|e| panic!("interpreter: {e}\n{}", case.text()))
        .remove(0);
    match out {
        Tensor::I8(a) => a.iter().map(|&v| v as u8).collect(),
        Tensor::U8(a) => a.iter().copied().collect(),
        other => panic!("unexpected interpreter output {}", other.describe()),
    }
}

/// The op computing `%y` (the one `qnn` op of the function).
fn the_op(ctx: &Context, module: &Module) -> OpId {
    let func = module.top_level_ops().next().expect("a function");
    let block = module.first_block(module.region(func, 0));
    module
        .block_ops(block)
        .find(|&op| ctx.op_name_str(module.op_name(op)).starts_with("qnn."))
        .expect("a qnn op")
}

/// A buffer whose usable part starts at a `BUFFER_ALIGN`-aligned address.
struct Aligned {
    storage: Vec<u8>,
    start: usize,
    len: usize,
}

impl Aligned {
    fn new(bytes: &[u8], len: usize, fill: u8) -> Aligned {
        let mut storage = vec![fill; len + BUFFER_ALIGN];
        let start = storage.as_ptr().align_offset(BUFFER_ALIGN);
        storage[start..start + bytes.len()].copy_from_slice(bytes);
        Aligned { storage, start, len }
    }

    fn ptr(&mut self) -> *mut u8 {
        self.storage[self.start..].as_mut_ptr()
    }
}

/// What compiling one op gave.
struct Compiled {
    plan: Plan,
    kernels: Vec<crate::abi::KernelCode>,
    rodata: Vec<u8>,
}

fn compile(
    ctx: &Context,
    module: &Module,
    op: OpId,
    lowering: &dyn OpLowering,
    target: &Target,
) -> Result<Compiled, crate::CodegenError> {
    let op = LowerOp { ctx, module, op, target };
    let plan = lowering.plan(&op)?;
    let Plan::Kernels { scratch_bytes, compile_time_operands } = &plan else {
        panic!("conv is not an alias")
    };
    let operands = (0..op.num_operands())
        .map(|i| (!compile_time_operands.contains(&i)).then_some(Place::Io(0)))
        .collect();
    let mut rodata = Rodata::default();
    // A few bytes of rodata before the op's own, so offsets are not all 0.
    rodata.push(&[0x5A; 3]);
    let mut emit = Emit {
        operands,
        results: vec![Place::Io(1)],
        scratch: (*scratch_bytes > 0).then_some(Place::Arena(BUFFER_ALIGN)),
        rodata: &mut rodata,
        kernels: Vec::new(),
    };
    lowering.emit(&op, &mut emit)?;
    let kernels = emit.kernels;
    Ok(Compiled { plan, kernels, rodata: rodata.bytes })
}

/// Runs the compiled kernels on `input`, each over its range split at
/// `cuts` (fractions), and returns the output bytes (checking the guards).
fn run(compiled: &Compiled, input: &[u8], out_len: usize, cuts: &[f64]) -> Vec<u8> {
    const GUARD: usize = 64;
    let Plan::Kernels { scratch_bytes, .. } = compiled.plan else { unreachable!() };
    let mut arena = Aligned::new(&[], BUFFER_ALIGN + scratch_bytes + GUARD, 0xC3);
    let mut rodata = Aligned::new(&compiled.rodata, compiled.rodata.len(), 0);
    // The input ends flush against an inaccessible page: a kernel reading
    // past it faults.
    let mut x = GuardedRegion::new(input.len(), GuardSide::End { align: 1 }).unwrap();
    x.as_mut_slice().copy_from_slice(input);
    let mut out = vec![0xA5u8; out_len + 2 * GUARD];
    let io = [x.as_mut_ptr(), out[GUARD..].as_mut_ptr()];
    for kernel in &compiled.kernels {
        let code = ExecutableCode::new(&kernel.code).unwrap();
        let mut bounds: Vec<usize> = cuts.iter().map(|f| (f * kernel.work as f64) as usize).collect();
        bounds.push(0);
        bounds.push(kernel.work);
        bounds.sort_unstable();
        for range in bounds.windows(2) {
            // SAFETY: the kernel was generated for these places: io[0] holds
            // the input (exactly its bytes, then a guard page), io[1] the output (with guards
            // around it), the arena holds the planned scratch at offset 64,
            // rodata the op's data; the ranges cover 0..work once.
            unsafe { call_kernel(code.entry(), arena.ptr(), rodata.ptr(), &io, range[0], range[1]) };
        }
    }
    assert!(
        out[..GUARD].iter().chain(&out[GUARD + out_len..]).all(|&b| b == 0xA5),
        "a kernel wrote outside the output"
    );
    assert!(
        arena.storage[arena.start + BUFFER_ALIGN + scratch_bytes..][..GUARD].iter().all(|&b| b == 0xC3),
        "a kernel wrote past its scratch"
    );
    let _ = rodata.len;
    out[GUARD..GUARD + out_len].to_vec()
}

/// Compiles `case` with `lowering` and compares with the interpreter;
/// returns the strategy of the last kernel.
fn check(case: &Case, lowering: &dyn OpLowering, cuts: &[f64]) -> String {
    check_strategies(case, lowering, cuts).pop().unwrap_or_default()
}

/// [`check`], returning every kernel's strategy.
fn check_strategies(case: &Case, lowering: &dyn OpLowering, cuts: &[f64]) -> Vec<String> {
    let mut ctx = context();
    let text = case.text();
    let module =
        parse_module(&mut ctx, text.as_bytes(), "case.qir").unwrap_or_else(|e| panic!("{text}\n{e:?}"));
    let want = interpret(&ctx, &module, case);
    let target = Target::for_running(TargetCpu::Native).unwrap();
    let compiled = compile(&ctx, &module, the_op(&ctx, &module), lowering, &target)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let got = run(&compiled, &case.input_bytes(), want.len(), cuts);
    if got != want {
        let first = (0..want.len()).find(|&i| got[i] != want[i]).unwrap();
        let strategies: Vec<&str> = compiled.kernels.iter().map(|k| k.strategy.as_str()).collect();
        panic!(
            "{} of {} outputs differ, first at {first}: jit {} vs interpreter {}\nkernels: {strategies:?}\n{}",
            (0..want.len()).filter(|&i| got[i] != want[i]).count(),
            want.len(),
            got[first] as i8,
            want[first] as i8,
            if text.len() < 4000 { text } else { text[..4000].to_string() }
        );
    }
    compiled.kernels.iter().map(|k| k.strategy.clone()).collect()
}

// ---- strategies -------------------------------------------------------------

/// Parameters every case draws: storages, scales, zero points, the bias
/// kind, relu form, rounding, weight magnitude and data seed.
#[derive(Clone, Debug)]
struct Common {
    x_storage: usize,
    out_storage: usize,
    w_unsigned: bool,
    per_channel: bool,
    weight_zp_kind: usize,
    small_weights: bool,
    bias_kind: usize,
    relu: usize,
    rounding: usize,
    scale_exponent: i32,
    seed: u64,
}

fn common() -> impl Strategy<Value = Common> {
    (
        (0usize..6, 0usize..6, prop::bool::weighted(0.2), any::<bool>(), 0usize..3, any::<bool>()),
        (0usize..4, 0usize..4, 0usize..3, -12i32..4, any::<u64>()),
    )
        .prop_map(|((xs, os, wu, pc, wz, small), (bias, relu, rounding, e, seed))| Common {
            x_storage: xs,
            out_storage: os,
            w_unsigned: wu,
            per_channel: pc,
            weight_zp_kind: wz,
            small_weights: small,
            bias_kind: bias,
            relu,
            rounding,
            scale_exponent: e,
            seed: seed | 1,
        })
}

/// Fills a case's parameters and data from `c`; `channels` output channels,
/// `x_len` input and `w_len` weight values.
#[allow(clippy::too_many_arguments)] // the shapes of one case, each needed
fn build(
    c: &Common,
    op_base: &'static str,
    mut attrs: Vec<String>,
    x_shape: Vec<usize>,
    w_shape: Vec<usize>,
    out_shape: Vec<usize>,
    channels: usize,
) -> Case {
    let mut rng = Random::new(c.seed);
    let x_storage = STORAGES[c.x_storage];
    let out_storage = STORAGES[c.out_storage];
    let (w_lo, w_hi) = if c.w_unsigned { (0, 255) } else { (-128, 127) };
    let zp_of = |rng: &mut Random, lo: i64, hi: i64| match rng.next_u64() % 4 {
        0 => lo,
        1 => hi,
        _ => rng.range(lo, hi),
    };
    let x_zp = zp_of(&mut rng, x_storage.1, x_storage.2);
    let out_zp = zp_of(&mut rng, out_storage.1, out_storage.2);
    let entries = if c.per_channel { channels } else { 1 };
    let w_params: Vec<(f64, i64)> = (0..entries)
        .map(|_| {
            let scale =
                (1.0 + (rng.next_u64() % 1000) as f64 / 1000.0) * 2f64.powi(-8 - (rng.next_u64() % 4) as i32);
            let zp = match c.weight_zp_kind {
                0 if !c.w_unsigned => 0,
                0 | 1 => {
                    if c.w_unsigned {
                        rng.range(100, 156)
                    } else {
                        rng.range(-3, 3)
                    }
                }
                _ => rng.range(w_lo, w_hi),
            };
            (scale, zp)
        })
        .collect();
    let x_len: usize = x_shape.iter().product();
    let w_len: usize = w_shape.iter().product();
    let x: Vec<i64> = (0..x_len).map(|_| rng.range(x_storage.1, x_storage.2)).collect();
    let per_row = w_len / channels.max(1);
    let w: Vec<i64> = (0..w_len)
        .map(|i| {
            let zp = w_params[if entries == 1 { 0 } else { i / per_row.max(1) }].1;
            if c.small_weights {
                (zp + rng.range(-60, 60)).clamp(w_lo, w_hi)
            } else {
                rng.range(w_lo, w_hi)
            }
        })
        .collect();
    let bias = match c.bias_kind {
        0 => None,
        1 => Some((0..channels).map(|_| rng.range(-20000, 20000) as i32).collect()),
        2 => {
            Some((0..channels).map(|_| rng.range(i64::from(i32::MIN), i64::from(i32::MAX)) as i32).collect())
        }
        _ => Some(
            (0..channels)
                .map(|_| {
                    if rng.next_u64().is_multiple_of(2) {
                        i32::MAX - rng.range(0, 5000) as i32
                    } else {
                        i32::MIN + rng.range(0, 5000) as i32
                    }
                })
                .collect(),
        ),
    };
    let relu = c.relu > 0;
    if c.relu >= 2 {
        // ReLU6, or a bound between two output steps.
        attrs.push(format!("relu_max = {}", if c.relu == 2 { "6.0" } else { "0.37" }));
    }
    if c.rounding > 0 || rng.next_u64().is_multiple_of(2) {
        attrs.push(format!("rounding = \"{}\"", ROUNDINGS[c.rounding]));
    }
    let x_scale = 0.05;
    // s_out spans multipliers M = s_x·s_w/s_out from about 2^-20 to 2^0.
    let out_scale = x_scale * 2f64.powi(-8) * 2f64.powi(-c.scale_exponent) * 1.37;
    let op = match (op_base, relu) {
        ("conv", false) => "qnn.conv2d",
        ("conv", true) => "qnn.conv2d_relu",
        (_, false) => "qnn.dense",
        (_, true) => "qnn.dense_relu",
    };
    Case {
        op,
        attrs: format!("{{{}}}", attrs.join(", ")),
        x_shape,
        x_storage,
        x_scale,
        x_zp,
        x,
        w_shape,
        w_unsigned: c.w_unsigned,
        w_params,
        w,
        bias,
        out_shape,
        out_storage,
        out_scale,
        out_zp,
    }
}

/// A random conv2d: shapes, window and groups (a third of them depthwise).
fn conv_case() -> impl Strategy<Value = Case> {
    (
        (1usize..3, 1usize..4, 1usize..5, 1usize..20, 1usize..11, 1usize..11),
        (1usize..4, 1usize..4, 1usize..3, 1usize..3, 1usize..3, 1usize..3),
        proptest::array::uniform4(0usize..3),
        0usize..3,
        common(),
    )
        .prop_filter_map("the window must fit", |((n, g, cg, og, h, w), window, pad, kind, c)| {
            let (groups, cg, og) = if kind == 0 { (g * cg, 1, 1) } else { (g, cg, og) };
            windowed_conv(&c, [n, h, w], [groups, cg, og], window, pad)
        })
}

/// A random 3×3 stride-1 conv2d of one group: what Winograd takes, with
/// tile rows and columns that end in every phase (odd and even outputs,
/// partial 16-column groups) and odd and even channel counts.
fn winograd_case() -> impl Strategy<Value = Case> {
    (
        (1usize..3, 1usize..12, 1usize..20, 1usize..14, 1usize..40),
        proptest::array::uniform4(0usize..3),
        common(),
    )
        .prop_filter_map("the window must fit", |((n, c, o, h, w), pad, common)| {
            // One channel in and out is depthwise, which has its own kernel.
            if h + pad[0] + pad[2] < 3 || w + pad[1] + pad[3] < 3 || c + o == 2 {
                return None;
            }
            let (oh, ow) = (h + pad[0] + pad[2] - 2, w + pad[1] + pad[3] - 2);
            let attrs = vec![format!("pad = [{}, {}, {}, {}]", pad[0], pad[1], pad[2], pad[3])];
            Some(build(&common, "conv", attrs, vec![n, c, h, w], vec![o, c, 3, 3], vec![n, o, oh, ow], o))
        })
}

/// A random 1×1 conv2d with unit strides and no padding (the pack kernel
/// reads its input directly): maps of a few positions to several blocks,
/// ending in every phase of the 8- and 16-position blocks, with groups.
fn pointwise_case() -> impl Strategy<Value = Case> {
    ((1usize..3, 1usize..3, 1usize..12, 1usize..20, 1usize..9, 1usize..12), common()).prop_map(
        |((n, groups, cg, og, h, w), common)| {
            let (c, o) = (cg * groups, og * groups);
            let attrs = vec![format!("groups = {groups}")];
            build(&common, "conv", attrs, vec![n, c, h, w], vec![o, cg, 1, 1], vec![n, o, h, w], o)
        },
    )
}

/// A random depthwise conv2d with rows long enough for whole 32-column
/// steps and every remainder, odd and even kernel widths, both horizontal
/// strides and dilations.
fn depthwise_case() -> impl Strategy<Value = Case> {
    (
        (1usize..3, 1usize..9, 1usize..8, 1usize..75),
        (1usize..6, 1usize..6, 1usize..3, 1usize..3, 1usize..3, 1usize..3),
        proptest::array::uniform4(0usize..3),
        common(),
    )
        .prop_filter_map("the window must fit", |((n, c, h, w), window, pad, common)| {
            windowed_conv(&common, [n, h, w], [c, 1, 1], window, pad)
        })
}

/// A conv2d of `[n, h, w]` images, `[groups, inputs per group, outputs
/// per group]` channels, window `(kh, kw, sh, sw, dh, dw)` and `pad`, or
/// `None` when the window does not fit the padded image.
fn windowed_conv(
    c: &Common,
    [n, h, w]: [usize; 3],
    [groups, cg, og]: [usize; 3],
    (kh, kw, sh, sw, dh, dw): (usize, usize, usize, usize, usize, usize),
    pad: [usize; 4],
) -> Option<Case> {
    let (ci, o) = (cg * groups, og * groups);
    let (eh, ew) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
    if h + pad[0] + pad[2] < eh || w + pad[1] + pad[3] < ew {
        return None;
    }
    let (oh, ow) = ((h + pad[0] + pad[2] - eh) / sh + 1, (w + pad[1] + pad[3] - ew) / sw + 1);
    let attrs = vec![
        format!("stride = [{sh}, {sw}]"),
        format!("pad = [{}, {}, {}, {}]", pad[0], pad[1], pad[2], pad[3]),
        format!("dilation = [{dh}, {dw}]"),
        format!("groups = {groups}"),
    ];
    Some(build(c, "conv", attrs, vec![n, ci, h, w], vec![o, cg, kh, kw], vec![n, o, oh, ow], o))
}

/// A random dense: rows (rank 1 to 3 inputs), K and O around the tile sizes.
fn dense_case() -> impl Strategy<Value = Case> {
    (
        prop::sample::select(vec![vec![], vec![1], vec![3], vec![2, 3], vec![5], vec![9]]),
        1usize..70,
        1usize..40,
        common(),
    )
        .prop_map(|(lead, k, o, c)| {
            let mut x_shape = lead.clone();
            x_shape.push(k);
            let mut out_shape = lead;
            out_shape.push(o);
            build(&c, "dense", Vec::new(), x_shape, vec![o, k], out_shape, o)
        })
}

fn cuts() -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(0.0f64..1.0, 0..3)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn conv2d_matches_the_interpreter(case in conv_case(), cuts in cuts()) {
        if avx2_here() {
            for choice in [ConvGemmChoice::PositionLanes, ConvGemmChoice::ChannelLanes] {
                check(&case, &Conv2dLowering { options: KernelOptions::default().with_conv_gemm(choice) }, &cuts);
                let exact = KernelOptions::EXACT_WORDS_ONLY.with_conv_gemm(choice);
                check(&case, &Conv2dLowering { options: exact }, &cuts);
            }
        }
    }

    #[test]
    fn winograd_conv2d_matches_the_interpreter(case in winograd_case(), cuts in cuts()) {
        if avx2_here() {
            let options = KernelOptions::default().with_conv_gemm(ConvGemmChoice::Winograd);
            let chosen = check(&case, &Conv2dLowering { options }, &cuts);
            prop_assert!(chosen.starts_with("winograd"), "{}", chosen);
        }
    }

    #[test]
    fn pointwise_conv2d_matches_the_interpreter(case in pointwise_case(), cuts in cuts()) {
        if avx2_here() {
            for choice in [ConvGemmChoice::PositionLanes, ConvGemmChoice::ChannelLanes] {
                for options in [KernelOptions::default(), KernelOptions::EXACT_WORDS_ONLY] {
                    let lowering = Conv2dLowering { options: options.with_conv_gemm(choice) };
                    let strategies = check_strategies(&case, &lowering, &cuts);
                    // "[centered straight from the input: ]im2col of W positions × ...";
                    // one channel in and out is depthwise, which has no pack.
                    let Some(pack) = strategies.iter().find(|s| s.contains("im2col of ")) else {
                        prop_assert!(strategies.iter().any(|s| s.starts_with("depthwise")), "{:?}", strategies);
                        continue;
                    };
                    let block: usize = pack.split("im2col of ").nth(1).and_then(|r| r.split(' ').next())
                        .and_then(|w| w.parse().ok()).expect("the block width");
                    let direct = pack.starts_with("centered straight from the input");
                    prop_assert_eq!(direct, case.x_shape[2] * case.x_shape[3] >= block, "{:?}", strategies);
                }
            }
        }
    }

    #[test]
    fn depthwise_conv2d_matches_the_interpreter(case in depthwise_case(), cuts in cuts()) {
        if avx2_here() {
            for taps in [DepthwiseTaps::Cheapest, DepthwiseTaps::Adjacent, DepthwiseTaps::Single] {
                let options = KernelOptions::default().with_depthwise_taps(taps);
                let chosen = check(&case, &Conv2dLowering { options }, &cuts);
                prop_assert!(chosen.starts_with("depthwise"), "{}", chosen);
                let adjacent = chosen.contains("adjacent taps");
                let unit_dilation = case.attrs.contains("1], groups");
                match taps {
                    DepthwiseTaps::Adjacent => prop_assert_eq!(adjacent, unit_dilation, "{}", chosen),
                    DepthwiseTaps::Single => prop_assert!(!adjacent, "{}", chosen),
                    DepthwiseTaps::Cheapest => {}
                }
            }
        }
    }

    #[test]
    fn dense_matches_the_interpreter(case in dense_case(), cuts in cuts()) {
        if avx2_here() {
            check(&case, &DenseLowering::default(), &cuts);
            check(&case, &DenseLowering { options: KernelOptions::EXACT_WORDS_ONLY }, &cuts);
        }
    }
}

/// A resnet18-sized layer: `1×c×hw×hw` input, `o` channels, a `k`×`k`
/// window with pad `k / 2`.
fn resnet_layer(c: usize, o: usize, hw: usize, k: usize, stride: usize, small_weights: bool) -> Case {
    let common = Common {
        x_storage: 0,
        out_storage: 0,
        w_unsigned: false,
        per_channel: true,
        weight_zp_kind: 0,
        small_weights,
        bias_kind: 1,
        relu: 1,
        rounding: 0,
        scale_exponent: -4,
        seed: 0x9E37_79B9_7F4A_7C15,
    };
    let p = k / 2;
    let attrs = vec![format!("stride = [{stride}, {stride}]"), format!("pad = [{p}, {p}, {p}, {p}]")];
    let out = (hw + 2 * p - k) / stride + 1;
    build(&common, "conv", attrs, vec![1, c, hw, hw], vec![o, c, k, k], vec![1, o, out, out], o)
}

/// The fastest time of each kernel of `compiled` over `runs` runs on
/// `input` (other processes only ever add time).
fn time_kernels(compiled: &Compiled, input: &[u8], out_len: usize, runs: usize) -> Vec<f64> {
    let Plan::Kernels { scratch_bytes, .. } = compiled.plan else { unreachable!() };
    let mut arena = Aligned::new(&[], BUFFER_ALIGN + scratch_bytes, 0);
    let mut rodata = Aligned::new(&compiled.rodata, compiled.rodata.len(), 0);
    let mut x = input.to_vec();
    let mut out = vec![0u8; out_len];
    let io = [x.as_mut_ptr(), out.as_mut_ptr()];
    let codes: Vec<ExecutableCode> =
        compiled.kernels.iter().map(|k| ExecutableCode::new(&k.code).unwrap()).collect();
    let mut fastest = vec![f64::INFINITY; codes.len()];
    for _ in 0..runs {
        for (k, code) in codes.iter().enumerate() {
            let start = std::time::Instant::now();
            // SAFETY: as in `run`, without guards.
            unsafe { call_kernel(code.entry(), arena.ptr(), rodata.ptr(), &io, 0, compiled.kernels[k].work) };
            fastest[k] = fastest[k].min(start.elapsed().as_secs_f64());
        }
    }
    fastest
}

/// Times every kernel of `case` after checking it once against the
/// interpreter; prints GOP/s (2 ops per multiply-accumulate).
fn time_layer(name: &str, case: &Case, lowering: &dyn OpLowering, runs: usize) {
    let strategy = check(case, lowering, &[]);
    let mut ctx = context();
    let module = parse_module(&mut ctx, case.text().as_bytes(), "bench.qir").unwrap();
    let target = Target::for_running(TargetCpu::Native).unwrap();
    let compiled = compile(&ctx, &module, the_op(&ctx, &module), lowering, &target).unwrap();
    let times = time_kernels(&compiled, &case.input_bytes(), case.out_shape.iter().product(), runs);
    let macs =
        (case.out_shape.iter().product::<usize>() * case.w_shape[1..].iter().product::<usize>()) as f64;
    let total: f64 = times.iter().sum();
    let parts: Vec<String> = times
        .iter()
        .zip(&compiled.kernels)
        .map(|(t, k)| format!("{} {:.3} ms", k.work_item, t * 1e3))
        .collect();
    println!(
        "{name}: {:.3} ms, {:.1} GOP/s ({:.1} GMAC/s) [{}] — {strategy}",
        total * 1e3,
        2.0 * macs / total / 1e9,
        macs / total / 1e9,
        parts.join(", ")
    );
}

/// Speed of resnet18-sized layers on this machine (run with `--ignored
/// --nocapture`, in release): the 64→64 3×3 56×56 conv, with weights that
/// need the exact path and with weights that allow vpmaddubsw.
#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn resnet_layer_speed() {
    if !avx2_here() {
        return;
    }
    let exact = Conv2dLowering { options: KernelOptions::EXACT_WORDS_ONLY };
    let winograd =
        Conv2dLowering { options: KernelOptions::EXACT_WORDS_ONLY.with_conv_gemm(ConvGemmChoice::Winograd) };
    let default = Conv2dLowering::default();
    let layers = [
        (3, 64, 224, 7, 2),
        (64, 64, 56, 3, 1),
        (64, 128, 56, 3, 2),
        (64, 128, 56, 1, 2),
        (128, 128, 28, 3, 1),
        (256, 256, 14, 3, 1),
        (512, 512, 7, 3, 1),
    ];
    for (c, o, hw, k, stride) in layers {
        let name = format!("{c}→{o} {k}×{k}/{stride} {hw}×{hw}");
        let full_range = resnet_layer(c, o, hw, k, stride, false);
        time_layer(&format!("{name} vpmaddwd"), &full_range, &exact, 20);
        if k == 3 && stride == 1 {
            time_layer(&format!("{name} winograd"), &full_range, &winograd, 20);
        }
        time_layer(&format!("{name} small weights"), &resnet_layer(c, o, hw, k, stride, true), &default, 20);
    }
    // Depthwise 3×3 (MobileNet-sized) and the classifier's GEMV.
    for (c, hw, stride) in [(32, 112, 1), (144, 56, 2), (384, 14, 1)] {
        let mut case = resnet_layer(c, c, hw, 3, stride, false);
        case.attrs = case.attrs.replace('{', &format!("{{groups = {c}, "));
        case.w_shape[1] = 1;
        case.w.truncate(c * 9);
        time_layer(&format!("depthwise {c} 3×3/{stride} {hw}×{hw}"), &case, &default, 20);
    }
    let common = Common {
        x_storage: 0,
        out_storage: 0,
        w_unsigned: false,
        per_channel: true,
        weight_zp_kind: 0,
        small_weights: false,
        bias_kind: 1,
        relu: 0,
        rounding: 0,
        scale_exponent: -4,
        seed: 7,
    };
    let dense = build(&common, "dense", Vec::new(), vec![1, 512], vec![1000, 512], vec![1, 1000], 1000);
    time_layer("dense 512→1000", &dense, &DenseLowering::default(), 20);
}

/// Every conv2d and dense layer of real quantized models, each on the
/// activation the model computes for its first test sample, with both
/// option sets. Set `QOPT_X86_LAYER_MODELS` to `model.qir=input.npy` pairs
/// separated by commas (the models after `qopt --pass='quantize{...}'`);
/// prints one line per layer.
#[test]
#[ignore = "needs quantized models: set QOPT_X86_LAYER_MODELS"]
fn model_layers_match_the_interpreter() {
    let Ok(list) = std::env::var("QOPT_X86_LAYER_MODELS") else {
        println!("notice: model_layers_match_the_interpreter: QOPT_X86_LAYER_MODELS is not set");
        return;
    };
    if !avx2_here() {
        return;
    }
    let target = Target::for_running(TargetCpu::Native).unwrap();
    for pair in list.split(',') {
        let (model, input) = pair.split_once('=').expect("model.qir=input.npy");
        let mut ctx = context();
        let text = std::fs::read(model).unwrap();
        let module = parse_module(&mut ctx, &text, model).unwrap();
        let raw = qopt_npy::read_npy_file(input).unwrap();
        let sample: usize = raw.shape[1..].iter().product();
        let values: Vec<f32> = raw.to_vec::<f32>().unwrap();
        let mut shape = raw.shape.clone();
        shape[0] = 1;
        let x = Tensor::F32(ArrayD::from_shape_vec(IxDyn(&shape), values[..sample].to_vec()).unwrap());
        let mut results: std::collections::HashMap<OpId, Vec<Tensor>> = Default::default();
        run_function_with(
            &ctx,
            &module,
            "main",
            std::slice::from_ref(&x),
            &KernelRegistry::standard(),
            &mut |op, r| {
                results.insert(op, r.to_vec());
            },
        )
        .unwrap();
        let func = module.lookup_symbol(&ctx, "main").unwrap();
        let block = module.first_block(module.region(func, 0));
        let mut layers = 0;
        let runs: usize = std::env::var("QOPT_X86_LAYER_RUNS").ok().and_then(|r| r.parse().ok()).unwrap_or(0);
        let mut total_seconds = 0.0;
        for op in module.block_ops(block) {
            let name = ctx.op_name_str(module.op_name(op));
            let lowering: [&dyn OpLowering; 2] = if name.starts_with("qnn.conv2d") {
                [&Conv2dLowering::default(), &Conv2dLowering { options: KernelOptions::EXACT_WORDS_ONLY }]
            } else if name.starts_with("qnn.dense") {
                [&DenseLowering::default(), &DenseLowering { options: KernelOptions::EXACT_WORDS_ONLY }]
            } else {
                continue;
            };
            let activation = match module.value_def(module.operand(op, 0)) {
                qopt_ir_core::ValueDef::Result { op: def, index } => results[&def][index as usize].clone(),
                qopt_ir_core::ValueDef::BlockArg { .. } => x.clone(),
            };
            let bytes = |t: &Tensor| -> Vec<u8> {
                match t {
                    Tensor::I8(a) => a.iter().map(|&v| v as u8).collect(),
                    Tensor::U8(a) => a.iter().copied().collect(),
                    other => panic!("{name}: unexpected tensor {}", other.describe()),
                }
            };
            let want = bytes(&results[&op][0]);
            let mut strategies = Vec::new();
            for l in lowering {
                let compiled = compile(&ctx, &module, op, l, &target).unwrap();
                let got = run(&compiled, &bytes(&activation), want.len(), &[0.5]);
                let location = crate::lower::describe_location(&ctx, &module, op);
                assert!(got == want, "{model}: {name} at {location} differs from the interpreter");
                strategies.push(compiled.kernels.last().map(|k| k.strategy.clone()).unwrap_or_default());
            }
            layers += 1;
            let location = crate::lower::describe_location(&ctx, &module, op);
            if runs > 0 {
                let compiled = compile(&ctx, &module, op, lowering[0], &target).unwrap();
                let seconds: f64 =
                    time_kernels(&compiled, &bytes(&activation), want.len(), runs).iter().sum();
                total_seconds += seconds;
                println!("{model}: {name} {location}: {:.3} ms, {}", seconds * 1e3, strategies[0]);
            } else {
                println!("{model}: {name} {location}: {}", strategies[0]);
            }
        }
        println!("{model}: {layers} conv/dense layers bit-exact on both schemes");
        if runs > 0 {
            println!(
                "{model}: {:.3} ms in conv/dense kernels (one thread, fastest of {runs} runs each)",
                total_seconds * 1e3
            );
        }
    }
}

/// Shapes the random ones do not reach: long rows (the pad kernel's
/// chunk and fill loops, for i16 and byte images), deep reductions, many
/// channels (several full tiles and a short one), wide depthwise rows, a
/// long dense — each with full-range and with small weights (so both AVX2
/// schemes run), i8 and u8 activations.
#[test]
fn larger_layers_match_the_interpreter() {
    if !avx2_here() {
        return;
    }
    // (c, o, [h, w], k, stride, pad, groups)
    let conv_cases = [
        (3, 13, [5, 300], 3, 1, 1, 1),
        (70, 19, [6, 9], 3, 1, 1, 1),
        (130, 14, [3, 17], 1, 1, 0, 1),
        (40, 40, [4, 150], 3, 2, 1, 40),
        (24, 24, [7, 290], 3, 1, 1, 24),
        (8, 30, [9, 40], 5, 2, 2, 2),
    ];
    for (i, &(c, o, [h, w], k, stride, pad, groups)) in conv_cases.iter().enumerate() {
        for (small, x_storage) in [(false, 0), (true, 1)] {
            let common = Common {
                x_storage,
                out_storage: i % 4,
                w_unsigned: false,
                per_channel: true,
                weight_zp_kind: i % 3,
                small_weights: small,
                bias_kind: 1 + i % 3,
                relu: i % 4,
                rounding: i % 3,
                scale_exponent: -3 - (i as i32),
                seed: 0x1234_5678 + i as u64,
            };
            let attrs = vec![
                format!("stride = [{stride}, {stride}]"),
                format!("pad = [{pad}, {pad}, {pad}, {pad}]"),
                format!("groups = {groups}"),
            ];
            let (oh, ow) = ((h + 2 * pad - k) / stride + 1, (w + 2 * pad - k) / stride + 1);
            let case = build(
                &common,
                "conv",
                attrs,
                vec![1, c, h, w],
                vec![o, c / groups, k, k],
                vec![1, o, oh, ow],
                o,
            );
            let depthwise = groups == c;
            for choice in [ConvGemmChoice::PositionLanes, ConvGemmChoice::ChannelLanes] {
                let options = KernelOptions::default().with_conv_gemm(choice);
                let chosen = check(&case, &Conv2dLowering { options }, &[0.3]);
                assert_scheme(&chosen, small && !depthwise);
                let exact = KernelOptions::EXACT_WORDS_ONLY.with_conv_gemm(choice);
                let exact = check(&case, &Conv2dLowering { options: exact }, &[0.7]);
                assert!(exact.starts_with(if depthwise { "depthwise" } else { "vpmaddwd" }), "{exact}");
                let lanes = chosen.contains("channels in lanes");
                assert_eq!(lanes, choice == ConvGemmChoice::ChannelLanes && !depthwise, "{chosen}");
            }
        }
    }
    for (i, (rows, k, o)) in
        [(1usize, 3000usize, 1100usize), (5, 700, 37), (7, 33, 300)].into_iter().enumerate()
    {
        for small in [false, true] {
            let common = Common {
                x_storage: i % 2,
                out_storage: 1 - i % 2,
                w_unsigned: i == 2,
                per_channel: i != 1,
                weight_zp_kind: i % 3,
                small_weights: small,
                bias_kind: 1,
                relu: 2,
                rounding: i % 3,
                scale_exponent: -6,
                seed: 99 + i as u64,
            };
            let case = build(&common, "dense", Vec::new(), vec![rows, k], vec![o, k], vec![rows, o], o);
            let chosen = check(&case, &DenseLowering::default(), &[0.5]);
            assert_scheme(&chosen, small);
            check(&case, &DenseLowering { options: KernelOptions::EXACT_WORDS_ONLY }, &[]);
        }
    }
}
