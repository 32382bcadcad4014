//! [`Histogram`]: equal-width bins of observed values whose counts merge
//! exactly, in any order.
//!
//! **The grid.** Bin edges are integer multiples of a power-of-two width
//! `w = 2^e`: bin `i` covers `[(j + i)·w, (j + i + 1)·w)` for an integer offset
//! `j`. The width is the smallest power of two (at least 2^−126) for which
//! `bins` bins starting at `j = floor(min(lo, 0) / w)` reach past `hi` and up
//! to at least 0, where `[lo, hi]` is the range of every value seen: the range
//! always contains 0, as a bin edge (when every value is negative, 0 may be the
//! upper edge of the last bin). So the state is a function of the multiset of
//! values alone:
//!
//! - when the range grows, `w` only grows (by powers of two), every old bin
//!   lies inside one new bin, and re-binning adds integer counts: no drift;
//! - merging two histograms re-bins both onto the grid of the union's range and
//!   adds counts, so chunks merged in any order, one thread or two, and "A then
//!   B" or "A + B" all give the same counts, width and offset.
//!
//! Because 0 is always inside the range and a bin edge, `hist_min = j·w` and
//! `hist_max = (j + bins)·w` are exact f32 values, which is how the grid is
//! stored in the IR (a range whose edges would not fit in f32, from values of
//! magnitude near `f32::MAX`, from about 2^127 on depending on `bins`, is an
//! error). A stored histogram that is not on
//! the grid (written by hand or by another tool) is accepted as it is; values
//! inside its range `[hist_min, hist_max]` are counted into its bins, and values
//! outside it are an error, since it cannot be re-binned exactly. A stored
//! histogram whose counts are all 0 holds no data and loads as an empty one.
//!
//! With a single bin the range is one grid cell, which cannot hold both
//! negative values and values ≥ 0 (0 is a bin edge): that is an error.
//!
//! Every value must be finite (an error otherwise; calibration rejects NaN and
//! ±inf first), and counts never exceed `i64::MAX` in total (an error too).

/// The smallest bin width used, 2^−126 (the smallest normal f32).
const MIN_EXPONENT: i32 = -126;

/// A histogram of observed values; see the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    counts: Vec<i64>,
    layout: Layout,
    /// The sum of `counts`, kept so adding a batch does not sum every bin.
    total: i64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Layout {
    /// Nothing observed yet.
    Empty,
    /// On the power-of-two grid: width `2^exponent`, first edge `offset · width`.
    Grid { exponent: i32, offset: i64 },
    /// A stored histogram off the grid: `[lo, hi]` in equal bins.
    Fixed { lo: f64, hi: f64 },
}

/// `2^e` as f64 (exact for the exponents used here).
fn pow2(e: i32) -> f64 {
    f64::powi(2.0, e)
}

impl Histogram {
    /// An empty histogram of `bins` bins (at least 1).
    pub fn empty(bins: usize) -> Histogram {
        Histogram { counts: vec![0; bins.max(1)], layout: Layout::Empty, total: 0 }
    }

