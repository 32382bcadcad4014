//! Properties of the calibration histogram ([`Histogram`]) and of the built-in
//! observers' chunk-and-merge contract: counts are exact, and the result does
//! not depend on how the data was cut into chunks or in which order exact
//! merges happen.

use proptest::prelude::*;
use proptest::sample::Index;
use qopt_quant::Histogram;
use qopt_quant::{value_range, ObservedBatch, Observer, ObserverStats, QuantMethods, DEFAULT_BINS};
use std::sync::Arc;

/// Finite f32 values of every kind, below 1e37 in magnitude (larger ones can
/// make the grid's edges overflow f32, which is an error tested separately).
fn finite() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        Just(-0.0f32),
        -1e3f32..1e3,
        -1e37f32..1e37,
        prop::num::f32::NORMAL.prop_filter("below 1e37", |v| v.abs() < 1e37),
        prop::num::f32::SUBNORMAL,
        prop_oneof![1e-38f32..1e-30, -1e-30f32..-1e-38],
    ]
}

/// Value sets of various distributions.
fn values() -> impl Strategy<Value = Vec<f32>> {
    prop_oneof![
        prop::collection::vec(finite(), 0..300),
        (0usize..300).prop_map(|n| vec![0.0; n]),
        prop::collection::vec(-1e6f32..-1e-6, 1..300),
        prop::collection::vec(0f32..1e4, 1..300),
        prop::collection::vec(prop_oneof![1e30f32..1e37, -1e37f32..-1e30], 1..100),
        prop::collection::vec(prop_oneof![1e-38f32..1e-30, -1e-30f32..-1e-38], 1..100),
        finite().prop_map(|v| vec![v]),
        (finite(), 1usize..50).prop_map(|(v, n)| vec![v; n]),
        (prop::collection::vec(-1f32..1.0, 1..200), finite()).prop_map(|(mut v, outlier)| {
            v.push(outlier);
            v
        }),
    ]
}

/// Bin counts, small ones more often.
fn bins() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=8, 1usize..=4096]
}

/// `values` cut at `cuts` (indices into `0..=len`) into consecutive chunks.
fn chunks<'a>(values: &'a [f32], cuts: &[Index]) -> Vec<&'a [f32]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(values.len() + 1)).collect();
    at.push(0);
    at.push(values.len());
    at.sort_unstable();
    at.windows(2).map(|w| &values[w[0]..w[1]]).collect()
}

/// A histogram of `bins` bins after adding `values` in one call.
fn histogram(bins: usize, values: &[f32]) -> Result<Histogram, String> {
    let mut h = Histogram::empty(bins);
    h.add(values)?;
    Ok(h)
}

