//! Every kernel of `src/kernels/` compiled as part of a whole function by the
//! module compiler and run through the JIT (one thread, two threads, and
//! between guard pages), against the interpreter bit for bit, on random
//! cases (proptest): shapes and broadcasts, storages (i8, u8, narrowed
//! ranges, 4-bit), zero points often at the ends of their range, scales
//! whose ratios span 2^−45 to 2^45 (multipliers whose shifts fall below 0,
//! inside 1..=62 and above 62), and every rounding mode.
//!
//! Inputs come from the interpreter's random generator, uniform over each
//! quantized type's storage range (and over f32 bit patterns for floats).

mod common;

use common::*;
use proptest::prelude::*;

fn cases() -> ProptestConfig {
    ProptestConfig { cases: 48, ..ProptestConfig::default() }
}

/// `tensor<AxBx...xE>` (`tensor<E>` for rank 0).
fn tensor(shape: &[usize], element: &str) -> String {
    let dims: String = shape.iter().map(|d| format!("{d}x")).collect();
    format!("tensor<{dims}{element}>")
}

/// A per-tensor quantized type.
#[derive(Clone, Debug)]
struct Quant {
    storage: &'static str,
    scale: f64,
    zero_point: i64,
}

impl Quant {
    fn text(&self) -> String {
        format!("!qnn.uniform<{}:f32, {:?}:{}>", self.storage, self.scale, self.zero_point)
    }
}

/// A scale `mantissa × 2^exponent` within f32's normal range.
fn scale() -> impl Strategy<Value = f64> {
    (1.0f64..2.0, -60i32..60).prop_map(|(m, e)| m * 2f64.powi(e))
}

/// `base` times a ratio: often 1 or a small power of 2 (ties), sometimes
/// far away (shifts outside 1..=62).
fn scale_near(base: f64) -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(base),
        (-3i32..4).prop_map(move |e| base * 2f64.powi(e)),
        (1.0f64..2.0, -45i32..45).prop_map(move |(m, e)| base * m * 2f64.powi(e)),
    ]
    .prop_filter("a normal f32 scale", |s| (*s as f32).is_normal() && (*s as f32).is_finite())
}

/// A quantized type of one of `storages` with a scale near `base`.
fn quant_near(base: f64, storages: &'static [(&'static str, i64, i64)]) -> impl Strategy<Value = Quant> {
    (proptest::sample::select(storages.to_vec()), scale_near(base)).prop_flat_map(
        |((storage, lo, hi), scale)| {
            prop_oneof![Just(lo), Just(hi), lo..=hi].prop_map(move |zero_point| Quant {
                storage,
                scale,
                zero_point,
            })
        },
    )
}

fn rounding() -> impl Strategy<Value = &'static str> {
    proptest::sample::select(ROUNDINGS.to_vec())
}

/// A result shape and two operand shapes that broadcast to it.
fn broadcast_shapes() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<usize>)> {
    proptest::collection::vec(prop_oneof![1usize..5, Just(1usize), 5usize..40], 0..5).prop_flat_map(|out| {
        let rank = out.len();
        let out2 = out.clone();
        let pick = move |keep: Vec<bool>, drop: usize| -> Vec<usize> {
            out[drop.min(rank)..]
                .iter()
                .zip(&keep[drop.min(rank)..])
                .map(|(&d, &k)| if k { d } else { 1 })
                .collect()
        };
        (
            Just(out2),
            proptest::collection::vec(any::<bool>(), rank),
            0..=rank,
            proptest::collection::vec(any::<bool>(), rank),
            0..=rank,
        )
            .prop_map(move |(_, ka, da, kb, db)| {
                let (a, b) = (pick(ka, da), pick(kb, db));
                // The result is the broadcast of the two.
                let rank = a.len().max(b.len());
                let at = |s: &[usize], d: usize| if d + s.len() >= rank { s[d + s.len() - rank] } else { 1 };
                let result: Vec<usize> = (0..rank).map(|d| at(&a, d).max(at(&b, d))).collect();
                (result, a, b)
            })
    })
}

/// `@main` with `args` as arguments, one op line, and its result returned.
fn main_of(args: &[String], op_line: &str, results: &[String]) -> String {
    let params: Vec<String> = args.iter().enumerate().map(|(i, t)| format!("%a{i}: {t}")).collect();
    let (ret, names) = if results.len() == 1 {
        (results[0].clone(), "%r".to_string())
    } else {
        (
            format!("({})", results.join(", ")),
            (0..results.len()).map(|j| format!("%r#{j}")).collect::<Vec<_>>().join(", "),
        )
    };
    format!(
        "module {{\n  func.func @main({}) -> {ret} {{\n    {op_line}\n    func.return {names} : {}\n  }}\n}}\n",
        params.join(", "),
        results.join(", ")
    )
}

