//! Deterministic mutations of seed inputs. Input number `i` of a run with
//! seed `s` depends only on `(s, i)` and the seeds, so any input a run finds
//! can be made again alone (`qfuzz TARGET --seed s --only i`).

/// SplitMix64: small, fast, and good enough to pick mutations.
pub struct Rng(u64);

impl Rng {
    /// The generator for input `index` of a run seeded with `seed`.
    pub fn for_input(seed: u64, index: u64) -> Rng {
        let mut rng = Rng(seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.next_u64();
        rng
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
}

/// Input `index`: a seed with 1 to 8 mutations (input 0 of each seed is the
/// seed itself, so the corpus is checked unchanged first).
pub fn input(seeds: &[Vec<u8>], dictionary: &[&[u8]], seed: u64, index: u64) -> Vec<u8> {
    if let Some(unchanged) = seeds.get(index as usize) {
        return unchanged.clone();
    }
    let mut rng = Rng::for_input(seed, index);
    let mut data = if seeds.is_empty() { Vec::new() } else { seeds[rng.below(seeds.len())].clone() };
    for _ in 0..1 + rng.below(8) {
        mutate(&mut data, seeds, dictionary, &mut rng);
    }
    data
}

/// One mutation, chosen at random.
fn mutate(data: &mut Vec<u8>, seeds: &[Vec<u8>], dictionary: &[&[u8]], rng: &mut Rng) {
    const INTERESTING: [u8; 8] = [0, 1, 0x7f, 0x80, 0xff, b'0', b'9', b'-'];
    let len = data.len();
    let at = |rng: &mut Rng| if len == 0 { 0 } else { rng.below(len) };
    match rng.below(9) {
        0 if len > 0 => {
            let i = at(rng);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = at(rng);
            data[i] = INTERESTING[rng.below(INTERESTING.len())];
        }
        2 if !dictionary.is_empty() => {
            let word = dictionary[rng.below(dictionary.len())];
            let i = if len == 0 { 0 } else { rng.below(len + 1) };
            data.splice(i..i, word.iter().copied());
        }
        3 if len > 0 => {
            let start = at(rng);
            let end = (start + 1 + rng.below(64)).min(len);
            data.drain(start..end);
        }
        4 if len > 0 => {
            let start = at(rng);
            let end = (start + 1 + rng.below(256)).min(len);
            let span = data[start..end].to_vec();
            let i = rng.below(len + 1);
            data.splice(i..i, span);
        }
        5 if !seeds.is_empty() => {
            let other = &seeds[rng.below(seeds.len())];
            if !other.is_empty() {
                let from = rng.below(other.len());
                let to = (from + 1 + rng.below(512)).min(other.len());
                let i = if len == 0 { 0 } else { rng.below(len + 1) };
                data.truncate(i);
                data.extend_from_slice(&other[from..to]);
            }
        }
        6 if len > 0 => data.truncate(rng.below(len)),
        7 => {
            let i = if len == 0 { 0 } else { rng.below(len + 1) };
            let bytes: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next_u64() as u8).collect();
            data.splice(i..i, bytes);
        }
        _ if len > 1 => {
            // Swap two bytes.
            let (i, j) = (at(rng), at(rng));
            data.swap(i, j);
        }
        _ => data.push(rng.next_u64() as u8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_depend_only_on_seed_and_index() {
        let seeds = vec![b"func.func @f() {\n  func.return\n}\n".to_vec(), b"module {}".to_vec()];
        let words: &[&[u8]] = &[b"tensor<"];
        assert_eq!(input(&seeds, words, 1, 0), seeds[0], "the first inputs are the seeds");
        let a: Vec<Vec<u8>> = (2..200).map(|i| input(&seeds, words, 7, i)).collect();
        let b: Vec<Vec<u8>> = (2..200).map(|i| input(&seeds, words, 7, i)).collect();
        assert_eq!(a, b);
        let c: Vec<Vec<u8>> = (2..200).map(|i| input(&seeds, words, 8, i)).collect();
        assert_ne!(a, c, "another seed gives other inputs");
        assert!(a.iter().filter(|x| !seeds.contains(x)).count() > 150, "most inputs are mutated");
    }
}