/// Every value lies in `[edge(k), edge(k + 1))` of a bin `k`, and counting them
/// that way gives the histogram's counts; the grid is the canonical one.
fn check_exact(h: &Histogram, values: &[f32]) -> Result<(), TestCaseError> {
    prop_assert_eq!(h.total(), values.len() as i64);
    let bins = h.bins();
    if values.is_empty() {
        prop_assert!(h.counts().iter().all(|&c| c == 0));
        return Ok(());
    }
    prop_assert!(h.on_grid());
    let w = h.bin_width();
    let mut reference = vec![0i64; bins];
    for &v in values {
        let v = v as f64;
        let mut k = ((v - h.edge(0)) / w).floor().clamp(0.0, (bins - 1) as f64) as usize;
        while k > 0 && v < h.edge(k) {
            k -= 1;
        }
        while k + 1 < bins && v >= h.edge(k + 1) {
            k += 1;
        }
        prop_assert!(
            h.edge(k) <= v && v < h.edge(k + 1),
            "{} is outside [{}, {})",
            v,
            h.hist_min(),
            h.hist_max()
        );
        reference[k] += 1;
    }
    prop_assert_eq!(&reference[..], h.counts());
    // The grid: a power-of-two width, 0 inside the range and on an edge, edges
    // exact in f32, and the finest width that holds the values.
    prop_assert_eq!(w.log2().fract(), 0.0);
    prop_assert!(w >= f64::powi(2.0, -126));
    prop_assert!(h.edge(0) <= 0.0 && h.edge(bins) >= 0.0);
    prop_assert_eq!((h.edge(0) / w).fract(), 0.0);
    prop_assert_eq!(h.hist_min() as f64, h.edge(0));
    prop_assert_eq!(h.hist_max() as f64, h.edge(bins));
    if w > f64::powi(2.0, -126) {
        let half = w / 2.0;
        let lo = values.iter().fold(0.0f64, |m, &v| m.min(v as f64));
        let hi = values.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let span = (hi / half).floor().max(-1.0) - (lo / half).floor();
        prop_assert!(span >= bins as f64, "width {} is not the finest: {} would do", w, half);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// `total()` is the number of values and every value is counted in its bin.
    #[test]
    fn counts_are_exact(values in values(), bins in bins()) {
        match histogram(bins, &values) {
            Ok(h) => check_exact(&h, &values)?,
            Err(e) => {
                // Only one bin cannot hold values of both signs.
                let negative = values.iter().any(|&v| v < 0.0);
                let other = values.iter().any(|&v| v >= 0.0);
                prop_assert!(bins == 1 && negative && other, "{}", e);
            }
        }
    }

    /// Adding in one call, or in chunks each counted in a fresh histogram and
    /// merged in order or in reverse order, or added one after the other, gives
    /// the same histogram.
    #[test]
    fn chunking_does_not_matter(
        values in values(),
        bins in bins(),
        cuts in prop::collection::vec(any::<Index>(), 0..8),
    ) {
        let one = histogram(bins, &values);
        let parts = chunks(&values, &cuts);
        let partials: Result<Vec<Histogram>, String> = parts.iter().map(|c| histogram(bins, c)).collect();
        let merged = |order: &mut dyn Iterator<Item = &Histogram>| -> Result<Histogram, String> {
            let mut h = Histogram::empty(bins);
            for p in order {
                h.merge(p)?;
            }
            Ok(h)
        };
        let forward = partials.as_ref().map_err(Clone::clone).and_then(|p| merged(&mut p.iter()));
        let backward = partials.as_ref().map_err(Clone::clone).and_then(|p| merged(&mut p.iter().rev()));
        let mut sequential = Histogram::empty(bins);
        let sequential = parts.iter().try_for_each(|c| sequential.add(c)).map(|()| sequential);
        match one {
            Ok(one) => {
                prop_assert_eq!(&forward, &Ok(one.clone()));
                prop_assert_eq!(&backward, &Ok(one.clone()));
                prop_assert_eq!(&sequential, &Ok(one));
            }
            Err(_) => prop_assert!(forward.is_err() && backward.is_err() && sequential.is_err()),
        }
    }

    /// A histogram after add(A) then add(B) equals one after add(A ++ B).
    #[test]
    fn a_then_b_is_a_plus_b(a in values(), b in values(), bins in bins()) {
        let mut then = Histogram::empty(bins);
        let then = then.add(&a).and_then(|()| then.add(&b)).map(|()| then);
        let both = histogram(bins, &[a.clone(), b.clone()].concat());
        match both {
            Ok(both) => {
                check_exact(&both, &[a, b].concat())?;
                prop_assert_eq!(then, Ok(both));
            }
            Err(_) => prop_assert!(then.is_err()),
        }
    }

    /// Storing a histogram (counts, hist_min, hist_max) and reading it back
    /// gives it again, and data merged into either gives the same result.
    #[test]
    fn stored_round_trip(a in values(), b in values(), bins in bins()) {
        let Ok(h) = histogram(bins, &a) else { return Ok(()) };
        let stored = Histogram::from_stored(h.counts().to_vec(), h.hist_min(), h.hist_max()).unwrap();
        prop_assert_eq!(&stored, &h);
        prop_assert!(stored.on_grid());
        let (mut h1, mut h2) = (h.clone(), stored.clone());
        prop_assert_eq!(h1.add(&b).map(|()| h1), h2.add(&b).map(|()| h2));
        if let Ok(later) = histogram(bins, &b) {
            let (mut h1, mut h2) = (h.clone(), stored);
            prop_assert_eq!(h1.merge(&later).map(|()| h1), h2.merge(&later).map(|()| h2));
        }
    }

    /// A stored histogram off the grid counts values inside its range into its
    /// bins and refuses (without changing) values outside it and grid data.
    #[test]
    fn off_grid_stored(
        counts in prop::collection::vec(0i64..100, 1..64),
        lo in -100f32..100.0,
        width in 0.01f32..50.0,
        inside in prop::collection::vec(0f64..=1.0, 0..50),
        outside in prop_oneof![1e-3f32..1e6, -1e6f32..-1e-3],
    ) {
        let hi = lo + width;
        prop_assume!(counts.iter().any(|&c| c > 0));
        let h = Histogram::from_stored(counts.clone(), lo, hi).unwrap();
        prop_assume!(!h.on_grid());
        prop_assert_eq!((h.hist_min(), h.hist_max()), (lo, hi));
        let (lo64, hi64) = (lo as f64, hi as f64);
        let values: Vec<f32> = inside
            .iter()
            .map(|&u| (lo64 + u * (hi64 - lo64)) as f32)
            .filter(|&v| (v as f64) >= lo64 && (v as f64) <= hi64)
            .collect();
        let mut grown = h.clone();
        grown.add(&values).unwrap();
        prop_assert_eq!(grown.total(), h.total() + values.len() as i64);
        prop_assert!(!grown.on_grid());
        let slack = 1e-9 * (hi64 - lo64);
        for (k, (&after, &before)) in grown.counts().iter().zip(h.counts()).enumerate() {
            let expected = values
                .iter()
                .filter(|&&v| {
                    let v = v as f64;
                    (grown.edge(k) - slack <= v) && (v < grown.edge(k + 1) + slack)
                })
                .count() as i64;
            // A value on an edge may land on either side of it.
            prop_assert!(after - before <= expected, "bin {}: {} new, {} possible", k, after - before, expected);
        }
        let bad = if outside > 0.0 { hi + outside } else { lo + outside };
        prop_assume!(bad.is_finite() && (bad > hi || bad < lo));
        let mut refused = grown.clone();
        prop_assert!(refused.add(&[bad]).is_err());
        prop_assert_eq!(&refused, &grown);
        prop_assert!(refused.add(&[lo, bad, hi]).is_err());
        prop_assert_eq!(&refused, &grown);
        if let Ok(grid) = histogram(counts.len(), &[lo, hi]) {
            prop_assert!(refused.merge(&grid).is_err());
            prop_assert_eq!(&refused, &grown);
        }
    }
}

#[test]
fn regressions() {
    // A grid of width 2^-126 (all zeros) growing by ≥ 64 powers of two
    // shifted an i64 by ≥ 64 bits (a panic in debug builds).
    let mut h = Histogram::empty(2048);
    h.add(&[0.0]).unwrap();
    h.add(&[1.0]).unwrap();
    assert_eq!(h, histogram(2048, &[0.0, 1.0]).unwrap());
    let mut m = histogram(2048, &[1.0]).unwrap();
    m.merge(&histogram(2048, &[0.0, 0.0]).unwrap()).unwrap();
    assert_eq!(m, histogram(2048, &[0.0, 0.0, 1.0]).unwrap());

    // One bin: negative values fit (0 is the upper edge); both signs do not.
    let h = histogram(1, &[-1.0, -3.0]).unwrap();
    assert_eq!((h.hist_min(), h.hist_max(), h.counts()), (-4.0, 0.0, &[2][..]));
    assert!(histogram(1, &[-1.0, 1.0]).unwrap_err().contains("1 bin"));
    // All negative: no bin wasted above 0.
    let h = histogram(4, &[-4.0, -1.0]).unwrap();
    assert_eq!((h.hist_min(), h.hist_max()), (-4.0, 0.0));

    // Values whose grid edges would overflow f32 are an error, not an infinite edge.
    for v in [f32::MAX, -f32::MAX, 2f32.powi(127)] {
        let mut h = Histogram::empty(2048);
        assert!(h.add(&[v]).unwrap_err().contains("too large"), "{v}");
        assert_eq!(h, Histogram::empty(2048));
    }
    // Non-finite values are an error.
    for v in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        let mut h = histogram(16, &[1.0]).unwrap();
        assert!(h.add(&[0.5, v]).is_err(), "{v}");
        assert_eq!(h, histogram(16, &[1.0]).unwrap());
    }

    // Off the grid, 0 is not implicitly inside: [1, 5] refuses 0.5 and 0.
    let mut h = Histogram::from_stored(vec![1, 1, 1], 1.0, 5.5).unwrap();
    assert!(!h.on_grid());
    assert!(h.add(&[0.5]).is_err());
    assert!(h.add(&[0.0]).is_err());
    h.add(&[1.0, 5.5]).unwrap();
    assert_eq!(h.counts(), [2, 1, 2]);

    // A stored histogram without counts is empty, whatever its range.
    let h = Histogram::from_stored(vec![0; 8], -3.0, 1.0).unwrap();
    assert_eq!(h, Histogram::empty(8));

    // Counts may not add up past i64::MAX.
    assert!(Histogram::from_stored(vec![i64::MAX, 1], 0.0, 2.0).is_err());
    let mut h = Histogram::from_stored(vec![i64::MAX - 1, 0], 0.0, 2.0).unwrap();
    assert!(h.on_grid());
    h.add(&[1.0]).unwrap();
    assert!(h.add(&[1.0]).is_err());
    assert!(h.merge(&h.clone()).is_err());
    assert_eq!(h.total(), i64::MAX);

    // A stored range on the grid in all but an exact width is off the grid.
    let h = Histogram::from_stored(vec![1, 1, 1], 0.0, 3.0000002).unwrap();
    assert!(!h.on_grid());
}