/// One op over `%a0..` with `attrs`: `%r = name(...) attrs : (args) -> results`.
fn one_op(name: &str, attrs: &str, args: &[String], results: &[String]) -> String {
    let uses: Vec<String> = (0..args.len()).map(|i| format!("%a{i}")).collect();
    let defs = if results.len() == 1 { "%r".to_string() } else { format!("%r:{}", results.len()) };
    let result_list =
        if results.len() == 1 { results[0].clone() } else { format!("({})", results.join(", ")) };
    let line =
        format!("{defs} = {name}({}) {attrs} : ({}) -> {result_list}", uses.join(", "), args.join(", "));
    main_of(args, &line, results)
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn add_sub_and_mul_broadcast_bit_exactly(
        (out, sa, sb) in broadcast_shapes(),
        (qa, qb, qo) in scale().prop_flat_map(|s| (quant_near(s, &STORAGES[..4]), quant_near(s, &STORAGES[..4]), quant_near(s, &STORAGES[..4]))),
        mode in rounding(),
        op in prop::sample::select(&["qnn.add", "qnn.sub", "qnn.mul"][..]),
        seed in any::<u64>(),
    ) {
        if !avx2_here("add_sub_and_mul_broadcast_bit_exactly") { return Ok(()); }
        let text = one_op(
            op,
            &format!("{{rounding = \"{mode}\"}}"),
            &[tensor(&sa, &qa.text()), tensor(&sb, &qb.text())],
            &[tensor(&out, &qo.text())],
        );
        check_qir(&text, seed);
    }

    #[test]
    fn requantize_per_tensor_and_per_axis_bit_exactly(
        shape in proptest::collection::vec(1usize..7, 1..4),
        qin in scale().prop_flat_map(|s| quant_near(s, &STORAGES)),
        qout_scale in any::<u64>(),
        qout in quant_near(1.0, &STORAGES[..4]),
        axis_pick in any::<usize>(),
        per_axis in any::<bool>(),
        mode in rounding(),
        seed in any::<u64>(),
    ) {
        if !avx2_here("requantize_per_tensor_and_per_axis_bit_exactly") { return Ok(()); }
        // The output scale relative to the input's: 2^(−45..45).
        let out_scale = qin.scale * 2f64.powi((qout_scale % 90) as i32 - 45);
        prop_assume!((out_scale as f32).is_normal());
        let qout = Quant { scale: out_scale, ..qout };
        let input = if per_axis {
            let axis = axis_pick % shape.len();
            let (lo, hi) = STORAGES.iter().find(|s| s.0 == qin.storage).map(|s| (s.1, s.2)).unwrap();
            let entries: Vec<String> = (0..shape[axis])
                .map(|i| {
                    let scale = qin.scale * 2f64.powi((i as i32 * 7) % 9 - 4);
                    let zp = lo + ((seed >> (i % 32)) as i64 & 0xff) % (hi - lo + 1);
                    format!("{scale:?}:{zp}")
                })
                .collect();
            format!("!qnn.uniform<{}:f32:{axis}, {{{}}}>", qin.storage, entries.join(", "))
        } else {
            qin.text()
        };
        let text = one_op(
            "qnn.requantize",
            &format!("{{rounding = \"{mode}\"}}"),
            &[tensor(&shape, &input)],
            &[tensor(&shape, &qout.text())],
        );
        check_qir(&text, seed);
    }

    #[test]
    fn concats_bit_exactly(
        (shape, axis) in proptest::collection::vec(1usize..6, 1..4).prop_flat_map(|s| { let r = s.len(); (Just(s), 0..r) }),
        sizes in proptest::collection::vec(0usize..5, 1..4),
        quants in scale().prop_flat_map(|s| proptest::collection::vec(quant_near(s, &STORAGES[..4]), 4)),
        quantized in any::<bool>(),
        mode in rounding(),
        seed in any::<u64>(),
    ) {
        if !avx2_here("concats_bit_exactly") { return Ok(()); }
        let shapes: Vec<Vec<usize>> = sizes.iter().map(|&n| { let mut s = shape.clone(); s[axis] = n; s }).collect();
        let mut result = shape.clone();
        result[axis] = sizes.iter().sum();
        let text = if quantized {
            let args: Vec<String> = shapes.iter().zip(&quants).map(|(s, q)| tensor(s, &q.text())).collect();
            one_op("qnn.concat", &format!("{{axis = {axis}, rounding = \"{mode}\"}}"), &args, &[tensor(&result, &quants[3].text())])
        } else {
            let element = quants[0].text();
            let args: Vec<String> = shapes.iter().map(|s| tensor(s, &element)).collect();
            one_op("fp.concat", &format!("{{axis = {}}}", axis as i64 - shape.len() as i64), &args, &[tensor(&result, &element)])
        };
        check_qir(&text, seed);
    }

    #[test]
    fn average_pools_bit_exactly(
        (n, c, h, w) in (1usize..3, 1usize..4, 1usize..12, 1usize..12),
        (kh, kw, sh, sw) in (1usize..5, 1usize..5, 1usize..4, 1usize..4),
        pads in proptest::array::uniform4(0usize..4),
        (ceil, include) in (any::<bool>(), any::<bool>()),
        (qin, qout) in scale().prop_flat_map(|s| (quant_near(s, &STORAGES[..4]), quant_near(s, &STORAGES[..4]))),
        global in any::<bool>(),
        mode in rounding(),
        seed in any::<u64>(),
    ) {
        if !avx2_here("average_pools_bit_exactly") { return Ok(()); }
        let pads = [pads[0] % kh, pads[1] % kw, pads[2] % kh, pads[3] % kw];
        let input = tensor(&[n, c, h, w], &qin.text());
        let text = if global {
            one_op("qnn.global_avg_pool2d", &format!("{{rounding = \"{mode}\"}}"), &[input], &[tensor(&[n, c, 1, 1], &qout.text())])
        } else {
            let i = |v: usize| v as i64;
            let out = |size, k, s, b, e| qopt_dialect_fp::shape::pool_out(i(size), i(k), i(s), i(b), i(e), 1, ceil);
            let (Ok(oh), Ok(ow)) = (out(h, kh, sh, pads[0], pads[2]), out(w, kw, sw, pads[1], pads[3])) else {
                return Ok(());
            };
            let attrs = format!(
                "{{kernel = [{kh}, {kw}], stride = [{sh}, {sw}], pad = [{}, {}, {}, {}], ceil_mode = {ceil}, \
                 count_include_pad = {include}, rounding = \"{mode}\"}}",
                pads[0], pads[1], pads[2], pads[3]
            );
            one_op("qnn.avg_pool2d", &attrs, &[input], &[tensor(&[n, c, oh as usize, ow as usize], &qout.text())])
        };
        check_qir(&text, seed);
    }

    #[test]
    fn max_pools_bit_exactly(
        (n, c, h, w) in (1usize..3, 1usize..4, 1usize..12, 1usize..14),
        (kh, kw, sh, sw, dh, dw) in (1usize..4, 1usize..5, 1usize..4, 1usize..4, 1usize..3, 1usize..3),
        pads in proptest::array::uniform4(0usize..6),
        ceil in any::<bool>(),
        q in quant_near(0.5, &STORAGES),
        one_d in any::<bool>(),
        seed in any::<u64>(),
    ) {
        if !avx2_here("max_pools_bit_exactly") { return Ok(()); }
        let (eh, ew) = (dh * (kh - 1) + 1, dw * (kw - 1) + 1);
        let pads = [pads[0] % eh, pads[1] % ew, pads[2] % eh, pads[3] % ew];
        let i = |v: usize| v as i64;
        let out = |size, k, s, b, e, d| qopt_dialect_fp::shape::pool_out(i(size), i(k), i(s), i(b), i(e), i(d), ceil);
        let Ok(ow) = out(w, kw, sw, pads[1], pads[3], dw) else { return Ok(()) };
        let element = q.text();
        let text = if one_d {
            let attrs = format!("{{kernel = [{kw}], stride = [{sw}], dilation = [{dw}], pad = [{}, {}], ceil_mode = {ceil}}}", pads[1], pads[3]);
            one_op("fp.max_pool1d", &attrs, &[tensor(&[n, c, w], &element)], &[tensor(&[n, c, ow as usize], &element)])
        } else {
            let Ok(oh) = out(h, kh, sh, pads[0], pads[2], dh) else { return Ok(()) };
            let attrs = format!(
                "{{kernel = [{kh}, {kw}], stride = [{sh}, {sw}], dilation = [{dh}, {dw}], pad = [{}, {}, {}, {}], ceil_mode = {ceil}}}",
                pads[0], pads[1], pads[2], pads[3]
            );
            one_op("fp.max_pool2d", &attrs, &[tensor(&[n, c, h, w], &element)], &[tensor(&[n, c, oh as usize, ow as usize], &element)])
        };
        check_qir(&text, seed);
    }

    #[test]
    fn lookups_bit_exactly(
        shape in proptest::collection::vec(1usize..9, 0..4),
        (qin, qout) in (quant_near(0.5, &STORAGES), quant_near(0.25, &STORAGES)),
        entries in proptest::collection::vec(any::<u64>(), 256),
        seed in any::<u64>(),
    ) {
        if !avx2_here("lookups_bit_exactly") { return Ok(()); }
        let range = |q: &Quant| STORAGES.iter().find(|s| s.0 == q.storage).map(|s| (s.1, s.2)).unwrap();
        let ((lo, hi), (out_lo, out_hi)) = (range(&qin), range(&qout));
        let table: Vec<String> = entries[..(hi - lo + 1) as usize]
            .iter()
            .map(|e| (out_lo + (*e % (out_hi - out_lo + 1) as u64) as i64).to_string())
            .collect();
        let attrs = format!("{{table = dense<[{}]> : tensor<{}xi32>}}", table.join(", "), table.len());
        let text = one_op("qnn.lookup", &attrs, &[tensor(&shape, &qin.text())], &[tensor(&shape, &qout.text())]);
        check_qir(&text, seed);
    }

    #[test]
    fn data_movement_bit_exactly(
        shape in proptest::collection::vec(1usize..7, 1..5),
        perm_seed in any::<u64>(),
        element_pick in 0usize..4,
        q in quant_near(0.5, &STORAGES[..4]),
        slice in proptest::collection::vec((-8i64..8, -8i64..8, prop_oneof![1i64..4, -3i64..0]), 4),
        pads in proptest::collection::vec(0usize..4, 8),
        seed in any::<u64>(),
    ) {
        if !avx2_here("data_movement_bit_exactly") { return Ok(()); }
        let rank = shape.len();
        let element = if element_pick == 0 { "f32".to_string() } else { q.text() };
        let input = tensor(&shape, &element);
        // transpose by a permutation drawn from perm_seed
        let mut perm: Vec<usize> = (0..rank).collect();
        let mut state = perm_seed;
        for i in (1..rank).rev() {
            perm.swap(i, (state % (i as u64 + 1)) as usize);
            state /= i as u64 + 1;
        }
        let permuted: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
        let perm_text: Vec<String> = perm.iter().map(|p| p.to_string()).collect();
        check_qir(&one_op("fp.transpose", &format!("{{perm = [{}]}}", perm_text.join(", ")), std::slice::from_ref(&input), &[tensor(&permuted, &element)]), seed);
        // strided slice over every axis
        let (begin, end, strides): (Vec<i64>, Vec<i64>, Vec<i64>) =
            (slice[..rank].iter().map(|s| s.0).collect(), slice[..rank].iter().map(|s| s.1).collect(), slice[..rank].iter().map(|s| s.2).collect());
        let sliced: Vec<usize> = (0..rank).map(|d| qopt_dialect_fp::slice_len(shape[d] as i64, begin[d], end[d], strides[d]) as usize).collect();
        let list = |v: &[i64]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ");
        let attrs = format!("{{begin = [{}], end = [{}], strides = [{}]}}", list(&begin), list(&end), list(&strides));
        check_qir(&one_op("fp.strided_slice", &attrs, std::slice::from_ref(&input), &[tensor(&sliced, &element)]), seed);
        // split along the last axis in two
        let last = shape[rank - 1];
        let cut = (seed as usize) % (last + 1);
        let (mut first, mut second) = (shape.clone(), shape.clone());
        first[rank - 1] = cut;
        second[rank - 1] = last - cut;
        check_qir(&one_op("fp.split", &format!("{{axis = -1, sizes = [{cut}, {}]}}", last - cut), std::slice::from_ref(&input), &[tensor(&first, &element), tensor(&second, &element)]), seed);
        // constant pad
        let padded: Vec<usize> = (0..rank).map(|d| shape[d] + pads[d] + pads[4 + d]).collect();
        let pad_list: Vec<String> = pads[..rank].iter().chain(&pads[4..4 + rank]).map(|p| p.to_string()).collect();
        let value = if element_pick == 0 { "value = 2.5, " } else { "" };
        check_qir(&one_op("fp.pad", &format!("{{{value}pads = [{}]}}", pad_list.join(", ")), std::slice::from_ref(&input), &[tensor(&padded, &element)]), seed);
        // relu
        check_qir(&one_op("fp.relu", "", std::slice::from_ref(&input), &[tensor(&shape, &element)]), seed);
    }
}