    /// A histogram read back from the IR: `counts` over `[hist_min, hist_max]`.
    pub fn from_stored(counts: Vec<i64>, hist_min: f32, hist_max: f32) -> Result<Histogram, String> {
        if counts.is_empty() {
            return Err("'histogram' has no bins".into());
        }
        if counts.iter().any(|&c| c < 0) {
            return Err("'histogram' counts must be at least 0".into());
        }
        let total = counts.iter().try_fold(0i64, |sum, &c| sum.checked_add(c));
        let Some(total) = total else {
            return Err(format!("'histogram' counts add up to more than {}", i64::MAX));
        };
        let (lo, hi) = (hist_min as f64, hist_max as f64);
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(format!("'hist_min' ({lo}) and 'hist_max' ({hi}) are not a finite range"));
        }
        let layout = if total == 0 {
            // No data: nothing to keep of the stored range.
            Layout::Empty
        } else {
            grid_layout(lo, hi, counts.len()).unwrap_or(Layout::Fixed { lo, hi })
        };
        Ok(Histogram { counts, layout, total })
    }

    /// Number of bins.
    pub fn bins(&self) -> usize {
        self.counts.len()
    }

    /// The count of each bin.
    pub fn counts(&self) -> &[i64] {
        &self.counts
    }

    /// Total count.
    pub fn total(&self) -> i64 {
        // Never overflows: every way of filling a histogram checks the total.
        self.total
    }

    /// Lower edge of the first bin (0 when empty).
    pub fn hist_min(&self) -> f32 {
        self.edge(0) as f32
    }

    /// Upper edge of the last bin (0 when empty).
    pub fn hist_max(&self) -> f32 {
        self.edge(self.counts.len()) as f32
    }

    /// Width of one bin (0 when empty).
    pub fn bin_width(&self) -> f64 {
        match self.layout {
            Layout::Empty => 0.0,
            Layout::Grid { exponent, .. } => pow2(exponent),
            Layout::Fixed { lo, hi } => (hi - lo) / self.counts.len() as f64,
        }
    }

    /// Lower edge of bin `i` (`i = bins` gives the upper edge of the last).
    pub fn edge(&self, i: usize) -> f64 {
        match self.layout {
            Layout::Empty => 0.0,
            Layout::Grid { exponent, offset } => (offset + i as i64) as f64 * pow2(exponent),
            Layout::Fixed { lo, hi } => {
                if i == self.counts.len() {
                    hi
                } else {
                    lo + (hi - lo) * i as f64 / self.counts.len() as f64
                }
            }
        }
    }

    /// Whether the histogram is on the power-of-two grid (or empty).
    pub fn on_grid(&self) -> bool {
        !matches!(self.layout, Layout::Fixed { .. })
    }

    /// Counts `values`, which must all be finite. On an error the histogram is
    /// unchanged.
    pub fn add(&mut self, values: &[f32]) -> Result<(), String> {
        self.add_observed(values).map(|_| ())
    }

    /// [`Histogram::add`], also returning the smallest and largest value
    /// counted (`None` for no values), which observers keep anyway.
    pub fn add_observed(&mut self, values: &[f32]) -> Result<Option<(f32, f32)>, String> {
        match min_max(values)? {
            Some(range) => self.add_in_range(values, range),
            None => Ok(None),
        }
    }

    /// [`Histogram::add_observed`] for finite `values` whose smallest and
    /// largest value the caller already knows (`range`, as [`value_range`]
    /// computes it; a wrong range is an error or miscounts, never a panic).
    ///
    /// [`value_range`]: super::methods::value_range
    pub fn add_in_range(
        &mut self,
        values: &[f32],
        (lo, hi): (f32, f32),
    ) -> Result<Option<(f32, f32)>, String> {
        if values.is_empty() {
            return Ok(None);
        }
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err("a histogram only counts finite values (got NaN or an infinity)".into());
        }
        self.check_total(values.len() as i64)?;
        self.cover(lo as f64, hi as f64, MIN_EXPONENT)?;
        match self.layout {
            // invariant: `cover` returned Ok, and it always leaves a Grid or Fixed layout.
            Layout::Empty => unreachable!("cover sets a layout"),
            Layout::Grid { exponent, offset } => {
                let last = self.counts.len() as i64 - 1;
                // x · 2^−e is exact, so its floor is the exact index of x's bin on
                // the grid (subtracting the offset first could round), computed
                // as truncation corrected below zero (see `grid_bins_f32`). With
                // bins no wider than 1 (e ≤ 0) f32 and i32 are exact and faster.
                if exponent <= 0 && exponent > -100 {
                    let inv = f32::powi(2.0, -exponent);
                    let offset = offset as i32;
                    self.tally(values, |block, out| grid_bins_f32(block, inv, offset, out));
                } else {
                    let inv = pow2(-exponent);
                    self.tally(values, |block, out| {
                        for (o, &v) in out.iter_mut().zip(block) {
                            let scaled = v as f64 * inv;
                            let truncated = scaled as i64;
                            let floor = truncated - i64::from((truncated as f64) > scaled);
                            *o = (floor - offset).clamp(0, last) as u32;
                        }
                    });
                }
            }
            Layout::Fixed { lo: from, hi: to } => {
                let scale = self.counts.len() as f64 / (to - from);
                let last = self.counts.len() - 1;
                for &v in values {
                    // NaN (from a zero-width range) goes to bin 0 through max.
                    let bin = (((v as f64 - from) * scale).floor().max(0.0) as usize).min(last);
                    self.counts[bin] += 1;
                }
            }
        }
        self.total += values.len() as i64;
        Ok(Some((lo, hi)))
    }

    /// Adds one to the bin of every value: `bins_of(block, out)` writes the
    /// bins of a block of values into `out` (a loop of plain arithmetic, which
    /// vectorizes); they are then counted into four interleaved tallies, so
    /// that runs of one value (the zeros after a relu) do not wait on the
    /// previous increment. Bins past the last count in the last.
    fn tally(&mut self, values: &[f32], bins_of: impl Fn(&[f32], &mut [u32])) {
        const BLOCK: usize = 1024;
        let bins = self.counts.len();
        let last = bins as u32 - 1;
        let mut index = [0u32; BLOCK];
        if values.len() < bins || values.len() > u32::MAX as usize {
            // Fewer values than bins: the tallies would cost more than they save.
            for block in values.chunks(BLOCK) {
                let index = &mut index[..block.len()];
                bins_of(block, index);
                index.iter().for_each(|&i| self.counts[i.min(last) as usize] += 1);
            }
            return;
        }
        // u32 keeps the four tallies in L1 for 2,048 bins; a tensor has at most
        // 2^31 elements (the interpreter's limit), so no tally can overflow.
        let mut tally = vec![0u32; 4 * bins];
        let (first, rest) = tally.split_at_mut(bins);
        let (second, rest) = rest.split_at_mut(bins);
        let (third, fourth) = rest.split_at_mut(bins);
        for block in values.chunks(BLOCK) {
            let index = &mut index[..block.len()];
            bins_of(block, index);
            index.iter_mut().for_each(|i| *i = (*i).min(last));
            let mut quads = index.chunks_exact(4);
            for quad in &mut quads {
                first[quad[0] as usize] += 1;
                second[quad[1] as usize] += 1;
                third[quad[2] as usize] += 1;
                fourth[quad[3] as usize] += 1;
            }
            quads.remainder().iter().for_each(|&i| first[i as usize] += 1);
        }
        for (i, count) in self.counts.iter_mut().enumerate() {
            *count += i64::from(first[i]) + i64::from(second[i]) + i64::from(third[i]) + i64::from(fourth[i]);
        }
    }

    /// Adds the counts of `other` (same number of bins). On an error the
    /// histogram is unchanged.
    pub fn merge(&mut self, other: &Histogram) -> Result<(), String> {
        if other.counts.len() != self.counts.len() {
            return Err(format!(
                "cannot merge histograms of {} and {} bins",
                self.counts.len(),
                other.counts.len()
            ));
        }
        if other.total() == 0 {
            return Ok(());
        }
        self.check_total(other.total())?;
        match other.layout {
            Layout::Empty => Ok(()),
            Layout::Fixed { lo, hi } => {
                if self.layout == Layout::Empty || self.total() == 0 {
                    *self = other.clone();
                    return Ok(());
                }
                if self.layout == other.layout {
                    self.counts.iter_mut().zip(&other.counts).for_each(|(a, b)| *a += b);
                    self.total += other.total;
                    return Ok(());
                }
                Err(format!(
                    "a histogram over [{lo}, {hi}] is not on qopt's power-of-two grid and cannot be \
                     merged with other data exactly; calibrate it again from scratch"
                ))
            }
            Layout::Grid { exponent, offset } => {
                let Some((bottom, top)) = other.occupied() else { return Ok(()) };
                if let Layout::Fixed { lo, hi } = self.layout {
                    return Err(format!(
                        "a histogram on qopt's grid cannot be merged into the stored histogram over \
                         [{lo}, {hi}], which is not on it; calibrate it again from scratch"
                    ));
                }
                self.cover(bottom, top, exponent)?;
                // invariant: `self` was Empty or Grid (Fixed returned above) and `cover`
                // succeeded, which leaves a Grid.
                let Layout::Grid { exponent: to_exponent, offset: to_offset } = self.layout else {
                    unreachable!("cover of a grid or empty histogram gives a grid");
                };
                let shift = to_exponent - exponent;
                let last = self.counts.len() as i64 - 1;
                for (i, &c) in other.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
                    let bin = coarser(offset + i as i64, shift) - to_offset;
                    self.counts[bin.clamp(0, last) as usize] += c;
                }
                self.total += other.total;
                Ok(())
            }
        }
    }

    /// Fails if adding `more` to the total count would pass `i64::MAX`.
    fn check_total(&self, more: i64) -> Result<(), String> {
        match self.total().checked_add(more) {
            Some(_) => Ok(()),
            None => Err(format!("histogram counts would add up to more than {}", i64::MAX)),
        }
    }

    /// The lower edges of the first and last non-empty bins of a grid
    /// histogram: at any coarser width of the grid they fall in the same bins
    /// as the values counted there.
    fn occupied(&self) -> Option<(f64, f64)> {
        let Layout::Grid { exponent, offset } = self.layout else { return None };
        let first = self.counts.iter().position(|&c| c > 0)?;
        let last = self.counts.iter().rposition(|&c| c > 0)?;
        let w = pow2(exponent);
        Some(((offset + first as i64) as f64 * w, (offset + last as i64) as f64 * w))
    }

    /// Grows the layout so that `[lo, hi]` (and 0) fall into bins, with a width
    /// of at least `2^min_exponent`, re-binning the counts exactly. Changes
    /// nothing when it fails.
    fn cover(&mut self, lo: f64, hi: f64, min_exponent: i32) -> Result<(), String> {
        let (mut lo, mut hi) = (lo, hi);
        let bins = self.counts.len() as i64;
        let mut from = min_exponent.max(MIN_EXPONENT);
        match self.layout {
            Layout::Fixed { lo: have_lo, hi: have_hi } => {
                // The values themselves must lie in the stored range (0 need not).
                return if lo >= have_lo && hi <= have_hi {
                    Ok(())
                } else {
                    Err(format!(
                        "values in [{lo}, {hi}] fall outside the stored histogram's range \
                         [{have_lo}, {have_hi}], which is not on qopt's power-of-two grid and cannot be \
                         re-binned exactly; calibrate it again from scratch"
                    ))
                };
            }
            Layout::Empty => {}
            Layout::Grid { exponent, offset } => {
                let w = pow2(exponent);
                let (have_lo, have_hi) = (offset as f64 * w, (offset + bins) as f64 * w);
                if lo >= have_lo && hi < have_hi && exponent >= from {
                    return Ok(());
                }
                if let Some((bottom, top)) = self.occupied() {
                    lo = lo.min(bottom);
                    hi = hi.max(top);
                }
                from = from.max(exponent);
            }
        }
        let lo = lo.min(0.0);
        if bins == 1 && lo < 0.0 && hi >= 0.0 {
            return Err(format!(
                "a histogram of 1 bin cannot hold values in [{lo}, {hi}]: 0 is always a bin edge, so \
                 negative values and values ≥ 0 need at least 2 bins"
            ));
        }
        // The cells of lo and hi (0 counts as the cell below it when every value
        // is negative) must be fewer than `bins` apart.
        let fits = |exponent: i32| {
            let inv = pow2(-exponent);
            (hi * inv).floor().max(-1.0) - (lo * inv).floor() < bins as f64
        };
        // Fitting needs a width w with bins·w ≥ max(hi, 0) − lo, so
        // w > (max(hi, 0) − lo) / (bins + 1): start just below that.
        let estimate = ((hi.max(0.0) - lo) / (bins + 1) as f64).log2().floor();
        if estimate.is_finite() {
            from = from.max(estimate as i32);
        }
        let mut exponent = from;
        while !fits(exponent) {
            exponent += 1;
            if exponent > 128 {
                return Err(format!("values in [{lo}, {hi}] are too large to histogram"));
            }
        }
        let w = pow2(exponent);
        let offset = (lo / w).floor() as i64;
        let limit = f32::MAX as f64;
        if exponent > 127 || (offset as f64 * w) < -limit || (offset + bins) as f64 * w > limit {
            return Err(format!(
                "values in [{lo}, {hi}] are too large to histogram (its edges must be finite f32)"
            ));
        }
        if let Layout::Grid { exponent: old_exponent, offset: old_offset } = self.layout {
            let shift = exponent - old_exponent;
            let mut counts = vec![0i64; bins as usize];
            for (i, &c) in self.counts.iter().enumerate().filter(|(_, &c)| c > 0) {
                let bin = coarser(old_offset + i as i64, shift) - offset;
                counts[bin.clamp(0, bins - 1) as usize] += c;
            }
            self.counts = counts;
        }
        self.layout = Layout::Grid { exponent, offset };
        Ok(())
    }
}