// ---------------------------------------------------------------------------
// Observers
// ---------------------------------------------------------------------------

/// Statistics of an observer of kind `observer` over a `[len, channels]`
/// tensor, per channel along axis 1 when `axis`.
fn config(observer: &str, channels: usize, axis: bool, bins: Option<usize>) -> ObserverStats {
    ObserverStats {
        observer: observer.to_string(),
        axis: axis.then_some(1),
        channels: if axis { channels } else { 1 },
        min: Vec::new(),
        max: Vec::new(),
        samples: 0,
        bins,
        averaging_constant: Some(0.25),
        percentile: None,
        histogram: None,
        means: None,
        batch_ranges: Vec::new(),
    }
}

/// `calibrate`'s contract: every chunk of batches starts from
/// `empty_like(stored)`, sees its batches, and is merged into `stored` in
/// sample order.
fn calibrate(
    observer: &Arc<dyn Observer>,
    stored: &mut ObserverStats,
    batches: &[Vec<f32>],
    channels: usize,
    cuts: &[Index],
) -> Result<(), String> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(batches.len() + 1)).collect();
    at.extend([0, batches.len()]);
    at.sort_unstable();
    let mut partials = Vec::new();
    for w in at.windows(2) {
        let mut partial = stored.empty_like();
        for values in &batches[w[0]..w[1]] {
            let shape = [values.len() / channels, channels];
            observer.observe(
                &mut partial,
                &ObservedBatch { values, shape: &shape, range: value_range(values) },
            )?;
        }
        partials.push(partial);
    }
    for partial in partials {
        observer.merge(stored, partial)?;
    }
    Ok(())
}

