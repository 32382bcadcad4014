//! [`LayerInputs`]: the second moments of the input patches a weighted layer
//! multiplies its weight rows by, accumulated over calibration data, for
//! `round-weights` (`round_weights.rs`, `adaround.rs`).
//!
//! Output channel `o` of an `fp.dense` or a convolution computes `w_o · p`
//! for every input patch `p` (a row of the dense's input, a window of the
//! convolution's input in im2col order: input channel of the group, then
//! kernel row, then kernel column, zero where the window reads padding). The
//! squared error that changing `w_o` to `w̃_o` causes over patches `P` is
//! `(w̃_o − w_o) · (P Pᵀ) · (w̃_o − w_o)ᵀ`, so the K×K Gram matrix `P Pᵀ`
//! (K = taps per group) and the patch sum (for the mean error, which a bias
//! absorbs) are all the optimization needs, whatever the number of samples.
//! A grouped convolution has one of each per group; the output channels of
//! group `g` read only its patches.
//!
//! Sums are in f64 and only the upper triangle is accumulated
//! ([`LayerInputs::finish`] mirrors it). Partial sums over chunks of calls
//! are added in chunk order by the caller, so the result does not depend on
//! the thread count. Non-finite inputs are an error (naming the element).

use qopt_dialect_fp::attrs::ConvAttrs;
use qopt_ir_core::{Context, Module, OpId};

/// How a layer reads its input: which values each output value's dot product takes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Window {
    /// `fp.dense`: the last dimension of the input, `k` values.
    Dense { k: usize },
    /// `fp.conv2d` (or `fp.conv1d` as height 1) with an O×(C/g)×kh×kw weight.
    Conv {
        /// Channel groups.
        groups: usize,
        /// Input channels per group.
        group_channels: usize,
        /// Kernel height and width.
        kernel: [usize; 2],
        /// Steps along height and width.
        stride: [usize; 2],
        /// top, left, bottom, right.
        pad: [usize; 4],
        /// Kernel dilation along height and width.
        dilation: [usize; 2],
    },
}

impl Window {
    /// The window of `op` (an `fp.dense`, `fp.conv2d` or `fp.conv1d`) with a
    /// weight of shape `weight`; `None` for other ops.
    pub fn of(ctx: &Context, module: &Module, op: OpId, weight: &[usize]) -> Result<Option<Window>, String> {
        let name = ctx.op_name_str(module.op_name(op));
        let spatial = match name {
            qopt_dialect_fp::op_names::DENSE => {
                let &[_, k] = weight else { return Err(format!("the dense weight has shape {weight:?}")) };
                return Ok(Some(Window::Dense { k }));
            }
            qopt_dialect_fp::op_names::CONV2D => 2,
            qopt_dialect_fp::op_names::CONV1D => 1,
            _ => return Ok(None),
        };
        if weight.len() != spatial + 2 {
            return Err(format!("the convolution weight has shape {weight:?}"));
        }
        let a = ConvAttrs::read_in(ctx, module.op_attrs(op), spatial)?;
        let u = |v: i64| usize::try_from(v).map_err(|_| format!("window parameter {v} is negative"));
        let groups = u(a.groups)?;
        let window = if spatial == 2 {
            Window::Conv {
                groups,
                group_channels: weight[1],
                kernel: [weight[2], weight[3]],
                stride: [u(a.stride[0])?, u(a.stride[1])?],
                pad: [u(a.pad[0])?, u(a.pad[1])?, u(a.pad[2])?, u(a.pad[3])?],
                dilation: [u(a.dilation[0])?, u(a.dilation[1])?],
            }
        } else {
            Window::Conv {
                groups,
                group_channels: weight[1],
                kernel: [1, weight[2]],
                stride: [1, u(a.stride[0])?],
                pad: [0, u(a.pad[0])?, 0, u(a.pad[1])?],
                dilation: [1, u(a.dilation[0])?],
            }
        };
        if weight.contains(&0) {
            return Err(format!("the convolution weight has an empty dimension: {weight:?}"));
        }
        if groups == 0 || !weight[0].is_multiple_of(groups) {
            return Err(format!("{} output channels do not split into {groups} groups", weight[0]));
        }
        Ok(Some(window))
    }

    /// Weights per output channel: the length K of a patch.
    pub fn taps(&self) -> usize {
        match *self {
            Window::Dense { k } => k,
            Window::Conv { group_channels, kernel: [kh, kw], .. } => group_channels * kh * kw,
        }
    }

    /// Channel groups (1 for a dense).
    pub fn groups(&self) -> usize {
        match *self {
            Window::Dense { .. } => 1,
            Window::Conv { groups, .. } => groups,
        }
    }
}

/// Per group, the Gram matrix and sum of a layer's input patches (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LayerInputs {
    /// How the layer reads its input.
    pub window: Window,
    /// Patches seen per group.
    pub patches: u64,
    /// Per group, K×K row-major: Σ p pᵀ (upper triangle until [`finish`](Self::finish)).
    pub gram: Vec<Vec<f64>>,
    /// Per group, Σ p.
    pub sums: Vec<Vec<f64>>,
}