/// The index of the cell holding cell `index` of a grid `shift ≥ 0` steps finer:
/// `floor(index / 2^shift)` (an arithmetic shift; ≥ 63 steps leave only the sign).
fn coarser(index: i64, shift: i32) -> i64 {
    index >> shift.clamp(0, 63)
}

/// The grid layout of `bins` bins over exactly `[lo, hi]`, if there is one:
/// a power-of-two width `w ≥ 2^−126` with `lo = j·w`, `hi = (j + bins)·w` and
/// `lo ≤ 0 ≤ hi`. (A hand-written one may be coarser than its data needs; it
/// is kept as it is, and grows from there like any grid histogram.)
fn grid_layout(lo: f64, hi: f64, bins: usize) -> Option<Layout> {
    if !(lo <= 0.0 && hi >= 0.0 && hi > lo) {
        return None;
    }
    let exponent = ((hi - lo) / bins as f64).log2().round();
    if !(MIN_EXPONENT as f64..=127.0).contains(&exponent) {
        return None;
    }
    let exponent = exponent as i32;
    let w = pow2(exponent);
    let offset = (lo / w).round();
    if offset * w != lo || (offset + bins as f64) * w != hi {
        return None;
    }
    Some(Layout::Grid { exponent, offset: offset as i64 })
}

