//! Per-channel views of a C-order tensor's values: the runs of values that
//! lie in one index of an axis.

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
