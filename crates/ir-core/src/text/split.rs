//! `// -----` split-input mode: one file, many independent cases.

/// One case of a split input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputChunk<'a> {
    /// The case's text.
    pub text: &'a [u8],
    /// Lines of the file before the case (add to the case's line numbers).
    pub line_offset: u32,
}

/// Splits `source` at lines that are exactly `// -----` (surrounding spaces
/// allowed). The separator lines belong to no chunk; line numbers stay those of
/// the whole file through `line_offset`.
pub fn split_input(source: &[u8]) -> Vec<InputChunk<'_>> {
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0u32;
    let mut line = 0u32;
    let mut pos = 0usize;
    while pos < source.len() {
        let end = source[pos..].iter().position(|&b| b == b'\n').map_or(source.len(), |i| pos + i);
        let text = &source[pos..end];
        let trimmed = text.trim_ascii();
        if trimmed == b"// -----" {
            chunks.push(InputChunk { text: &source[start..pos], line_offset: start_line });
            start = (end + 1).min(source.len());
            start_line = line + 1;
        }
        line += 1;
        pos = end + 1;
    }
    chunks.push(InputChunk { text: &source[start.min(source.len())..], line_offset: start_line });
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_separator_lines_and_keeps_line_offsets() {
        let src = b"a\nb\n// -----\nc\n  // -----  \nd";
        let chunks = split_input(src);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0], InputChunk { text: b"a\nb\n", line_offset: 0 });
        assert_eq!(chunks[1], InputChunk { text: b"c\n", line_offset: 3 });
        assert_eq!(chunks[2], InputChunk { text: b"d", line_offset: 5 });
    }

    #[test]
    fn no_separator_is_one_chunk() {
        assert_eq!(split_input(b"x\ny\n").len(), 1);
        assert_eq!(split_input(b"").len(), 1);
    }
}