/// The grid bins of finite `values` for bins of width 2^−e ≤ 1 (`inv` =
/// 2^e, an exact power of two, and `offset` the grid index of the first
/// bin): `floor(v·inv) − offset`, at least 0 (the caller caps it at the last
/// bin). `v·inv` is exact, so its floor is the exact grid index (subtracting
/// the offset first could round). With bins no wider than 1 the product
/// stays within ±2^24·bins, so f32 and i32 are exact. This loop is
/// calibration's hot spot: on x86-64 with AVX2 (detected at run time) it runs
/// 8 lanes at a time with `vroundps`; elsewhere the floor is truncation
/// corrected below zero, since `f32::floor` is a library call on baseline
/// x86-64. Both give the same bins for values inside the caller's range.
fn grid_bins_f32(values: &[f32], inv: f32, offset: i32, out: &mut [u32]) {
    let n = values.len().min(out.len());
    let mut done = 0;
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2, the only feature `grid_bins_avx2` enables.
        done = unsafe { grid_bins_avx2(&values[..n], inv, offset, &mut out[..n]) };
    }
    for (o, &v) in out[done..n].iter_mut().zip(&values[done..n]) {
        let scaled = v * inv;
        let truncated = scaled as i32;
        let floor = truncated - i32::from((truncated as f32) > scaled);
        // |floor|, |offset| ≤ 2^21: no overflow; below 0 only by a wrong
        // caller range, clamped like the top.
        *o = (floor - offset).max(0) as u32;
    }
}