impl LayerInputs {
    /// No patches yet.
    pub fn new(window: Window) -> LayerInputs {
        let (k, groups) = (window.taps(), window.groups());
        LayerInputs {
            window,
            patches: 0,
            gram: vec![vec![0.0; k * k]; groups],
            sums: vec![vec![0.0; k]; groups],
        }
    }

    /// Adds the patches of one input tensor (C-order `values` of `shape`).
    pub fn add(&mut self, values: &[f32], shape: &[usize]) -> Result<(), String> {
        if let Some(at) = values.iter().position(|v| !v.is_finite()) {
            return Err(format!("element {at} of the layer's input is {}", values[at]));
        }
        let k = self.window.taps();
        match self.window.clone() {
            Window::Dense { .. } => {
                if shape.last() != Some(&k) {
                    return Err(format!("the dense layer's input has shape {shape:?}, not …×{k}"));
                }
                let rows = values.len() / k.max(1);
                // Patches as rows of a K × rows matrix.
                let mut patches = vec![0.0f64; k * rows];
                for (r, row) in values.chunks_exact(k).enumerate() {
                    for (i, &v) in row.iter().enumerate() {
                        patches[i * rows + r] = f64::from(v);
                    }
                }
                accumulate(&mut self.gram[0], &mut self.sums[0], &patches, k, rows);
                self.patches += rows as u64;
            }
            Window::Conv { groups, group_channels, kernel, stride, pad, dilation } => {
                let (n, c, h, w) = match *shape {
                    [n, c, h, w] => (n, c, h, w),
                    [n, c, l] => (n, c, 1, l),
                    _ => return Err(format!("the convolution's input has shape {shape:?}")),
                };
                if c * h * w == 0 {
                    return Ok(());
                }
                if c != groups * group_channels {
                    return Err(format!("the input has {c} channels, not {groups}·{group_channels}"));
                }
                let out = |size: usize, k: usize, s: usize, lo: usize, hi: usize, d: usize| {
                    let reach = d * (k - 1) + 1;
                    (size + lo + hi).checked_sub(reach).map(|v| v / s + 1).unwrap_or(0)
                };
                let oh = out(h, kernel[0], stride[0], pad[0], pad[2], dilation[0]);
                let ow = out(w, kernel[1], stride[1], pad[1], pad[3], dilation[1]);
                let columns = oh * ow;
                let mut patches = vec![0.0f64; k * columns];
                for sample in values.chunks_exact(c * h * w).take(n) {
                    for g in 0..groups {
                        let planes = &sample[g * group_channels * h * w..(g + 1) * group_channels * h * w];
                        unfold(
                            planes,
                            &mut patches,
                            [group_channels, h, w],
                            kernel,
                            [oh, ow],
                            stride,
                            pad,
                            dilation,
                        );
                        accumulate(&mut self.gram[g], &mut self.sums[g], &patches, k, columns);
                    }
                }
                self.patches += (n * columns) as u64;
            }
        }
        Ok(())
    }

    /// Adds the patches of `later`.
    pub fn merge(&mut self, later: &LayerInputs) {
        self.patches += later.patches;
        for (a, b) in self.gram.iter_mut().zip(&later.gram) {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
        for (a, b) in self.sums.iter_mut().zip(&later.sums) {
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
    }

    /// Fills the lower triangle of each Gram matrix from the upper one.
    pub fn finish(&mut self) {
        let k = self.window.taps();
        for gram in &mut self.gram {
            for i in 0..k {
                for j in 0..i {
                    gram[i * k + j] = gram[j * k + i];
                }
            }
        }
    }
}

/// `gram[i][j] += Σ_c p[i][c]·p[j][c]` for j ≥ i and `sums[i] += Σ_c p[i][c]`,
/// for `patches` a K × `columns` row-major matrix.
fn accumulate(gram: &mut [f64], sums: &mut [f64], patches: &[f64], k: usize, columns: usize) {
    if columns == 0 {
        return;
    }
    for i in 0..k {
        let row = &patches[i * columns..(i + 1) * columns];
        sums[i] += row.iter().sum::<f64>();
        for j in i..k {
            gram[i * k + j] += dot(row, &patches[j * columns..(j + 1) * columns]);
        }
    }
}

/// `a · b` in four interleaved partial sums (so it vectorizes; the result
/// depends only on the values). Also the K² inner loop of `adaround.rs`.
pub(crate) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 4];
    let (ca, cb) = (a.chunks_exact(4), b.chunks_exact(4));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..4 {
            lanes[l] += x[l] * y[l];
        }
    }
    (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]) + tail
}

