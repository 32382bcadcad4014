//! Text forms of numbers and tensors for people.
//!
//! - [`number`]: like C's `%g` with six significant digits (`0.25`, `-3`,
//!   `1.5e-07` as `1.5e-7`), `nan`, `inf`, `-inf`.
//! - [`tensor`]: numpy-like nested brackets, elements right-aligned to one
//!   width, rows wrapped at 75 columns; above 1000 elements every dimension
//!   longer than 6 shows its first and last three entries around `...`, as
//!   numpy's default print options do.
//! - [`integers`]: the exact values of an integer tensor; int64 values above
//!   2^53 do not survive a trip through f64, so integers never take it.

use qopt_interp::Tensor;

/// Tensors with more elements than this are summarized.
const SUMMARIZE_ABOVE: usize = 1000;
/// Entries shown at each end of a summarized dimension.
const EDGE_ITEMS: usize = 3;
/// Column at which rows wrap.
const LINE_WIDTH: usize = 75;

/// `v` with six significant digits, trailing zeros dropped.
pub(crate) fn number(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let exponent = v.abs().log10().floor() as i32;
    if (-5..6).contains(&exponent) {
        let decimals = (5 - exponent).max(0) as usize;
        trim_zeros(&format!("{v:.decimals$}")).to_string()
    } else {
        let text = format!("{v:.5e}");
        match text.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim_zeros(mantissa)),
            None => text,
        }
    }
}

/// `1.2500` → `1.25`, `3.000` → `3`; text without a point is kept.
fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The values of an integer tensor, exactly; `None` for floats and booleans.
pub(crate) fn integers(t: &Tensor) -> Option<Vec<i64>> {
    Some(match t {
        Tensor::I8(a) => a.iter().map(|&v| i64::from(v)).collect(),
        Tensor::U8(a) => a.iter().map(|&v| i64::from(v)).collect(),
        Tensor::I16(a) => a.iter().map(|&v| i64::from(v)).collect(),
        Tensor::I32(a) => a.iter().map(|&v| i64::from(v)).collect(),
        Tensor::I64(a) => a.iter().copied().collect(),
        Tensor::F32(_) | Tensor::F64(_) | Tensor::Bool(_) => return None,
    })
}

/// The numpy-like text of `t` (see the module docs), without a final newline.
pub(crate) fn tensor(t: &Tensor) -> String {
    let cells: Vec<String> = match t {
        Tensor::Bool(a) => a.iter().map(|&b| if b { "True" } else { "False" }.to_string()).collect(),
        Tensor::F32(_) | Tensor::F64(_) => t.to_f64_vec().into_iter().map(number).collect(),
        _ => integers(t).unwrap_or_default().into_iter().map(|v| v.to_string()).collect(),
    };
    let shape = t.shape();
    if shape.is_empty() {
        return cells.first().cloned().unwrap_or_default();
    }
    let summarize = t.len() > SUMMARIZE_ABOVE;
    let mut printer = Printer { cells: &cells, shape, summarize, width: 0, out: String::new() };
    let mut shown = Vec::new();
    printer.shown(0, 0, &mut shown);
    printer.width = shown.iter().map(|&i| cells[i].len()).max().unwrap_or(0);
    printer.block(0, 0);
    printer.out
}

struct Printer<'a> {
    cells: &'a [String],
    shape: &'a [usize],
    summarize: bool,
    width: usize,
    out: String,
}