/// [`grid_bins_f32`] for the leading multiple of 8 values (`values` and `out`
/// equally long); returns how many it did. The index is clamped to
/// [0, 2^24] in f32 before the conversion, so it is exact for every finite
/// value and a wrong caller range only miscounts.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn grid_bins_avx2(values: &[f32], inv: f32, offset: i32, out: &mut [u32]) -> usize {
    use std::arch::x86_64::*;
    let (inv, offset) = (_mm256_set1_ps(inv), _mm256_set1_ps(offset as f32));
    let (zero, top) = (_mm256_setzero_ps(), _mm256_set1_ps((1 << 24) as f32));
    let whole = values.len() / 8 * 8;
    for (v, o) in values[..whole].chunks_exact(8).zip(out[..whole].chunks_exact_mut(8)) {
        // SAFETY: `v` and `o` hold 8 elements each; unaligned loads and stores.
        unsafe {
            let scaled = _mm256_mul_ps(_mm256_loadu_ps(v.as_ptr()), inv);
            let floor = _mm256_round_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(scaled);
            let bin = _mm256_min_ps(_mm256_max_ps(_mm256_sub_ps(floor, offset), zero), top);
            _mm256_storeu_si256(o.as_mut_ptr().cast(), _mm256_cvttps_epi32(bin));
        }
    }
    whole
}

