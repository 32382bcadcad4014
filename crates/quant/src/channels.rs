//! Per-channel views of a C-order tensor's values (the runs of values that
//! lie in one index of an axis) and the reductions over them the data passes
//! share: a layer result's values checked against its channel count, and
//! per-channel sums.

use qopt_interp::Tensor;

/// The runs of `values` (a C-order tensor of `shape`) that each lie in one
/// index of `axis`, with that index: `(channel, run)`, in memory order.
pub fn channel_blocks<'v, T>(
    values: &'v [T],
    shape: &[usize],
    axis: usize,
) -> impl Iterator<Item = (usize, &'v [T])> + 'v {
    let (channels, inner) = channel_runs(shape, axis);
    values.chunks(inner).enumerate().map(move |(block, run)| (block % channels, run))
}

/// [`channel_blocks`] with the runs writable.
pub fn channel_blocks_mut<'v, T>(
    values: &'v mut [T],
    shape: &[usize],
    axis: usize,
) -> impl Iterator<Item = (usize, &'v mut [T])> + 'v {
    let (channels, inner) = channel_runs(shape, axis);
    values.chunks_mut(inner).enumerate().map(move |(block, run)| (block % channels, run))
}

/// The number of channels on `axis` and the length of a run within one channel.
fn channel_runs(shape: &[usize], axis: usize) -> (usize, usize) {
    let channels = shape.get(axis).copied().unwrap_or(1).max(1);
    let inner = shape.get(axis + 1..).map_or(1, |d| d.iter().product::<usize>()).max(1);
    (channels, inner)
}

/// The values of `tensor`, a layer result with `channels` channels on
/// `axis`, as a contiguous f32 slice; an error naming what is wrong.
pub fn result_values(tensor: &Tensor, axis: usize, channels: usize) -> Result<&[f32], String> {
    let shape = tensor.shape();
    if shape.get(axis) != Some(&channels) {
        return Err(format!("a result of shape {shape:?} does not have {channels} channels on axis {axis}"));
    }
    tensor
        .as_f32()
        .and_then(|a| a.as_slice())
        .ok_or_else(|| format!("the result is a {} tensor, not a contiguous f32 one", tensor.dtype()))
}

/// The sum of each of the `channels` channels on `axis` of `values` (a
/// C-order tensor of `shape`), in f64.
pub fn channel_sums<T: Copy + Into<f64>>(
    values: &[T],
    shape: &[usize],
    axis: usize,
    channels: usize,
) -> Vec<f64> {
    let mut sums = vec![0.0f64; channels];
    for (channel, run) in channel_blocks(values, shape, axis) {
        sums[channel] += run.iter().map(|&v| v.into()).sum::<f64>();
    }
    sums
}