/// Batches of `[rows, channels]` values.
fn batches(channels: usize) -> impl Strategy<Value = Vec<Vec<f32>>> {
    prop::collection::vec(
        (0usize..6).prop_flat_map(move |rows| prop::collection::vec(-1e4f32..1e4, rows * channels)),
        0..10,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Where calibration cuts the data into chunks does not matter, and
    /// calibrating on A then B equals calibrating on A + B, for every built-in
    /// observer.
    #[test]
    fn observers_ignore_chunking(
        channels in 1usize..4,
        axis in any::<bool>(),
        bins in prop_oneof![Just(None), (2usize..300).prop_map(Some)],
        a in batches(3),
        b in batches(3),
        cuts in prop::collection::vec(any::<Index>(), 0..5),
        more_cuts in prop::collection::vec(any::<Index>(), 0..5),
    ) {
        // Batches are drawn for 3 channels; use the first `channels` of each row.
        let trim = |batches: &[Vec<f32>]| -> Vec<Vec<f32>> {
            batches.iter().map(|v| v.chunks(3).flat_map(|row| row[..channels].to_vec()).collect()).collect()
        };
        let (a, b) = (trim(&a), trim(&b));
        let methods = QuantMethods::default();
        for observer in methods.observers() {
            let per_tensor = observer.name() == "histogram";
            let template = config(observer.name(), channels, axis && !per_tensor, bins);
            prop_assert!(observer.check(&template).is_ok());
            let mut whole = template.clone();
            calibrate(observer, &mut whole, &[a.clone(), b.clone()].concat(), channels, &[])
                .map_err(TestCaseError::fail)?;
            let mut chunked = template.clone();
            calibrate(observer, &mut chunked, &a, channels, &cuts).map_err(TestCaseError::fail)?;
            calibrate(observer, &mut chunked, &b, channels, &more_cuts).map_err(TestCaseError::fail)?;
            prop_assert_eq!(&chunked, &whole, "observer {}", observer.name());
            let n: usize = a.iter().chain(&b).filter(|v| !v.is_empty()).count();
            prop_assert_eq!(whole.samples, n as i64);
            if per_tensor {
                let all: Vec<f32> = a.iter().chain(&b).flatten().copied().collect();
                match &whole.histogram {
                    Some(h) => {
                        prop_assert_eq!(h.bins(), bins.unwrap_or(DEFAULT_BINS));
                        check_exact(h, &all)?;
                    }
                    None => prop_assert!(all.is_empty()),
                }
            }
            if observer.name() != "moving-average" && whole.has_data() {
                // Exact min and max per channel.
                let rows = a.iter().chain(&b).flat_map(|v| v.chunks(channels.max(1)));
                let c = whole.channels;
                let mut lo = vec![f32::INFINITY; c];
                let mut hi = vec![f32::NEG_INFINITY; c];
                for row in rows {
                    for (j, &v) in row.iter().enumerate() {
                        let k = if c == 1 { 0 } else { j };
                        lo[k] = lo[k].min(v);
                        hi[k] = hi[k].max(v);
                    }
                }
                prop_assert_eq!(&whole.min, &lo);
                prop_assert_eq!(&whole.max, &hi);
            }
        }
    }

    /// The histogram observer merges exactly in any order, not only in sample order.
    #[test]
    fn histogram_observer_merges_in_any_order(
        parts in prop::collection::vec(prop::collection::vec(finite(), 0..50), 1..6),
        bins in 2usize..300,
    ) {
        let methods = QuantMethods::default();
        let observer = methods.observer("histogram").unwrap();
        let template = config("histogram", 1, false, Some(bins));
        let partials: Vec<ObserverStats> = parts
            .iter()
            .map(|values| {
                let mut p = template.empty_like();
                observer.observe(&mut p, &ObservedBatch { values, shape: &[values.len()], range: value_range(values) }).unwrap();
                p
            })
            .collect();
        let mut forward = template.clone();
        for p in partials.iter().cloned() {
            observer.merge(&mut forward, p).unwrap();
        }
        let mut backward = template.clone();
        for p in partials.iter().rev().cloned() {
            observer.merge(&mut backward, p).unwrap();
        }
        prop_assert_eq!(&forward, &backward);
        let all: Vec<f32> = parts.concat();
        if let Some(h) = &forward.histogram {
            check_exact(h, &all)?;
        }
    }
}