proptest! {
    #![proptest_config(cases())]

    #[test]
    fn nearest_resizes_bit_exactly(
        shape in proptest::collection::vec(1usize..7, 1..5),
        scales in proptest::collection::vec(proptest::sample::select(vec![1.0f64, 1.0, 2.0, 3.0, 0.5, 1.5, 0.3, 2.7, 0.75]), 4),
        coordinates in proptest::sample::select(vec!["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn"]),
        nearest in proptest::sample::select(vec!["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]),
        q in quant_near(0.5, &STORAGES),
        float in any::<bool>(),
        seed in any::<u64>(),
    ) {
        if !avx2_here("nearest_resizes_bit_exactly") { return Ok(()); }
        let rank = shape.len();
        let element = if float { "f32".to_string() } else { q.text() };
        let out: Vec<usize> = (0..rank).map(|d| (shape[d] as f64 * scales[d]).floor() as usize).collect();
        let list = |v: Vec<String>| v.join(", ");
        let attrs = format!(
            "{{sizes = [{}], scales = [{}], mode = \"nearest\", coordinate_transformation_mode = \"{coordinates}\", nearest_mode = \"{nearest}\"}}",
            list(vec!["-1".to_string(); rank]),
            list(scales[..rank].iter().map(|s| format!("{s:?}")).collect()),
        );
        check_qir(&one_op("fp.resize", &attrs, &[tensor(&shape, &element)], &[tensor(&out, &element)]), seed);
    }
}

/// A small quantized network of the ops above, through the arena: the
/// intermediate values share it, every kernel reads another's output.
#[test]
fn a_chain_of_every_kernel_runs_bit_exactly() {
    if !avx2_here("a_chain_of_every_kernel_runs_bit_exactly") {
        return;
    }
    let a = "!qnn.uniform<u8:f32, 0.05:128>";
    let b = "!qnn.uniform<i8:f32, 0.031:-7>";
    let c = "!qnn.uniform<i8:f32, 0.07:3>";
    let text = format!(
        "module {{
  func.func @main(%x: tensor<1x8x9x9xf32>, %y: tensor<1x8x1x1xf32>) -> (tensor<1x16x1x1x{c}>, tensor<1x9x9x4x{b}>) {{
    %q = qnn.quantize(%x) : (tensor<1x8x9x9xf32>) -> tensor<1x8x9x9x{a}>
    %p = qnn.quantize(%y) : (tensor<1x8x1x1xf32>) -> tensor<1x8x1x1x{b}>
    %s = qnn.add(%q, %p) {{rounding = \"half_to_even\"}} : (tensor<1x8x9x9x{a}>, tensor<1x8x1x1x{b}>) -> tensor<1x8x9x9x{b}>
    %m = qnn.mul(%s, %q) : (tensor<1x8x9x9x{b}>, tensor<1x8x9x9x{a}>) -> tensor<1x8x9x9x{b}>
    %r = fp.relu(%m) : (tensor<1x8x9x9x{b}>) -> tensor<1x8x9x9x{b}>
    %mp = fp.max_pool2d(%r) {{kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]}} : (tensor<1x8x9x9x{b}>) -> tensor<1x8x5x5x{b}>
    %ap = qnn.avg_pool2d(%mp) {{kernel = [2, 2], stride = [2, 2], count_include_pad = true, pad = [0, 0, 1, 1]}} : (tensor<1x8x5x5x{b}>) -> tensor<1x8x3x3x{c}>
    %g1 = qnn.global_avg_pool2d(%ap) : (tensor<1x8x3x3x{c}>) -> tensor<1x8x1x1x{c}>
    %g2 = qnn.global_avg_pool2d(%s) : (tensor<1x8x9x9x{b}>) -> tensor<1x8x1x1x{a}>
    %cat = qnn.concat(%g1, %g2) {{axis = 1}} : (tensor<1x8x1x1x{c}>, tensor<1x8x1x1x{a}>) -> tensor<1x16x1x1x{c}>
    %t = fp.transpose(%m) {{perm = [0, 2, 3, 1]}} : (tensor<1x8x9x9x{b}>) -> tensor<1x9x9x8x{b}>
    %h:2 = fp.split(%t) {{axis = 3, sizes = [4, 4]}} : (tensor<1x9x9x8x{b}>) -> (tensor<1x9x9x4x{b}>, tensor<1x9x9x4x{b}>)
    %l = qnn.lookup(%h#1) {{table = dense<[{}]> : tensor<256xi32>}} : (tensor<1x9x9x4x{b}>) -> tensor<1x9x9x4x{b}>
    func.return %cat, %l : tensor<1x16x1x1x{c}>, tensor<1x9x9x4x{b}>
  }}
}}",
        (0..256).map(|i| ((i * 37) % 256 - 128).to_string()).collect::<Vec<_>>().join(", ")
    );
    for seed in 0..3 {
        check_qir(&text, seed);
    }
}

/// `@main(%x) = qnn.prelu(%x, slope)` with the slope a constant of
/// `slope_shape`.
fn prelu_text(
    shape: &[usize],
    slope_shape: &[usize],
    slopes: &[f32],
    tin: &str,
    tout: &str,
    rounding: &str,
) -> String {
    let dims = |s: &[usize]| s.iter().map(usize::to_string).collect::<Vec<_>>().join("x");
    let st = if slope_shape.is_empty() {
        "tensor<f32>".to_string()
    } else {
        format!("tensor<{}xf32>", dims(slope_shape))
    };
    let hex: String = slopes.iter().flat_map(|v| v.to_le_bytes()).map(|b| format!("{b:02X}")).collect();
    let value = format!("\"0x{hex}\"");
    let (xt, yt) = (format!("tensor<{}x{tin}>", dims(shape)), format!("tensor<{}x{tout}>", dims(shape)));
    format!(
        "module {{\n  func.func @main(%x: {xt}) -> {yt} {{\n    %s = fp.constant() {{value = dense<{value}> : {st}}} : () -> {st}\n    \
         %r = qnn.prelu(%x, %s) {{rounding = \"{rounding}\"}} : ({xt}, {st}) -> {yt}\n    func.return %r : {yt}\n  }}\n}}\n"
    )
}

/// `qnn.prelu` (§7.6) with one slope, one per channel (a zero and negative
/// ones among them) and one per last index, signed and unsigned storage,
/// every rounding: the compiled kernel's bytes are the interpreter's; a slope
/// that varies along two axes runs by a host call, bit-exact too.
#[test]
fn prelu_matches_the_interpreter() {
    if !avx2_here("prelu_matches_the_interpreter") {
        return;
    }
    let cases: [(&[usize], &[usize], &[f32]); 4] = [
        (&[2, 37], &[], &[0.25]),
        (&[1, 3, 5, 7], &[3, 1, 1], &[0.1, -0.75, 0.0]),
        (&[2, 4, 9], &[4, 1], &[1.5, 0.01, -2.0, 0.3]),
        (&[3, 5], &[5], &[0.2, -0.2, 0.0, 3.0, 0.5]),
    ];
    let storages = [
        ("!qnn.uniform<i8:f32, 0.05:3>", "!qnn.uniform<i8:f32, 0.04:-5>"),
        ("!qnn.uniform<u8:f32, 0.1:128>", "!qnn.uniform<u8:f32, 0.02:100>"),
        ("!qnn.uniform<i8:f32, 0.5:-128>", "!qnn.uniform<i8<-127:127>:f32, 0.001:0>"),
    ];
    let mut seed = 7;
    for (shape, slope_shape, slopes) in cases {
        for (tin, tout) in storages {
            for rounding in ["half_away_from_zero", "half_to_even", "half_up"] {
                seed += 1;
                check_qir(&prelu_text(shape, slope_shape, slopes, tin, tout, rounding), seed);
            }
        }
    }
    let (tin, tout) = storages[0];
    let two_axes = prelu_text(&[2, 3], &[2, 3], &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], tin, tout, "half_up");
    let mut ctx = context();
    let module = parse(&mut ctx, &two_axes);
    let program = compile_here(&ctx, &module, "main");
    assert!(program.host_ops[0].reason.contains("one per index of one axis"), "{:?}", program.host_ops);
    check_qir(&two_axes, 3);
}
