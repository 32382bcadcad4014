//! Unit tests of the search's metric, arguments and report text.

use crate::search::evaluate::{argmax, Outputs, Target};
use crate::search::settings::{parse_max_drop, parse_min_sqnr};

/// Three samples of three classes: top-1 classes 2, 0, 1.
fn outputs() -> Outputs {
    Outputs { values: vec![0.1, 0.2, 0.9, 5.0, -1.0, 4.0, 0.0, 0.5, 0.25], per_sample: 3 }
}

#[test]
fn accuracy_counts_top1_hits_against_labels() {
    assert_eq!(Target::Labels(vec![2, 0, 1]).metric(&outputs()), 1.0);
    assert_eq!(Target::Labels(vec![2, 1, 0]).metric(&outputs()), 1.0 / 3.0);
    assert_eq!(Target::Labels(vec![0, 1, 2]).metric(&outputs()), 0.0);
}

#[test]
fn agreement_compares_top1_classes() {
    let same = Target::Agreement { classes: vec![2, 0, 1], float: true };
    assert_eq!(same.metric(&outputs()), 1.0);
    let one_off = Target::Agreement { classes: vec![2, 2, 1], float: false };
    assert_eq!(one_off.metric(&outputs()), 2.0 / 3.0);
}

#[test]
fn max_drop_reads_percentages_and_fractions() {
    assert_eq!(parse_max_drop("0.1%").unwrap(), 0.1 * 0.01);
    assert_eq!(parse_max_drop(" 2 % ").unwrap(), 0.02);
    assert_eq!(parse_max_drop("0.001").unwrap(), 0.001);
    assert_eq!(parse_max_drop("0").unwrap(), 0.0);
    for bad in ["", "%", "abc", "-1%", "100%", "1.5", "nan", "inf%"] {
        assert!(parse_max_drop(bad).is_err(), "{bad}");
    }
}

#[test]
fn argmax_takes_the_first_of_equals() {
    assert_eq!(argmax(&[0.0, 3.0, 3.0, -1.0]), 1);
    assert_eq!(argmax(&[-5.0]), 0);
}

#[test]
fn min_sqnr_is_a_finite_number_of_decibels_or_nothing() {
    assert_eq!(parse_min_sqnr("").unwrap(), None);
    assert_eq!(parse_min_sqnr(" 31.5 ").unwrap(), Some(31.5));
    assert_eq!(parse_min_sqnr("-3").unwrap(), Some(-3.0));
    for bad in ["30dB", "inf", "NaN", "x"] {
        assert!(
            parse_min_sqnr(bad).unwrap_err().contains("'min-sqnr' must be a number of decibels"),
            "{bad}"
        );
    }
}