impl Printer<'_> {
    /// The indices shown along dimension `dim`: `None` stands for `...`.
    fn indices(&self, dim: usize) -> Vec<Option<usize>> {
        let n = self.shape[dim];
        if self.summarize && n > 2 * EDGE_ITEMS {
            let head = (0..EDGE_ITEMS).map(Some);
            let tail = (n - EDGE_ITEMS..n).map(Some);
            head.chain(std::iter::once(None)).chain(tail).collect()
        } else {
            (0..n).map(Some).collect()
        }
    }

    /// Elements per step along `dim`.
    fn stride(&self, dim: usize) -> usize {
        self.shape[dim + 1..].iter().product()
    }

    /// Collects the row-major indices of the shown elements under `base`.
    fn shown(&self, dim: usize, base: usize, out: &mut Vec<usize>) {
        for i in self.indices(dim).into_iter().flatten() {
            let at = base + i * self.stride(dim);
            if dim + 1 == self.shape.len() {
                out.push(at);
            } else {
                self.shown(dim + 1, at, out);
            }
        }
    }

    /// Writes the sub-array of dimension `dim` starting at element `base`.
    fn block(&mut self, dim: usize, base: usize) {
        self.out.push('[');
        let innermost = dim + 1 == self.shape.len();
        let indent = " ".repeat(dim + 1);
        let mut column = dim + 1;
        for (k, i) in self.indices(dim).into_iter().enumerate() {
            if innermost {
                let item = match i {
                    Some(i) => format!("{:>w$}", self.cells[base + i * self.stride(dim)], w = self.width),
                    None => "...".to_string(),
                };
                if k > 0 && column + 2 + item.len() > LINE_WIDTH {
                    self.out.push_str(",\n");
                    self.out.push_str(&indent);
                    column = dim + 1;
                } else if k > 0 {
                    self.out.push_str(", ");
                    column += 2;
                }
                column += item.len();
                self.out.push_str(&item);
            } else {
                if k > 0 {
                    // Blocks of dimension d are separated by rank − d − 1 line breaks.
                    self.out.push(',');
                    self.out.push_str(&"\n".repeat(self.shape.len() - dim - 1));
                    self.out.push_str(&indent);
                }
                match i {
                    Some(i) => self.block(dim + 1, base + i * self.stride(dim)),
                    None => self.out.push_str("..."),
                }
            }
        }
        self.out.push(']');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_npy::RawArray;

    #[test]
    fn numbers_have_six_significant_digits() {
        assert_eq!(number(0.25), "0.25");
        assert_eq!(number(-3.0), "-3");
        assert_eq!(number(1.0 / 3.0), "0.333333");
        assert_eq!(number(123456.7), "123457");
        assert_eq!(number(1234567.0), "1.23457e6");
        assert_eq!(number(1.5e-7), "1.5e-7");
        assert_eq!(number(0.0001), "0.0001");
        assert_eq!(number(f64::NAN), "nan");
        assert_eq!(number(f64::NEG_INFINITY), "-inf");
        assert_eq!(number(0.0), "0");
    }

    #[test]
    fn small_tensors_print_in_full() {
        let t = Tensor::from_f32(&[2, 3], vec![1.0, -2.5, 3.0, 0.5, 10.0, -1.0]).unwrap();
        assert_eq!(tensor(&t), "[[   1, -2.5,    3],\n [ 0.5,   10,   -1]]");
        let t = Tensor::from_f32(&[2, 1, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(tensor(&t), "[[[1, 2]],\n\n [[3, 4]]]");
        let b = Tensor::from_raw(&RawArray::from_elements(vec![2], &[true, false]).unwrap()).unwrap();
        assert_eq!(tensor(&b), "[ True, False]");
        let s = Tensor::from_f32(&[], vec![7.0]).unwrap();
        assert_eq!(tensor(&s), "7");
    }

    #[test]
    fn int64_values_print_exactly() {
        let values = [9_007_199_254_740_993i64, -9_223_372_036_854_775_807, i64::MIN];
        let t = Tensor::from_raw(&RawArray::from_elements(vec![3], &values).unwrap()).unwrap();
        assert_eq!(tensor(&t), "[    9007199254740993, -9223372036854775807, -9223372036854775808]");
    }

    #[test]
    fn large_tensors_are_summarized_and_rows_wrap() {
        let t = Tensor::from_f32(&[2000], (0..2000).map(|i| i as f32).collect()).unwrap();
        assert_eq!(tensor(&t), "[   0,    1,    2, ..., 1997, 1998, 1999]");
        let t = Tensor::from_f32(&[30], vec![100.0; 30]).unwrap();
        let text = tensor(&t);
        assert!(text.lines().count() > 1, "{text}");
        assert!(text.lines().all(|l| l.len() <= LINE_WIDTH), "{text}");
        assert_eq!(text.matches("100").count(), 30);
    }
}