/// The im2col unfolding of one group's input planes (`cg`×`h`×`w`) into
/// `patches`, a (cg·kh·kw) × (oh·ow) row-major matrix, zero where a window
/// reads padding.
#[allow(clippy::too_many_arguments)] // the window's parameters, each a small array
fn unfold(
    planes: &[f32],
    patches: &mut [f64],
    [cg, h, w]: [usize; 3],
    [kh, kw]: [usize; 2],
    [oh, ow]: [usize; 2],
    [sh, sw]: [usize; 2],
    [pt, pl, _, _]: [usize; 4],
    [dh, dw]: [usize; 2],
) {
    let columns = oh * ow;
    for ci in 0..cg {
        let plane = &planes[ci * h * w..(ci + 1) * h * w];
        for ki in 0..kh {
            for kj in 0..kw {
                let row = &mut patches[((ci * kh + ki) * kw + kj) * columns..][..columns];
                for oy in 0..oh {
                    let iy = (oy * sh + ki * dh) as isize - pt as isize;
                    for ox in 0..ow {
                        let ix = (ox * sw + kj * dw) as isize - pl as isize;
                        let inside = iy >= 0 && (iy as usize) < h && ix >= 0 && (ix as usize) < w;
                        row[oy * ow + ox] =
                            if inside { f64::from(plane[iy as usize * w + ix as usize]) } else { 0.0 };
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every patch of a convolution, by the definition, for comparison.
    fn naive_patches(x: &[f32], window: &Window, [c, h, w]: [usize; 3]) -> Vec<Vec<Vec<f64>>> {
        let Window::Conv { groups, group_channels, kernel, stride, pad, dilation } = window.clone() else {
            unreachable!("a convolution window")
        };
        let _ = c;
        let mut per_group = vec![Vec::new(); groups];
        let oh = (h + pad[0] + pad[2] - dilation[0] * (kernel[0] - 1) - 1) / stride[0] + 1;
        let ow = (w + pad[1] + pad[3] - dilation[1] * (kernel[1] - 1) - 1) / stride[1] + 1;
        for (g, patches) in per_group.iter_mut().enumerate() {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut p = Vec::new();
                    for ci in 0..group_channels {
                        for ki in 0..kernel[0] {
                            for kj in 0..kernel[1] {
                                let iy = (oy * stride[0] + ki * dilation[0]) as isize - pad[0] as isize;
                                let ix = (ox * stride[1] + kj * dilation[1]) as isize - pad[1] as isize;
                                let v = if iy >= 0 && iy < h as isize && ix >= 0 && ix < w as isize {
                                    x[((g * group_channels + ci) * h + iy as usize) * w + ix as usize]
                                } else {
                                    0.0
                                };
                                p.push(f64::from(v));
                            }
                        }
                    }
                    patches.push(p);
                }
            }
        }
        per_group
    }

    #[test]
    fn conv_gram_matches_the_patches() {
        let window = Window::Conv {
            groups: 2,
            group_channels: 2,
            kernel: [3, 2],
            stride: [2, 1],
            pad: [1, 0, 1, 1],
            dilation: [1, 2],
        };
        let (c, h, w) = (4, 5, 6);
        let x: Vec<f32> = (0..c * h * w).map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.125).collect();
        let mut inputs = LayerInputs::new(window.clone());
        inputs.add(&x, &[1, c, h, w]).unwrap();
        inputs.finish();
        let k = window.taps();
        for (g, patches) in naive_patches(&x, &window, [c, h, w]).iter().enumerate() {
            assert_eq!(inputs.patches, patches.len() as u64);
            for i in 0..k {
                let sum: f64 = patches.iter().map(|p| p[i]).sum();
                assert_eq!(inputs.sums[g][i], sum);
                for j in 0..k {
                    let gram: f64 = patches.iter().map(|p| p[i] * p[j]).sum();
                    assert!((inputs.gram[g][i * k + j] - gram).abs() < 1e-9, "group {g} ({i}, {j})");
                }
            }
        }
    }

    #[test]
    fn dense_gram_is_xt_x_and_merging_adds() {
        let x = [1.0f32, 2.0, -1.0, 0.5, 3.0, 0.0];
        let mut whole = LayerInputs::new(Window::Dense { k: 2 });
        whole.add(&x, &[3, 2]).unwrap();
        let mut parts = LayerInputs::new(Window::Dense { k: 2 });
        for row in x.chunks(2) {
            let mut part = LayerInputs::new(Window::Dense { k: 2 });
            part.add(row, &[1, 2]).unwrap();
            parts.merge(&part);
        }
        assert_eq!(whole, parts);
        whole.finish();
        // Xᵀ X of rows (1, 2), (−1, 0.5), (3, 0).
        assert_eq!(whole.gram[0], vec![11.0, 1.5, 1.5, 4.25]);
        assert_eq!(whole.sums[0], vec![3.0, 2.5]);
        assert_eq!(whole.patches, 3);
    }

    #[test]
    fn bad_inputs_are_errors() {
        let mut inputs = LayerInputs::new(Window::Dense { k: 2 });
        let e = inputs.add(&[1.0, f32::NAN], &[1, 2]).unwrap_err();
        assert!(e.contains("element 1") && e.contains("NaN"), "{e}");
        let e = inputs.add(&[1.0, 2.0, 3.0], &[1, 3]).unwrap_err();
        assert!(e.contains("not …×2"), "{e}");
    }
}