/// The smallest and largest of `values` as f64, `None` when empty, or an
/// error if one is not finite.
fn min_max(values: &[f32]) -> Result<Option<(f32, f32)>, String> {
    let Some(&first) = values.first() else { return Ok(None) };
    let (lo, hi, finite) = values
        .iter()
        .fold((first, first, true), |(lo, hi, finite), &v| (lo.min(v), hi.max(v), finite & v.is_finite()));
    if !finite {
        return Err("a histogram only counts finite values (got NaN or an infinity)".into());
    }
    Ok(Some((lo, hi)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector path of `grid_bins_f32` (AVX2 where the CPU has it) gives
    /// the bins of the scalar formula `floor(v·2^e) − offset`, for values on
    /// and between bin edges, negative and positive, and for lengths that
    /// leave a scalar tail.
    #[test]
    fn grid_bins_match_the_exact_floor() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        };
        for exponent in [0, -1, -7, -20] {
            let width = pow2(exponent) as f32;
            let offset = -300i32;
            // Bins offset .. offset + 600: values from −300 to +300 bin widths,
            // a third of them exactly on an edge.
            let values: Vec<f32> = (0..1003)
                .map(|i| {
                    let bin = (next() * 600.0) as i32 - 300;
                    let within = if i % 3 == 0 { 0.0 } else { next() };
                    (bin as f32 + within) * width
                })
                .collect();
            let mut got = vec![0u32; values.len()];
            grid_bins_f32(&values, f32::powi(2.0, -exponent), offset, &mut got);
            for (&v, &bin) in values.iter().zip(&got) {
                let want = ((v as f64 / width as f64).floor() as i64 - offset as i64).max(0) as u32;
                assert_eq!(bin, want, "value {v} at exponent {exponent}");
            }
        }
        #[cfg(target_arch = "x86_64")]
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("note: no AVX2 on this CPU; only the scalar histogram binning was tested");
        }
    }
}
